// GPU check (ctest label gpu): the device computes the same bits as the host for
//   1. every seeded random element (random_values.h on the device vs kda_tensor's fill_random on the host), and
//   2. every float conversion (float_convert.h) over all 16-bit codes and a strided sweep of float bit patterns.
// Exit 0: identical; 1: a mismatch (the first few are printed); 77: no CUDA device (ctest counts it as skipped).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tensor/float_convert.h"
#include "tensor/generate.h"
#include "tensor/random_values.h"

namespace {

using kda::tensor::DType;

// In a function returning a failure count: report a CUDA error and count it as one failure.
#define CUDA_OK(expr)                                                                               \
  do {                                                                                              \
    const cudaError_t err_ = (expr);                                                                \
    if (err_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(err_)); \
      return 1;                                                                                     \
    }                                                                                               \
  } while (0)

__global__ void random_kernel(DType dtype, uint64_t seed, uint64_t stream, int64_t n, uint64_t* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = kda::tensor::random_element_bits(dtype, seed, stream, static_cast<uint64_t>(i));
}

// Conversions of one 32-bit input pattern p: out[7*i + k] for the k-th conversion.
__global__ void convert_kernel(const uint32_t* patterns, int64_t n, uint32_t* out) {
  using namespace kda::tensor;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint32_t p = patterns[i];
    const float f = fpconv::float_of(p);
    uint32_t* o = out + 7 * i;
    o[0] = float_to_float16(f);
    o[1] = float_to_bfloat16(f);
    o[2] = float_to_float8_e4m3fn(f);
    o[3] = float_to_float8_e5m2(f);
    o[4] = float_to_float4_e2m1(f);
    o[5] = fpconv::bits_of(float16_to_float(static_cast<uint16_t>(p)));
    o[6] = fpconv::bits_of(bfloat16_to_float(static_cast<uint16_t>(p)));
  }
}

void host_convert(uint32_t p, uint32_t* o) {
  using namespace kda::tensor;
  const float f = fpconv::float_of(p);
  o[0] = float_to_float16(f);
  o[1] = float_to_bfloat16(f);
  o[2] = float_to_float8_e4m3fn(f);
  o[3] = float_to_float8_e5m2(f);
  o[4] = float_to_float4_e2m1(f);
  o[5] = fpconv::bits_of(float16_to_float(static_cast<uint16_t>(p)));
  o[6] = fpconv::bits_of(bfloat16_to_float(static_cast<uint16_t>(p)));
}

int check_random() {
  int failures = 0;
  const int64_t n = (1 << 22) + 3;  // an odd tail exercises the float4 packing on the host side
  uint64_t* d_out = nullptr;
  CUDA_OK(cudaMalloc(&d_out, n * sizeof(uint64_t)));
  std::vector<uint64_t> got(n);
  const uint64_t seeds[][2] = {{42, 3}, {0xDEADBEEFCAFEull, 1ull << 40}};
  for (const auto& ss : seeds) {
    for (DType d : kda::tensor::kAllDTypes) {
      random_kernel<<<1024, 256>>>(d, ss[0], ss[1], n, d_out);
      CUDA_OK(cudaGetLastError());
      CUDA_OK(cudaMemcpy(got.data(), d_out, n * sizeof(uint64_t), cudaMemcpyDeviceToHost));
      const auto host = kda::tensor::generate_random(d, {n}, ss[0], ss[1]);
      int64_t bad = 0;
      for (int64_t i = 0; i < n; ++i) {
        if (got[i] == host.get_bits(i)) continue;
        if (bad++ < 3)
          std::fprintf(stderr, "random %s seed %llu stream %llu element %lld: device 0x%llx host 0x%llx\n",
                       std::string(kda::tensor::dtype_name(d)).c_str(), (unsigned long long)ss[0],
                       (unsigned long long)ss[1], (long long)i, (unsigned long long)got[i],
                       (unsigned long long)host.get_bits(i));
      }
      std::printf("random %-14s seed %-16llx: %lld of %lld elements differ\n",
                  std::string(kda::tensor::dtype_name(d)).c_str(), (unsigned long long)ss[0], (long long)bad,
                  (long long)n);
      failures += bad != 0;
    }
  }
  CUDA_OK(cudaFree(d_out));
  return failures;
}

int check_conversions() {
  // All 2^16 low patterns (every 16-bit code), then every 257th 32-bit pattern (covers every float exponent,
  // both signs, subnormals, Inf and many NaN payloads).
  std::vector<uint32_t> patterns;
  for (uint32_t p = 0; p < 65536; ++p) patterns.push_back(p);
  for (uint64_t p = 0; p <= 0xFFFFFFFFull; p += 257) patterns.push_back(static_cast<uint32_t>(p));
  const int64_t n = static_cast<int64_t>(patterns.size());
  uint32_t *d_in = nullptr, *d_out = nullptr;
  CUDA_OK(cudaMalloc(&d_in, n * sizeof(uint32_t)));
  CUDA_OK(cudaMalloc(&d_out, 7 * n * sizeof(uint32_t)));
  CUDA_OK(cudaMemcpy(d_in, patterns.data(), n * sizeof(uint32_t), cudaMemcpyHostToDevice));
  convert_kernel<<<1024, 256>>>(d_in, n, d_out);
  CUDA_OK(cudaGetLastError());
  std::vector<uint32_t> got(7 * n);
  CUDA_OK(cudaMemcpy(got.data(), d_out, got.size() * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t want[7];
    host_convert(patterns[i], want);
    for (int k = 0; k < 7; ++k) {
      if (got[7 * i + k] == want[k]) continue;
      if (bad++ < 5)
        std::fprintf(stderr, "conversion %d of pattern 0x%08x: device 0x%x host 0x%x\n", k, patterns[i], got[7 * i + k],
                     want[k]);
    }
  }
  std::printf("conversions: %lld patterns x 7, %lld differ\n", (long long)n, (long long)bad);
  CUDA_OK(cudaFree(d_in));
  CUDA_OK(cudaFree(d_out));
  return bad != 0;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  const int failures = check_random() + check_conversions();
  std::printf("%s\n", failures == 0 ? "PASSED: device and host agree bit for bit" : "FAILED");
  return failures == 0 ? 0 : 1;
}
