// GPU check (ctest label gpu) of the CUDA runner's device-side inputs: for every dtype, with and without
// a fingerprint seed, generate_random_device writes exactly the bits that the host definition gives
// (tensor::fill_random; the fingerprint positions of eval::copy_fingerprint from the other seed), and
// digest_device equals eval::digest_bytes. Exit 0: identical; 1: a mismatch; 77: no CUDA device.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <optional>
#include <vector>

#include "eval/arena.h"
#include "eval/input_digest.h"
#include "runner/device_inputs.h"
#include "tensor/generate.h"
#include "tensor/random_values.h"

namespace {

using kda::tensor::DType;

int check(DType dtype, int64_t n, std::optional<uint64_t> fp) {
  const uint64_t seed = 0x1234567890ull, stream = 5;
  kda::tensor::Tensor host = kda::tensor::generate_random(dtype, {n}, seed, stream);
  if (fp) {
    for (int64_t k = 0; k < n; ++k)
      if (k < 16 || k >= n - 16 || k % 64 == 0)
        host.set_bits(k, kda::tensor::random_element_bits(dtype, *fp, stream, static_cast<uint64_t>(k)));
  }
  const size_t bytes = static_cast<size_t>(host.nbytes());
  unsigned char* d = nullptr;
  uint64_t* scratch = nullptr;
  if (cudaMalloc(&d, bytes + 64) != cudaSuccess || cudaMalloc(&scratch, 16) != cudaSuccess) return 1;
  cudaMemset(d, 0, bytes + 64);
  int failures = 0;
  if (kda::runner::generate_random_device(d, dtype, n, seed, stream, fp, nullptr) != cudaSuccess) failures++;
  std::vector<unsigned char> got(bytes);
  cudaMemcpy(got.data(), d, bytes, cudaMemcpyDeviceToHost);
  const auto* want = reinterpret_cast<const unsigned char*>(host.data());
  for (size_t i = 0; i < bytes && failures < 5; ++i) {
    if (got[i] != want[i]) {
      std::fprintf(stderr, "dtype %d n %lld fp %d: byte %zu is %02x, host %02x\n", static_cast<int>(dtype),
                   static_cast<long long>(n), fp.has_value(), i, got[i], want[i]);
      ++failures;
    }
  }
  kda::eval::Digest128 dd;
  if (kda::runner::digest_device(d, bytes, 99, scratch, nullptr, &dd) != cudaSuccess ||
      !(dd == kda::eval::digest_bytes(want, bytes, 99))) {
    std::fprintf(stderr, "dtype %d n %lld: device digest differs from the host's\n", static_cast<int>(dtype),
                 static_cast<long long>(n));
    ++failures;
  }
  cudaFree(d);
  cudaFree(scratch);
  return failures;
}

// tile_on_device of a poison block equals the host's poisoned slot (SharedArena::poison / poison_tensor).
int check_poison(DType dtype, int64_t n) {
  kda::eval::Slot slot{"y", dtype, {n}, false};
  slot.nbytes = static_cast<uint64_t>(kda::tensor::dtype_storage_bytes(dtype, n));
  const kda::tensor::Tensor want = kda::eval::poison_tensor(slot, 1234);
  alignas(8) std::byte block[kda::eval::kPoisonBlockBytes];
  kda::eval::poison_block(dtype, 1234, block);
  unsigned char* d = nullptr;
  if (cudaMalloc(&d, slot.nbytes + 1) != cudaSuccess) return 1;
  int failures = 0;
  void* dblock = nullptr;
  if (cudaMalloc(&dblock, sizeof(block)) != cudaSuccess) return 1;
  cudaMemcpy(dblock, block, sizeof(block), cudaMemcpyHostToDevice);
  // Misaligned by one byte as well as aligned: the kernel's byte path must give the same bytes.
  if (kda::runner::tile_on_device(d, slot.nbytes, dblock, sizeof(block), nullptr) != cudaSuccess) ++failures;
  cudaDeviceSynchronize();
  std::vector<unsigned char> got(slot.nbytes);
  cudaMemcpy(got.data(), d, slot.nbytes, cudaMemcpyDeviceToHost);
  if (std::memcmp(got.data(), want.data(), slot.nbytes) != 0) {
    std::fprintf(stderr, "dtype %d n %lld: device poison differs from the host's\n", static_cast<int>(dtype),
                 static_cast<long long>(n));
    ++failures;
  }
  if (kda::runner::tile_on_device(d + 1, slot.nbytes, dblock, sizeof(block), nullptr) != cudaSuccess) ++failures;
  cudaMemcpy(got.data(), d + 1, slot.nbytes, cudaMemcpyDeviceToHost);
  if (std::memcmp(got.data(), want.data(), slot.nbytes) != 0) {
    std::fprintf(stderr, "dtype %d n %lld: device poison at a misaligned address differs from the host's\n",
                 static_cast<int>(dtype), static_cast<long long>(n));
    ++failures;
  }
  cudaFree(dblock);
  cudaFree(d);
  return failures;
}

}  // namespace

int main() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::puts("no CUDA device: skipped");
    return 77;
  }
  int failures = 0;
  for (DType d : kda::tensor::kAllDTypes)
    for (int64_t n : {int64_t{1}, int64_t{33}, int64_t{1000003}})
      for (std::optional<uint64_t> fp : {std::optional<uint64_t>(), std::optional<uint64_t>(777)})
        failures += check(d, n, fp);
  for (DType d : kda::tensor::kAllDTypes)
    for (int64_t n : {int64_t{1}, int64_t{2049}, int64_t{33554432}}) failures += check_poison(d, n);
  std::printf("%s\n", failures == 0 ? "device inputs and digests match the host" : "MISMATCH");
  return failures == 0 ? 0 : 1;
}
