// kda's GDN decode for the H200 (gdn_decode_qk4_v8_d128_k_last): one gated-delta-rule step per sequence.
//
// Every value row r of a head's state is independent: u_r = g * (k . S_r), delta_r = beta * (v_r - u_r),
// S_r' = g * S_r + delta_r * k, o_r = scale * (q . S_r'). So the work is spread by rows, not by heads:
// a warp owns RPW consecutive rows of one (sequence, value head), a lane 4 key columns of each (one
// float4 of a 512-byte row), and a block WARPS warps. Every load the warp needs (its RPW state rows,
// then q, k, v, the gate inputs) is issued before the first use, so a warp waits for one memory round
// trip, not one per row; the RPW rows' shuffle reductions are interleaved.
//   * small batches (1,024 rows per sequence) are latency-bound: every warp waits for one round trip;
//   * large batches are bound by the state's read and write (1 MiB per sequence): more rows per warp keep
//     more bytes in flight per thread and fewer, fuller waves; the state is read and written with
//     streaming cache hints (read once, written once).
// RPW (rows per warp), WARPS (warps per block) and HINT (cache hints) are macros for `kda tune`
// (tunables.toml); RPW = 0 picks by batch size (the rule below, from the H200 runs in bench/results/h200/).
//
// Requires 16-byte aligned state and new_state (float4 rows) and 8-byte aligned q, k; returns 4 otherwise.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <dlpack/dlpack.h>

#include <cstdint>

#ifndef RPW
#define RPW 0
#endif
#ifndef WARPS
#define WARPS 4
#endif
#ifndef HINT
// State loads and stores: 0 streaming (ld.cs / st.cs), 1 read-only path (ld.nc) and plain stores, 2 last
// use (ld.lu) and st.cs. kda tune's best single configuration on the H200 (run 39) is HINT=2 with RPW=0
// and WARPS=4, the defaults here; the other hints are within 1-3 %.
#define HINT 2
#endif

namespace {

constexpr int kHeadSize = 128;  // K = V = 128 (const axes)
static_assert(WARPS >= 1 && WARPS <= 16, "WARPS is 1..16");
static_assert(RPW == 0 || RPW == 1 || RPW == 2 || RPW == 4 || RPW == 8 || RPW == 16, "RPW is 0 (by batch), 1, 2, 4, 8 or 16");
static_assert(HINT >= 0 && HINT <= 2, "HINT is 0, 1 or 2");

__device__ __forceinline__ float4 load_state(const float4* p) {
  if constexpr (HINT == 0) return __ldcs(p);
  else if constexpr (HINT == 1) return __ldg(p);
  else return __ldlu(p);
}

__device__ __forceinline__ void store_state(float4* p, float4 v) {
  if constexpr (HINT == 1) *p = v;
  else __stcs(p, v);
}

bool is(const DLTensor& t, uint8_t code, uint8_t bits, int ndim) {
  return t.dtype.code == code && t.dtype.bits == bits && t.dtype.lanes == 1 && t.ndim == ndim;
}

template <typename T>
T* ptr(const DLTensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}

struct Args {
  const __nv_bfloat16* q;
  const __nv_bfloat16* k;
  const __nv_bfloat16* v;
  const float* state;
  const float* A_log;
  const __nv_bfloat16* a;
  const float* dt_bias;
  const __nv_bfloat16* b;
  float scale;
  __nv_bfloat16* output;
  float* new_state;
  int HQ, HV;
};

__device__ __forceinline__ void unpack4(uint2 raw, float* f) {
  const __nv_bfloat162 lo = *reinterpret_cast<const __nv_bfloat162*>(&raw.x);
  const __nv_bfloat162 hi = *reinterpret_cast<const __nv_bfloat162*>(&raw.y);
  const float2 l = __bfloat1622float2(lo), h = __bfloat1622float2(hi);
  f[0] = l.x, f[1] = l.y, f[2] = h.x, f[3] = h.y;
}

template <int kRows>
__global__ void __launch_bounds__(WARPS * 32) gdn_decode_rows(Args p) {
  constexpr int kRowsPerBlock = WARPS * kRows;
  constexpr int kChunks = kHeadSize / kRowsPerBlock;  // blocks per (sequence, value head)
  static_assert(kHeadSize % kRowsPerBlock == 0, "a block's rows must tile the head");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int chunk = blockIdx.x % kChunks;
  const int64_t bh = blockIdx.x / kChunks;  // sequence * HV + value head
  const int h = static_cast<int>(bh % p.HV);
  const int64_t bi = bh / p.HV;
  const int i = h / (p.HV / p.HQ);  // GVA: value head h reads q/k head h / (HV / HQ)
  const int r0 = (chunk * WARPS + warp) * kRows;
  const int64_t row0 = bh * kHeadSize + r0;  // first state row of this warp

  // Every load first: the state rows, then the small operands.
  float4 s[kRows];
#pragma unroll
  for (int j = 0; j < kRows; ++j) s[j] = load_state(reinterpret_cast<const float4*>(p.state + (row0 + j) * kHeadSize) + lane);
  const int64_t qk = (bi * p.HQ + i) * kHeadSize + lane * 4;
  const uint2 kraw = __ldg(reinterpret_cast<const uint2*>(p.k + qk));
  const uint2 qraw = __ldg(reinterpret_cast<const uint2*>(p.q + qk));
  float vv[kRows];
#pragma unroll
  for (int j = 0; j < kRows; ++j) vv[j] = __bfloat162float(p.v[row0 + j]);
  const float x = __bfloat162float(p.a[bh]) + p.dt_bias[h];
  const float A = p.A_log[h];
  const float blog = __bfloat162float(p.b[bh]);

  const float sp = x > 20.0f ? x : log1pf(expf(x));  // softplus, threshold 20 as the reference
  const float g = expf(-expf(A) * sp);
  const float beta = 1.0f / (1.0f + expf(-blog));
  float kk[4], qq[4];
  unpack4(kraw, kk);
  unpack4(qraw, qq);

  float u[kRows];
#pragma unroll
  for (int j = 0; j < kRows; ++j) u[j] = kk[0] * s[j].x + kk[1] * s[j].y + kk[2] * s[j].z + kk[3] * s[j].w;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
#pragma unroll
    for (int j = 0; j < kRows; ++j) u[j] += __shfl_xor_sync(0xffffffffu, u[j], o);

  float out[kRows];
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
    const float delta = beta * (vv[j] - g * u[j]);
    float4 n;
    n.x = g * s[j].x + delta * kk[0];
    n.y = g * s[j].y + delta * kk[1];
    n.z = g * s[j].z + delta * kk[2];
    n.w = g * s[j].w + delta * kk[3];
    store_state(reinterpret_cast<float4*>(p.new_state + (row0 + j) * kHeadSize) + lane, n);
    out[j] = qq[0] * n.x + qq[1] * n.y + qq[2] * n.z + qq[3] * n.w;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
#pragma unroll
    for (int j = 0; j < kRows; ++j) out[j] += __shfl_xor_sync(0xffffffffu, out[j], o);
  // Lane j writes row j's output: the warp's kRows outputs are one contiguous store.
  float mine = 0.0f;
#pragma unroll
  for (int j = 0; j < kRows; ++j)
    if (lane == j) mine = out[j];
  if (lane < kRows) p.output[row0 + lane] = __float2bfloat16_rn(p.scale * mine);
}

// Rows per warp when RPW = 0, by batch size. From kda tune's map on the H200 (run 37): four rows per
// warp up to B = 31 (at B = 1 too: 64 blocks of 4 warps beat 256 blocks of one-row warps, 2.10 against
// 3.00 us), eight from B = 32, where the state's streaming decides.
int rows_per_warp(int64_t B) {
  if (RPW != 0) return RPW;
  return B >= 32 ? 8 : 4;
}

template <int kRows>
cudaError_t launch(const Args& p, int64_t B, cudaStream_t stream) {
  if constexpr (kHeadSize % (WARPS * kRows) != 0) {
    return cudaErrorInvalidConfiguration;
  } else {
    const int64_t blocks = B * p.HV * (kHeadSize / (WARPS * kRows));
    gdn_decode_rows<kRows><<<static_cast<unsigned>(blocks), WARPS * 32, 0, stream>>>(p);
    return cudaGetLastError();
  }
}

}  // namespace

extern "C" int run(const DLTensor* inputs, int64_t num_inputs, DLTensor* outputs, int64_t num_outputs,
                   void* stream) {
  if (num_inputs != 9 || num_outputs != 2) return 1;
  const DLTensor &q = inputs[0], &k = inputs[1], &v = inputs[2], &state = inputs[3], &A_log = inputs[4],
                 &a = inputs[5], &dt_bias = inputs[6], &b = inputs[7], &scale_t = inputs[8];
  DLTensor &output = outputs[0], &new_state = outputs[1];
  if (!is(q, kDLBfloat, 16, 4) || !is(k, kDLBfloat, 16, 4) || !is(v, kDLBfloat, 16, 4) ||
      !is(state, kDLFloat, 32, 4) || !is(A_log, kDLFloat, 32, 1) || !is(a, kDLBfloat, 16, 3) ||
      !is(dt_bias, kDLFloat, 32, 1) || !is(b, kDLBfloat, 16, 3) || !is(output, kDLBfloat, 16, 4) ||
      !is(new_state, kDLFloat, 32, 4) || !is(scale_t, kDLFloat, 32, 0))
    return 2;
  const int64_t B = q.shape[0];
  const int HQ = static_cast<int>(q.shape[2]), HV = static_cast<int>(v.shape[2]);
  if (q.shape[1] != 1 || q.shape[3] != kHeadSize || k.shape[3] != kHeadSize || v.shape[3] != kHeadSize ||
      state.shape[2] != kHeadSize || state.shape[3] != kHeadSize || HQ <= 0 || HV % HQ != 0)
    return 2;
  Args p{ptr<__nv_bfloat16>(q), ptr<__nv_bfloat16>(k), ptr<__nv_bfloat16>(v), ptr<float>(state),
         ptr<float>(A_log), ptr<__nv_bfloat16>(a), ptr<float>(dt_bias), ptr<__nv_bfloat16>(b),
         *ptr<float>(scale_t),  // a host scalar
         ptr<__nv_bfloat16>(output), ptr<float>(new_state), HQ, HV};
  if (p.scale == 0.0f) p.scale = 0.08838834764831843f;  // 1 / sqrt(128)
  const auto misaligned = [](const void* x, uintptr_t n) { return reinterpret_cast<uintptr_t>(x) % n != 0; };
  if (misaligned(p.state, 16) || misaligned(p.new_state, 16) || misaligned(p.q, 8) || misaligned(p.k, 8)) return 4;
  if (B == 0) return 0;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  cudaError_t e;
  switch (rows_per_warp(B)) {
    case 1: e = launch<1>(p, B, s); break;
    case 2: e = launch<2>(p, B, s); break;
    case 4: e = launch<4>(p, B, s); break;
    case 8: e = launch<8>(p, B, s); break;
    default: e = launch<16>(p, B, s); break;
  }
  return e == cudaSuccess ? 0 : 3;
}
