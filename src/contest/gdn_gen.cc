#include "contest/gdn_gen.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "tensor/float_convert.h"

namespace kda::contest {
namespace {

// Independent streams of one (workload, trial) seed. q, k and v are drawn in parts of kGdnTokensPerPart tokens and
// every warmed state from a part of its own (index n * 8 + h), so that they can be drawn on several threads.
constexpr uint64_t kStreamQ = 101, kStreamK = 102, kStreamV = 103, kStreamGates = 104, kStreamParams = 105,
                   kStreamState = 106, kStreamSeqs = 107;
constexpr int64_t kGdnTokensPerPart = 256;

using tensor::DType;
using tensor::Tensor;

Result<int64_t> axis(const char* generator, const std::map<std::string, int64_t>& axes, const std::string& name) {
  auto it = axes.find(name);
  if (it == axes.end()) return Status::bad_input(std::string(generator) + " generator: axis '" + name + "' is missing");
  if (it->second < 1)
    return Status::bad_input(std::string(generator) + " generator: axis '" + name +
                             "' = " + std::to_string(it->second) + " is below 1");
  return it->second;
}

uint16_t bf16(double v) { return tensor::double_to_bfloat16(v); }

// `rows` unit-norm vectors of kGdnHeadSize normal components, as bf16 bits.
void fill_unit_rows(int64_t rows, SeededRng& rng, uint16_t* dst) {
  std::vector<double> x(kGdnHeadSize);
  for (int64_t r = 0; r < rows; ++r) {
    double norm2 = 0.0;
    for (auto& e : x) {
      e = rng.normal();
      norm2 += e * e;
    }
    const double inv = 1.0 / std::sqrt(norm2);
    for (int64_t c = 0; c < kGdnHeadSize; ++c) dst[r * kGdnHeadSize + c] = bf16(x[c] * inv);
  }
}

void fill_normal_bf16(int64_t n, SeededRng& rng, uint16_t* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16(rng.normal());
}

// Per-head parameters: A_log = ln U[1,16]; dt_bias = softplus^-1(y), y log-uniform in [1e-3, 1e-1].
void fill_params(SeededRng& rng, float* A_log, float* dt_bias) {
  for (int64_t h = 0; h < kGdnVHeads; ++h)
    A_log[h] = static_cast<float>(std::log(1.0 + 15.0 * (1.0 - rng.unit_open0())));
  for (int64_t h = 0; h < kGdnVHeads; ++h) {
    const double y = std::exp(std::log(1e-3) + (std::log(1e-1) - std::log(1e-3)) * (1.0 - rng.unit_open0()));
    dt_bias[h] = static_cast<float>(std::log(std::expm1(y)));
  }
}

// Warms one (sequence, head) state (k-last rows, V x K floats) with kGdnWarmupTokens steps of the recurrence.
// The steps run on the transpose (K x V, v contiguous) so that every loop runs along v and vectorises; each
// element's arithmetic and the order of each sum over k are those of the k-last form.
void warm_state(SeededRng& rng, double A_log, double dt_bias, float* state) {
  constexpr int64_t K = kGdnHeadSize;
  uint16_t kb[K];
  float k[K], v[K], u[K];
  std::vector<float> st(static_cast<size_t>(K * K), 0.0f);  // st[c * K + r] = state[r * K + c]
  for (int64_t step = 0; step < kGdnWarmupTokens; ++step) {
    fill_unit_rows(1, rng, kb);
    for (int64_t c = 0; c < K; ++c) k[c] = tensor::bfloat16_to_float(kb[c]);
    for (auto& e : v) e = tensor::bfloat16_to_float(bf16(rng.normal()));
    const float g = static_cast<float>(gdn_decay(tensor::bfloat16_to_float(bf16(rng.normal())), A_log, dt_bias));
    const float beta = static_cast<float>(gdn_beta(tensor::bfloat16_to_float(bf16(rng.normal()))));
    std::fill(u, u + K, 0.0f);
    for (int64_t c = 0; c < K; ++c) {  // state *= g; u = k . state (each u[r] summed in order of c)
      float* col = st.data() + c * K;
      for (int64_t r = 0; r < K; ++r) {
        col[r] *= g;
        u[r] += k[c] * col[r];
      }
    }
    for (int64_t r = 0; r < K; ++r) u[r] = beta * (v[r] - u[r]);  // delta
    for (int64_t c = 0; c < K; ++c) {                             // state += delta k
      float* col = st.data() + c * K;
      for (int64_t r = 0; r < K; ++r) col[r] += u[r] * k[c];
    }
  }
  for (int64_t r = 0; r < K; ++r)
    for (int64_t c = 0; c < K; ++c) state[r * K + c] = st[static_cast<size_t>(c * K + r)];
}

// q or k ([tokens, 4, 128] unit rows) or v ([tokens, 8, 128] normal), drawn in parts of kGdnTokensPerPart tokens.
void fill_tokens(uint64_t seed, uint64_t stream, int64_t tokens, int64_t heads, bool unit, uint16_t* dst) {
  const int64_t parts = (tokens + kGdnTokensPerPart - 1) / kGdnTokensPerPart;
  for_each_part(parts, 2, [&](int64_t part) {
    SeededRng rng(seed, stream, static_cast<uint64_t>(part));
    const int64_t t0 = part * kGdnTokensPerPart, t1 = std::min(tokens, t0 + kGdnTokensPerPart);
    uint16_t* out = dst + t0 * heads * kGdnHeadSize;
    if (unit)
      fill_unit_rows((t1 - t0) * heads, rng, out);
    else
      fill_normal_bf16((t1 - t0) * heads * kGdnHeadSize, rng, out);
  });
}

// Warms the states of the listed (sequence, head) slots of state [N, 8, 128, 128]; slot n * 8 + h draws from
// part n * 8 + h of kStreamState.
void warm_states(uint64_t seed, const std::vector<int64_t>& slots, const float* A_log, const float* dt_bias,
                 float* state) {
  for_each_part(static_cast<int64_t>(slots.size()), 4, [&](int64_t i) {
    const int64_t slot = slots[static_cast<size_t>(i)], h = slot % kGdnVHeads;
    SeededRng rng(seed, kStreamState, static_cast<uint64_t>(slot));
    warm_state(rng, A_log[h], dt_bias[h], state + slot * kGdnHeadSize * kGdnHeadSize);
  });
}

// Shares `extra` tokens among len.size() >= 2 sequences that hold one token each already (gdn_split_sequences).
// Up to kGdnOneLongMaxSeqs sequences: one at a random position gets 50-90% of the extra tokens, the others share
// the rest by weights uniform in [0.05, 1]. More: every sequence by a log-normal weight exp(kGdnManySeqsSigma z),
// z ~ N(0,1), so that lengths spread like independent requests and none dominates. Either way the tokens that
// the rounding down leaves over go to one random sequence.
void split_extra_tokens(int64_t extra, SeededRng& rng, std::vector<int64_t>& len) {
  const int64_t n_seqs = static_cast<int64_t>(len.size());
  std::vector<double> w(len.size(), 0.0);
  int64_t share_out = extra;  // tokens shared by weight
  const bool one_long = n_seqs <= kGdnOneLongMaxSeqs;
  const int64_t pick = static_cast<int64_t>(rng.below(static_cast<uint64_t>(n_seqs)));  // long, or remainder
  if (one_long) {
    const int64_t long_extra =
        static_cast<int64_t>(std::floor(static_cast<double>(extra) * (0.5 + 0.4 * (1.0 - rng.unit_open0()))));
    len[pick] += long_extra;
    share_out -= long_extra;
  }
  double sum = 0.0;
  for (int64_t i = 0; i < n_seqs; ++i) {
    if (one_long && i == pick) continue;
    w[i] = one_long ? 0.05 + 0.95 * rng.unit_open0() : std::exp(kGdnManySeqsSigma * rng.normal());
    sum += w[i];
  }
  int64_t given = 0;
  for (int64_t i = 0; i < n_seqs; ++i) {
    const int64_t share = static_cast<int64_t>(std::floor(static_cast<double>(share_out) * w[i] / sum));
    len[i] += share;
    given += share;
  }
  len[pick] += share_out - given;
}

}  // namespace

double gdn_decay(double a, double A_log, double dt_bias) {
  const double x = a + dt_bias;
  const double sp = x > 20.0 ? x : std::log1p(std::exp(x));
  return std::exp(-std::exp(A_log) * sp);
}

double gdn_beta(double b) { return 1.0 / (1.0 + std::exp(-b)); }

std::vector<int64_t> gdn_split_sequences(int64_t total, int64_t num_seqs, SeededRng& rng) {
  std::vector<int64_t> len(static_cast<size_t>(num_seqs), 0);
  if (total < num_seqs) {
    // total sequences of length 1 at random positions (partial Fisher-Yates), the rest empty.
    std::vector<int64_t> order(static_cast<size_t>(num_seqs));
    for (int64_t i = 0; i < num_seqs; ++i) order[i] = i;
    for (int64_t i = 0; i < total; ++i) {
      std::swap(order[i], order[i + static_cast<int64_t>(rng.below(static_cast<uint64_t>(num_seqs - i)))]);
      len[order[i]] = 1;
    }
  } else if (num_seqs == 1) {
    len[0] = total;
  } else {
    std::fill(len.begin(), len.end(), 1);
    split_extra_tokens(total - num_seqs, rng, len);
  }
  std::vector<int64_t> cu(static_cast<size_t>(num_seqs) + 1, 0);
  for (int64_t n = 0; n < num_seqs; ++n) cu[n + 1] = cu[n] + len[n];
  return cu;
}

Status generate_gdn_decode(const std::map<std::string, int64_t>& axes, uint64_t workload_seed, uint64_t trial_seed,
                           std::map<std::string, tensor::Tensor>& out) {
  KDA_ASSIGN_OR_RETURN(const int64_t B, axis("gdn_decode", axes, "batch_size"));
  if (B > (int64_t{1} << 16)) return Status::bad_input("gdn_decode generator: batch_size too large");

  // Every value is fresh per trial; only the shapes (batch_size) are the workload's.
  const uint64_t seed = SeededRng::combine(workload_seed, trial_seed);
  SeededRng rg(seed, kStreamGates), rp(seed, kStreamParams);
  Tensor q(DType::kBFloat16, {B, 1, kGdnQkHeads, kGdnHeadSize}), k(DType::kBFloat16, {B, 1, kGdnQkHeads, kGdnHeadSize}),
      v(DType::kBFloat16, {B, 1, kGdnVHeads, kGdnHeadSize}), a(DType::kBFloat16, {B, 1, kGdnVHeads}),
      b(DType::kBFloat16, {B, 1, kGdnVHeads}), A_log(DType::kFloat32, {kGdnVHeads}),
      dt_bias(DType::kFloat32, {kGdnVHeads}),
      state(DType::kFloat32, {B, kGdnVHeads, kGdnHeadSize, kGdnHeadSize}, tensor::kUninitialized);
  fill_tokens(seed, kStreamQ, B, kGdnQkHeads, true, q.data_as<uint16_t>());
  fill_tokens(seed, kStreamK, B, kGdnQkHeads, true, k.data_as<uint16_t>());
  fill_tokens(seed, kStreamV, B, kGdnVHeads, false, v.data_as<uint16_t>());
  fill_normal_bf16(a.numel(), rg, a.data_as<uint16_t>());
  fill_normal_bf16(b.numel(), rg, b.data_as<uint16_t>());
  fill_params(rp, A_log.data_as<float>(), dt_bias.data_as<float>());
  std::vector<int64_t> slots(static_cast<size_t>(B * kGdnVHeads));
  for (int64_t i = 0; i < B * kGdnVHeads; ++i) slots[static_cast<size_t>(i)] = i;
  warm_states(seed, slots, A_log.data_as<float>(), dt_bias.data_as<float>(), state.data_as<float>());

  out.insert_or_assign("q", std::move(q));
  out.insert_or_assign("k", std::move(k));
  out.insert_or_assign("v", std::move(v));
  out.insert_or_assign("state", std::move(state));
  out.insert_or_assign("A_log", std::move(A_log));
  out.insert_or_assign("a", std::move(a));
  out.insert_or_assign("dt_bias", std::move(dt_bias));
  out.insert_or_assign("b", std::move(b));
  return Status::ok_status();
}

Status generate_gdn_prefill(const std::map<std::string, int64_t>& axes, uint64_t workload_seed, uint64_t trial_seed,
                            std::map<std::string, tensor::Tensor>& out) {
  KDA_ASSIGN_OR_RETURN(const int64_t T, axis("gdn_prefill", axes, "total_seq_len"));
  KDA_ASSIGN_OR_RETURN(const int64_t N, axis("gdn_prefill", axes, "num_seqs"));
  if (auto it = axes.find("len_cu_seqlens"); it != axes.end() && it->second != N + 1)
    return Status::bad_input("gdn_prefill generator: axis 'len_cu_seqlens' = " + std::to_string(it->second) +
                             " is not num_seqs + 1 = " + std::to_string(N + 1));
  if (T > (int64_t{1} << 20) || N > (int64_t{1} << 16))
    return Status::bad_input("gdn_prefill generator: total_seq_len or num_seqs too large");

  // Every value is fresh per trial, the split of total_seq_len into num_seqs sequences included; only the shapes
  // are the workload's (a workload that pins cu_seqlens does so with a blob, which takes precedence).
  const uint64_t seed = SeededRng::combine(workload_seed, trial_seed);
  SeededRng rg(seed, kStreamGates), rp(seed, kStreamParams), rn(seed, kStreamSeqs);
  Tensor q(DType::kBFloat16, {T, kGdnQkHeads, kGdnHeadSize}), k(DType::kBFloat16, {T, kGdnQkHeads, kGdnHeadSize}),
      v(DType::kBFloat16, {T, kGdnVHeads, kGdnHeadSize}), a(DType::kBFloat16, {T, kGdnVHeads}),
      b(DType::kBFloat16, {T, kGdnVHeads}), A_log(DType::kFloat32, {kGdnVHeads}),
      dt_bias(DType::kFloat32, {kGdnVHeads}), state(DType::kFloat32, {N, kGdnVHeads, kGdnHeadSize, kGdnHeadSize}),
      cu_seqlens(DType::kInt64, {N + 1});
  fill_tokens(seed, kStreamQ, T, kGdnQkHeads, true, q.data_as<uint16_t>());
  fill_tokens(seed, kStreamK, T, kGdnQkHeads, true, k.data_as<uint16_t>());
  fill_tokens(seed, kStreamV, T, kGdnVHeads, false, v.data_as<uint16_t>());
  fill_normal_bf16(a.numel(), rg, a.data_as<uint16_t>());
  fill_normal_bf16(b.numel(), rg, b.data_as<uint16_t>());
  fill_params(rp, A_log.data_as<float>(), dt_bias.data_as<float>());
  const std::vector<int64_t> cu = gdn_split_sequences(T, N, rn);
  std::copy(cu.begin(), cu.end(), cu_seqlens.data_as<int64_t>());
  std::vector<int64_t> slots;  // prefill mixes zero and warmed states (§1.3): 2/3 warmed
  for (int64_t n = 0; n < N; ++n)
    if (rn.below(3) != 0)
      for (int64_t h = 0; h < kGdnVHeads; ++h) slots.push_back(n * kGdnVHeads + h);
  warm_states(seed, slots, A_log.data_as<float>(), dt_bias.data_as<float>(), state.data_as<float>());

  out.insert_or_assign("q", std::move(q));
  out.insert_or_assign("k", std::move(k));
  out.insert_or_assign("v", std::move(v));
  out.insert_or_assign("state", std::move(state));
  out.insert_or_assign("A_log", std::move(A_log));
  out.insert_or_assign("a", std::move(a));
  out.insert_or_assign("dt_bias", std::move(dt_bias));
  out.insert_or_assign("b", std::move(b));
  out.insert_or_assign("cu_seqlens", std::move(cu_seqlens));
  return Status::ok_status();
}

}  // namespace kda::contest
