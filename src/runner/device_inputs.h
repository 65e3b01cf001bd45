// Device-side input generation and input digests for the CUDA runner.
//
// The evaluator's plain random inputs are a pure function of (dtype, seed, stream, element index)
// (tensor/random_values.h), so the runner can write them straight into its device mirror instead of
// receiving gigabytes from the host. generate_random_device writes exactly the bits that
// tensor::fill_random writes on the host; with a fingerprint seed, the elements at the fingerprint
// positions of eval::copy_fingerprint (the first and last 16 and every 64th) come from that seed
// instead, as copy_fingerprint would have copied them from the other input set.
// digest_device computes eval::digest_bytes (eval/input_digest.h) of a device range. flush_l2_by_reading is
// the harness's cold-L2 step before every call.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <optional>

#include "eval/input_digest.h"
#include "tensor/dtype.h"

namespace kda::runner {

cudaError_t generate_random_device(void* data, tensor::DType dtype, int64_t numel, uint64_t seed, uint64_t stream,
                                   std::optional<uint64_t> fingerprint_seed, cudaStream_t cuda_stream);

// Tiles `block` (block_bytes, device memory, a multiple of 16 bytes) over [dst, dst + nbytes) with one
// kernel. Asynchronous on `cuda_stream`: the poison of a call costs a launch, not a synchronisation
// (it had cost a pageable upload, a doubling copy per power of two and a blocking stream sync).
cudaError_t tile_on_device(void* dst, uint64_t nbytes, const void* block, uint64_t block_bytes,
                           cudaStream_t cuda_stream);

// Evicts the L2 by reading [buf, buf + nbytes) (2x the L2 size, 16-byte aligned) through it. The lines
// left behind are clean, so the next kernel's misses cost no write-backs: after a memset flush the L2
// holds 2x its size of dirty lines, and bandwidth-bound kernels timed after one ran 4-8% slower than
// Nsight Compute's own measurement on the H200 (bench/results/h200, run 10). `sink` is device memory
// for one unsigned int. Asynchronous on `cuda_stream`.
cudaError_t flush_l2_by_reading(const void* buf, uint64_t nbytes, unsigned int* sink, cudaStream_t cuda_stream);

// The two sums of a digest into `sums` (device memory for two uint64_t), asynchronously on
// `cuda_stream`; eval::digest_finish(sums[0], sums[1], nbytes, key) on the host completes it.
cudaError_t digest_device_async(const void* data, uint64_t nbytes, uint64_t key, uint64_t* sums,
                                cudaStream_t cuda_stream);

// `scratch` is device memory for two uint64_t; the result is synchronously copied to the host.
cudaError_t digest_device(const void* data, uint64_t nbytes, uint64_t key, uint64_t* scratch, cudaStream_t cuda_stream,
                          eval::Digest128* out);

}  // namespace kda::runner
