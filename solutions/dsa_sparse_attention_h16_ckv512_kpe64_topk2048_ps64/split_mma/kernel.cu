// kda's DSA sparse attention (dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64, kda ABI; spec
// contest-kernels.md 3.2): MLA in absorbed form over each token's 2048 selected cache rows, key = [ckv | kpe]
// (576), value = ckv (512), 16 heads; output bf16 and the base-2 log-sum-exp.
//
// Two kernels on the caller's stream (PDL=1: the second a programmatic dependent launch of the first):
//   split_attend: one block of four warps per (64-key split, token): 32 splits a token. The block gathers its
//     64 rows (ckv and kpe, 1152 bytes each) and the token's 16 query heads into shared memory with cp.async
//     (a padding entry, -1, is a zero row), then on the bf16 tensor cores (mma.sync m16n8k16, fp32
//     accumulation): S = Q K^T (16 heads x 64 keys, 36 k-steps; warp w takes keys 16w..16w+15), the split's
//     softmax in base 2 (its maximum and sum per head across the four warps, padding at -inf), P in bf16 to
//     shared memory, O = P V (16 heads x 512, 4 k-steps; warp w takes dims 128w..128w+127, V's fragments by
//     ldmatrix.trans from the same rows). It writes the unnormalised O (fp32), the maximum and the sum.
//   combine: one block per (token, head): the 32 splits' partials rescaled to the largest maximum, divided by
//     the total sum; lse = max + log2(sum). A token with no valid entry gets 0 and -inf; one with an entry
//     outside the cache (other than -1) gets NaN, as the pack's baseline does.
// Rows are padded to 584 bf16 (1168 bytes: 8 rows of a fragment or ldmatrix fall on 32 distinct banks).
// Scratch: the partials (num_tokens x 1 MB), kept between calls (policy persistent_state = "scratch").
// Returns 0 on success, 1 on a malformed or unsupported call, 3 on a CUDA error.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <dlpack/dlpack.h>
#include <stdint.h>

#include <initializer_list>

#ifndef PDL
#define PDL 0  // 1: combine is a programmatic dependent launch of split_attend (starts early, waits on its results)
#endif

namespace {

using bf16 = __nv_bfloat16;

constexpr int kHeads = 16;
constexpr int kCkv = 512;
constexpr int kKpe = 64;
constexpr int kDim = kCkv + kKpe;  // 576
constexpr int kPageSize = 64;
constexpr int kTopk = 2048;
constexpr int kKeys = 64;               // keys a block takes
constexpr int kSplits = kTopk / kKeys;  // 32 blocks a token
constexpr int kLd = kDim + 8;           // shared row stride (bf16)
constexpr int kLdP = kKeys + 8;         // P's row stride (bf16)
constexpr int kChunks = kDim / 8;       // 16-byte pieces a row: 64 of ckv, 8 of kpe
constexpr float kLog2e = 1.4426950408889634f;
constexpr size_t kSmem = static_cast<size_t>(kKeys + kHeads) * kLd * sizeof(bf16) + kHeads * kLdP * sizeof(bf16);

__device__ __forceinline__ uint32_t lds32(const bf16* p) { return *reinterpret_cast<const uint32_t*>(p); }

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// 16 bytes from global to shared memory; `bytes` 0 writes zeros and reads nothing.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int bytes) {
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(bytes));
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Four 8x8 bf16 matrices, transposed: lanes 8i..8i+7 give matrix i's row addresses.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const bf16* row) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

struct Args {
  const bf16* q_nope;  // [T, 16, 512]
  const bf16* q_pe;    // [T, 16, 64]
  const bf16* ckv;     // [rows, 512]
  const bf16* kpe;     // [rows, 64]
  const int32_t* indices;
  float scale2;     // sm_scale * log2(e): logits in base 2
  int64_t rows;     // num_pages * 64
  float* part_o;    // [T, 32, 16, 512]
  float2* part_ml;  // [T, 32, 16]: (maximum, sum); maximum NaN: an entry outside the cache
  bf16* out;
  float* lse;
};

// grid (32 splits, T), 128 threads, kSmem bytes of dynamic shared memory.
__global__ void __launch_bounds__(128) split_attend(Args a) {
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* Ks = reinterpret_cast<bf16*>(smem);  // [64][kLd]: ckv | kpe of each key
  bf16* Qs = Ks + kKeys * kLd;               // [16][kLd]: q_nope | q_pe of each head
  bf16* Ps = Qs + kHeads * kLd;              // [16][kLdP]
  __shared__ int rows_s[kKeys];
  __shared__ float red_max[4][kHeads], red_sum[4][kHeads];
  const int split = blockIdx.x, tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  const int64_t t = blockIdx.y;
  if (PDL) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");  // combine's blocks may be placed

  int bad = 0;
  if (tid < kKeys) {
    const int r = a.indices[t * kTopk + split * kKeys + tid];
    const bool valid = r >= 0 && r < a.rows;
    bad = r != -1 && !valid;
    rows_s[tid] = valid ? r : -1;
  }
  bad = __syncthreads_or(bad);  // also publishes rows_s
  for (int c = tid; c < kKeys * kChunks; c += 128) {
    const int key = c / kChunks, part = c % kChunks, r = rows_s[key];
    const bf16* src = r < 0       ? a.ckv
                      : part < 64 ? a.ckv + static_cast<int64_t>(r) * kCkv + part * 8
                                  : a.kpe + static_cast<int64_t>(r) * kKpe + (part - 64) * 8;
    cp_async16(Ks + key * kLd + part * 8, src, r < 0 ? 0 : 16);
  }
  for (int c = tid; c < kHeads * kChunks; c += 128) {
    const int h = c / kChunks, part = c % kChunks;
    const bf16* src =
        part < 64 ? a.q_nope + (t * kHeads + h) * kCkv + part * 8 : a.q_pe + (t * kHeads + h) * kKpe + (part - 64) * 8;
    cp_async16(Qs + h * kLd + part * 8, src, 16);
  }
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
  __syncthreads();

  // S = Q K^T: s[j][0..1] head g, keys 16 warp + 8 j + 2 t4 + {0, 1}; s[j][2..3] head g + 8.
  float s[2][4] = {};
#pragma unroll 4
  for (int k0 = 0; k0 < kDim; k0 += 16) {
    const bf16* qa = Qs + g * kLd + k0 + 2 * t4;
    const uint32_t a0 = lds32(qa), a1 = lds32(qa + 8 * kLd), a2 = lds32(qa + 8), a3 = lds32(qa + 8 * kLd + 8);
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const bf16* kb = Ks + (16 * warp + 8 * j + g) * kLd + k0 + 2 * t4;
      mma_bf16(s[j], a0, a1, a2, a3, lds32(kb), lds32(kb + 8));
    }
  }
  float mx[2] = {-INFINITY, -INFINITY};  // heads g, g + 8
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const bool valid = rows_s[16 * warp + 8 * j + 2 * t4 + (e & 1)] >= 0;
      s[j][e] = valid ? s[j][e] * a.scale2 : -INFINITY;
      mx[e >> 1] = fmaxf(mx[e >> 1], s[j][e]);
    }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xFFFFFFFFu, mx[i], 1));
    mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xFFFFFFFFu, mx[i], 2));
  }
  if (t4 == 0) red_max[warp][g] = mx[0], red_max[warp][g + 8] = mx[1];
  __syncthreads();
  float m[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < 2; ++i)
    m[i] =
        fmaxf(fmaxf(red_max[0][g + 8 * i], red_max[1][g + 8 * i]), fmaxf(red_max[2][g + 8 * i], red_max[3][g + 8 * i]));
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    float p[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float mi = m[e >> 1];
      p[e] = mi == -INFINITY ? 0.0f : exp2f(s[j][e] - mi);  // a padding key's -inf gives 0
      sum[e >> 1] += p[e];
    }
    const int col = 16 * warp + 8 * j + 2 * t4;
    *reinterpret_cast<uint32_t*>(Ps + g * kLdP + col) = pack_bf16(p[0], p[1]);
    *reinterpret_cast<uint32_t*>(Ps + (g + 8) * kLdP + col) = pack_bf16(p[2], p[3]);
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    sum[i] += __shfl_xor_sync(0xFFFFFFFFu, sum[i], 1);
    sum[i] += __shfl_xor_sync(0xFFFFFFFFu, sum[i], 2);
  }
  if (t4 == 0) red_sum[warp][g] = sum[0], red_sum[warp][g + 8] = sum[1];
  __syncthreads();

  // O = P V: o[n][0..1] head g, dims 128 warp + 8 n + 2 t4 + {0, 1}; o[n][2..3] head g + 8.
  float o[16][4] = {};
  const int ld_key = (lane & 7) + ((lane >> 3) & 1) * 8, ld_dim = (lane >> 4) * 8;
#pragma unroll
  for (int k0 = 0; k0 < kKeys; k0 += 16) {
    const bf16* pa = Ps + g * kLdP + k0 + 2 * t4;
    const uint32_t a0 = lds32(pa), a1 = lds32(pa + 8 * kLdP), a2 = lds32(pa + 8), a3 = lds32(pa + 8 * kLdP + 8);
#pragma unroll
    for (int nn = 0; nn < 8; ++nn) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, Ks + (k0 + ld_key) * kLd + 128 * warp + 16 * nn + ld_dim);
      mma_bf16(o[2 * nn], a0, a1, a2, a3, b[0], b[1]);
      mma_bf16(o[2 * nn + 1], a0, a1, a2, a3, b[2], b[3]);
    }
  }
  const int64_t part = t * kSplits + split;
  float* po = a.part_o + part * kHeads * kCkv;
#pragma unroll
  for (int n = 0; n < 16; ++n) {
    const int dim = 128 * warp + 8 * n + 2 * t4;
    *reinterpret_cast<float2*>(po + g * kCkv + dim) = make_float2(o[n][0], o[n][1]);
    *reinterpret_cast<float2*>(po + (g + 8) * kCkv + dim) = make_float2(o[n][2], o[n][3]);
  }
  if (tid < kHeads) {
    const float mh = fmaxf(fmaxf(red_max[0][tid], red_max[1][tid]), fmaxf(red_max[2][tid], red_max[3][tid]));
    const float lh = red_sum[0][tid] + red_sum[1][tid] + red_sum[2][tid] + red_sum[3][tid];
    a.part_ml[part * kHeads + tid] = make_float2(bad ? __int_as_float(0x7FC00000) : mh, lh);
  }
}

// grid (T * 16), 128 threads: thread i owns dims 4i .. 4i + 3 of one (token, head). Warp 0 reads the 32 splits'
// (maximum, sum), one a lane, and turns them into weights 2^(m_i - M) (0 for a split of padding only) and the
// total; then every thread issues its 32 partial loads in batches of eight independent ones (the first version
// read split after split behind each weight: 5.2-5.6 us a call on the H100, bench/results/h100/kernels_2026-12-07c).
static_assert(kSplits == 32, "combine: one lane a split");
__global__ void __launch_bounds__(128) combine(Args a) {
  __shared__ float w_s[kSplits];
  __shared__ float mx_s, total_s;
  __shared__ bool bad_s;
  const int64_t t = blockIdx.x / kHeads;
  const int h = blockIdx.x % kHeads, tid = threadIdx.x;
  // With PDL this block may start while split_attend runs: its partials are complete and visible after the wait.
  if (PDL) asm volatile("griddepcontrol.wait;\n" ::: "memory");
  if (tid < 32) {
    const float2 ml = a.part_ml[(t * kSplits + tid) * kHeads + h];
    const bool bad = __any_sync(0xFFFFFFFFu, ml.x != ml.x);  // an entry outside the cache: NaN
    float mx = ml.x;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, off));
    const float w = ml.x == -INFINITY || bad || mx == -INFINITY ? 0.0f : exp2f(ml.x - mx);
    float total = w * ml.y;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) total += __shfl_xor_sync(0xFFFFFFFFu, total, off);
    w_s[tid] = w;
    if (tid == 0) mx_s = mx, total_s = total, bad_s = bad;
  }
  __syncthreads();
  bf16* o = a.out + (t * kHeads + h) * kCkv + 4 * tid;
  const float mx = mx_s;
  if (bad_s || mx == -INFINITY) {  // uniform per block
    const float fill = bad_s ? __int_as_float(0x7FC00000) : 0.0f;
    reinterpret_cast<uint2*>(o)[0] = make_uint2(pack_bf16(fill, fill), pack_bf16(fill, fill));
    if (tid == 0) a.lse[t * kHeads + h] = bad_s ? fill : -INFINITY;
    return;
  }
  const float* part = a.part_o + (t * kSplits * kHeads + h) * kCkv + 4 * tid;  // split i: + i * kHeads * kCkv
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
  for (int i0 = 0; i0 < kSplits; i0 += 8) {
    float4 v[8];
#pragma unroll
    for (int j = 0; j < 8; ++j)
      v[j] = *reinterpret_cast<const float4*>(part + static_cast<int64_t>(i0 + j) * kHeads * kCkv);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float w = w_s[i0 + j];
      acc.x += w * v[j].x, acc.y += w * v[j].y, acc.z += w * v[j].z, acc.w += w * v[j].w;
    }
  }
  const float total = total_s, inv = 1.0f / total;
  reinterpret_cast<uint2*>(o)[0] = make_uint2(pack_bf16(acc.x * inv, acc.y * inv), pack_bf16(acc.z * inv, acc.w * inv));
  if (tid == 0) a.lse[t * kHeads + h] = mx + log2f(total);
}

bool has_type(const DLTensor& t, uint8_t code, uint8_t bits) {
  return t.dtype.code == code && t.dtype.bits == bits && t.dtype.lanes == 1;
}

bool has_shape(const DLTensor& t, std::initializer_list<int64_t> shape) {
  if (t.ndim != static_cast<int>(shape.size())) return false;
  int i = 0;
  for (int64_t s : shape)
    if (t.shape[i++] != s) return false;
  return true;
}

template <typename T>
T* data_of(const DLTensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The partials, grown on demand and kept between calls.
void* g_parts = nullptr;
size_t g_parts_bytes = 0;
bool g_configured = false;

}  // namespace

extern "C" int run(const DLTensor* inputs, int64_t num_inputs, DLTensor* outputs, int64_t num_outputs,
                   void* stream_ptr) {
  if (num_inputs != 6 || num_outputs != 2) return 1;
  const DLTensor &qn_t = inputs[0], &qp_t = inputs[1], &ckv_t = inputs[2], &kpe_t = inputs[3], &idx_t = inputs[4],
                 &scale_t = inputs[5];
  const DLTensor &out_t = outputs[0], &lse_t = outputs[1];
  if (!has_type(qn_t, kDLBfloat, 16) || !has_type(qp_t, kDLBfloat, 16) || !has_type(ckv_t, kDLBfloat, 16) ||
      !has_type(kpe_t, kDLBfloat, 16) || !has_type(idx_t, kDLInt, 32) || !has_type(out_t, kDLBfloat, 16) ||
      !has_type(lse_t, kDLFloat, 32))
    return 1;
  float sm_scale;
  if (has_type(scale_t, kDLFloat, 32)) {
    sm_scale = *data_of<const float>(scale_t);  // 0-d host tensor
  } else if (has_type(scale_t, kDLFloat, 64)) {
    sm_scale = static_cast<float>(*data_of<const double>(scale_t));
  } else {
    return 1;
  }
  if (qn_t.ndim != 3 || ckv_t.ndim != 3) return 1;
  const int64_t tokens = qn_t.shape[0], num_pages = ckv_t.shape[0];
  if (!has_shape(qn_t, {tokens, kHeads, kCkv}) || !has_shape(qp_t, {tokens, kHeads, kKpe}) ||
      !has_shape(ckv_t, {num_pages, kPageSize, kCkv}) || !has_shape(kpe_t, {num_pages, kPageSize, kKpe}) ||
      !has_shape(idx_t, {tokens, kTopk}) || !has_shape(out_t, {tokens, kHeads, kCkv}) ||
      !has_shape(lse_t, {tokens, kHeads}))
    return 1;
  if (tokens == 0) return 0;
  if (tokens > 65535 || num_pages * kPageSize > INT32_MAX) return 1;
  Args a{data_of<const bf16>(qn_t),
         data_of<const bf16>(qp_t),
         data_of<const bf16>(ckv_t),
         data_of<const bf16>(kpe_t),
         data_of<const int32_t>(idx_t),
         sm_scale * kLog2e,
         num_pages * kPageSize,
         nullptr,
         nullptr,
         data_of<bf16>(out_t),
         data_of<float>(lse_t)};
  if (!aligned16(a.q_nope) || !aligned16(a.q_pe) || !aligned16(a.ckv) || !aligned16(a.kpe) || !aligned16(a.out))
    return 1;  // the 16-byte copies need 16-byte aligned rows

  const size_t o_bytes = static_cast<size_t>(tokens) * kSplits * kHeads * kCkv * sizeof(float);
  const size_t need = o_bytes + static_cast<size_t>(tokens) * kSplits * kHeads * sizeof(float2);
  if (need > g_parts_bytes) {
    if (g_parts != nullptr) cudaFree(g_parts);
    g_parts = nullptr;
    g_parts_bytes = 0;
    if (cudaMalloc(&g_parts, need) != cudaSuccess) return 3;
    g_parts_bytes = need;
  }
  if (!g_configured) {
    if (cudaFuncSetAttribute(split_attend, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmem)) !=
        cudaSuccess)
      return 3;
    g_configured = true;
  }
  a.part_o = static_cast<float*>(g_parts);
  a.part_ml = reinterpret_cast<float2*>(static_cast<char*>(g_parts) + o_bytes);
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  split_attend<<<dim3(kSplits, static_cast<unsigned>(tokens)), 128, kSmem, stream>>>(a);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(tokens * kHeads));
  cfg.blockDim = dim3(128);
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = PDL ? 1 : 0;
  const cudaError_t e = cudaLaunchKernelEx(&cfg, combine, a);
  return e == cudaSuccess && cudaGetLastError() == cudaSuccess ? 0 : 3;
}
