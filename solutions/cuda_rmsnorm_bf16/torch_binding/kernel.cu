// cuda_rmsnorm_bf16 with binding "torch", as FlashInfer-Bench builds one (torch.utils.cpp_extension):
// the entry function takes torch tensors and is exported by PYBIND11_MODULE. The kernel is the naive
// baseline's algorithm (one block of 256 threads per row, a float sum of squares reduced in shared
// memory, then a scale pass), the same source, so its latency against that baseline is what the torch binding
// costs a call: the Python call, pybind11's argument conversion and the tensor checks.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cuda_bf16.h>
#include <torch/extension.h>

namespace {

constexpr int kThreads = 256;

// The naive baseline's kernel as it is there (tasks/cuda/rmsnorm/baselines/naive/kernel.cu), qualifiers and
// math included: without __restrict__ the second pass's loads wait for its stores, and a kernel that differs
// in that alone ran 1.2x-2.6x faster than the baseline on the H200 (bench/results/h200/torch_binding_2026-12-07).
__global__ void rmsnorm_block_per_row(const __nv_bfloat16* x, const __nv_bfloat16* w, float eps,
                                      __nv_bfloat16* y, int64_t hidden) {
  __shared__ float partial[kThreads];
  const __nv_bfloat16* row = x + blockIdx.x * hidden;
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < hidden; c += kThreads) {
    const float v = __bfloat162float(row[c]);
    sum += v * v;
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  const float inv_rms = 1.0f / sqrtf(partial[0] / static_cast<float>(hidden) + eps);
  __nv_bfloat16* out = y + blockIdx.x * hidden;
  for (int64_t c = threadIdx.x; c < hidden; c += kThreads)
    out[c] = __float2bfloat16(__bfloat162float(row[c]) * inv_rms * __bfloat162float(w[c]));
}

void check_bf16(const torch::Tensor& t, const char* name, int64_t dims) {
  TORCH_CHECK(t.is_cuda(), name, " must be a CUDA tensor");
  TORCH_CHECK(t.scalar_type() == at::kBFloat16, name, " must be bfloat16");
  TORCH_CHECK(t.dim() == dims && t.is_contiguous(), name, " must be a contiguous ", dims, "-d tensor");
}

}  // namespace

// Destination passing: y = x / sqrt(mean(x^2) + eps) * weight, written into y.
void run(const torch::Tensor& x, const torch::Tensor& weight, double eps, torch::Tensor y) {
  check_bf16(x, "x", 2);
  check_bf16(weight, "weight", 1);
  check_bf16(y, "y", 2);
  const int64_t rows = x.size(0), cols = x.size(1);
  TORCH_CHECK(weight.size(0) == cols && y.size(0) == rows && y.size(1) == cols, "shapes disagree");
  if (rows == 0 || cols == 0) return;
  const auto* xp = reinterpret_cast<const __nv_bfloat16*>(x.data_ptr<at::BFloat16>());
  const auto* wp = reinterpret_cast<const __nv_bfloat16*>(weight.data_ptr<at::BFloat16>());
  auto* yp = reinterpret_cast<__nv_bfloat16*>(y.data_ptr<at::BFloat16>());
  rmsnorm_block_per_row<<<static_cast<unsigned>(rows), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
      xp, wp, static_cast<float>(eps), yp, cols);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run, "RMSNorm of x into y (bf16, fp32 accumulation)"); }
