#include "contest/topk_indices_check.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <unordered_set>
#include <vector>

#include "tensor/float_convert.h"
#include "util/parallel.h"

namespace kda::contest {
namespace {

constexpr int64_t kHeads = 64;
constexpr int64_t kDim = 128;
constexpr int64_t kPageSize = 64;
constexpr int64_t kTopk = 2048;
constexpr int64_t kPageBytes = 8448;
constexpr int64_t kScaleOffset = 8192;

std::string where(int64_t b, int64_t i, int64_t id) {
  return "row " + std::to_string(b) + ", position " + std::to_string(i) + ", id " + std::to_string(id);
}

TopkCheckResult fail(TopkVerdict v, std::string message) {
  TopkCheckResult r;
  r.verdict = v;
  r.message = std::move(message);
  r.matched_ratio = 0.0;
  return r;
}

// The first slot of `page` in row b's table, or -1.
int64_t first_slot(const TopkIndexerProblem& p, int64_t b, int64_t page) {
  const int32_t* row = p.block_table + b * p.max_num_pages;
  for (int64_t s = 0; s < p.max_num_pages; ++s)
    if (row[s] == page) return s;
  return -1;
}

}  // namespace

const char* topk_verdict_name(TopkVerdict v) {
  switch (v) {
    case TopkVerdict::kPassed: return "passed";
    case TopkVerdict::kBadValue: return "bad_value";
    case TopkVerdict::kUnreachable: return "unreachable";
    case TopkVerdict::kDuplicate: return "duplicate";
    case TopkVerdict::kScoreMismatch: return "score_mismatch";
    case TopkVerdict::kBadInput: return "bad_input";
  }
  return "unknown";
}

float topk_indexer_score(const TopkIndexerProblem& p, int64_t b, int64_t id) {
  if (id == -1) return -std::numeric_limits<float>::infinity();
  const int64_t page = id / kPageSize, offset = id % kPageSize;
  if (id < 0 || page >= p.num_pages) return std::numeric_limits<float>::quiet_NaN();
  const uint8_t* page_bytes = p.k_index_cache_fp8 + page * kPageBytes;
  float scale;
  std::memcpy(&scale, page_bytes + kScaleOffset + 4 * offset, sizeof scale);
  double k[kDim];
  for (int64_t d = 0; d < kDim; ++d)
    k[d] = static_cast<double>(tensor::float8_e4m3fn_to_float(page_bytes[kDim * offset + d])) * scale;
  const uint8_t* q = p.q_index_fp8 + b * kHeads * kDim;
  double score = 0.0;
  for (int64_t h = 0; h < kHeads; ++h) {
    double dot = 0.0;
    for (int64_t d = 0; d < kDim; ++d) dot += tensor::float8_e4m3fn_to_double(q[h * kDim + d]) * k[d];
    score += static_cast<double>(p.weights[b * kHeads + h]) * std::max(dot, 0.0);
  }
  return static_cast<float>(score);
}

Result<TopkIndexerProblem> topk_indexer_problem(const std::vector<const tensor::Tensor*>& inputs) {
  using tensor::DType;
  if (inputs.size() != 5)
    return Status::bad_input("topk_indices: expected 5 inputs, got " + std::to_string(inputs.size()));
  const char* names[5] = {"q_index_fp8", "k_index_cache_fp8", "weights", "seq_lens", "block_table"};
  const DType dtypes[5] = {DType::kFloat8E4M3FN, DType::kInt8, DType::kFloat32, DType::kInt32, DType::kInt32};
  const int64_t ranks[5] = {3, 4, 2, 1, 2};
  for (int i = 0; i < 5; ++i) {
    if (inputs[i] == nullptr) return Status::bad_input(std::string("topk_indices: input ") + names[i] + " is missing");
    if (inputs[i]->dtype() != dtypes[i] || inputs[i]->ndim() != ranks[i])
      return Status::bad_input(std::string("topk_indices: input ") + names[i] + " has the wrong dtype or rank");
  }
  const auto& q = inputs[0]->shape();
  const auto& k = inputs[1]->shape();
  const auto& w = inputs[2]->shape();
  const auto& lens = inputs[3]->shape();
  const auto& table = inputs[4]->shape();
  const int64_t batch = q[0];
  if (q[1] != kHeads || q[2] != kDim) return Status::bad_input("topk_indices: q_index_fp8 must be [B, 64, 128]");
  if (k[1] != kPageSize || k[2] != 1 || k[3] != 132 || k[0] < 1)
    return Status::bad_input("topk_indices: k_index_cache_fp8 must be [P >= 1, 64, 1, 132]");
  if (w[0] != batch || w[1] != kHeads) return Status::bad_input("topk_indices: weights must be [B, 64]");
  if (lens[0] != batch) return Status::bad_input("topk_indices: seq_lens must be [B]");
  if (table[0] != batch || table[1] < 1) return Status::bad_input("topk_indices: block_table must be [B, M >= 1]");
  TopkIndexerProblem p;
  p.batch_size = batch;
  p.max_num_pages = table[1];
  p.num_pages = k[0];
  p.q_index_fp8 = inputs[0]->data_as<uint8_t>();
  p.k_index_cache_fp8 = reinterpret_cast<const uint8_t*>(inputs[1]->data());
  p.weights = inputs[2]->data_as<float>();
  p.seq_lens = inputs[3]->data_as<int32_t>();
  p.block_table = inputs[4]->data_as<int32_t>();
  return p;
}

TopkCheckResult check_topk_indices(const std::vector<const tensor::Tensor*>& inputs, const tensor::Tensor& candidate,
                                   const tensor::Tensor& reference, const TopkCheckOptions& options) {
  auto problem = topk_indexer_problem(inputs);
  if (!problem.ok()) return fail(TopkVerdict::kBadInput, problem.status().message());
  const std::vector<int64_t> shape = {problem->batch_size, kTopk};
  for (const tensor::Tensor* t : {&candidate, &reference})
    if (t->dtype() != tensor::DType::kInt32 || t->shape() != shape)
      return fail(
          TopkVerdict::kBadInput,
          std::string("topk_indices: ") + (t == &candidate ? "candidate" : "reference") + " must be int32 [B, 2048]");
  return check_topk_indices(*problem, candidate.data_as<int32_t>(), reference.data_as<int32_t>(), options);
}

TopkCheckResult check_topk_indices(const TopkIndexerProblem& p, const int32_t* candidate, const int32_t* reference,
                                   const TopkCheckOptions& options) {
  if (p.batch_size < 0 || p.max_num_pages < 1 || p.num_pages < 1 || candidate == nullptr || reference == nullptr ||
      (p.batch_size > 0 && (p.q_index_fp8 == nullptr || p.k_index_cache_fp8 == nullptr || p.weights == nullptr ||
                            p.seq_lens == nullptr || p.block_table == nullptr)))
    return fail(TopkVerdict::kBadInput, "malformed problem (sizes or null buffers)");
  for (int64_t b = 0; b < p.batch_size; ++b) {
    const int64_t len = p.seq_lens[b];
    if (len < 0 || len > p.max_num_pages * kPageSize)
      return fail(TopkVerdict::kBadInput,
                  "seq_lens[" + std::to_string(b) + "] = " + std::to_string(len) + " outside [0, 64*max_num_pages]");
    for (int64_t s = 0; s * kPageSize < len; ++s) {
      const int64_t page = p.block_table[b * p.max_num_pages + s];
      if (page < 0 || page >= p.num_pages)
        return fail(TopkVerdict::kBadInput, "block_table[" + std::to_string(b) + ", " + std::to_string(s) +
                                                "] = " + std::to_string(page) + " outside [0, num_pages)");
    }
  }

  // Rules 1-3 on the candidate.
  std::unordered_set<int32_t> seen;
  for (int64_t b = 0; b < p.batch_size; ++b) {
    const int64_t len = p.seq_lens[b];
    seen.clear();
    for (int64_t i = 0; i < kTopk; ++i) {
      const int32_t id = candidate[b * kTopk + i];
      if (id == -1) continue;
      if (id < -1) return fail(TopkVerdict::kBadValue, where(b, i, id) + ": ids must be >= -1");
      const int64_t slot = first_slot(p, b, id / kPageSize);
      if (slot < 0)
        return fail(TopkVerdict::kUnreachable,
                    where(b, i, id) + ": page " + std::to_string(id / kPageSize) + " is not in the row's block table");
      if (slot * kPageSize + id % kPageSize >= len)
        return fail(TopkVerdict::kUnreachable, where(b, i, id) + ": token " +
                                                   std::to_string(slot * kPageSize + id % kPageSize) + " (first slot " +
                                                   std::to_string(slot) + ") is not below L = " + std::to_string(len));
      if (!seen.insert(id).second) return fail(TopkVerdict::kDuplicate, where(b, i, id) + ": duplicate id");
    }
  }

  // Rule 4: sorted recomputed scores. Rows are independent (up to 2 x 2048 scores of 64 heads x 128
  // dims each), so they are scored on several threads and reduced in row order: the result, including
  // the first mismatch named, does not depend on the thread count.
  TopkCheckResult result;
  result.compared = p.batch_size * kTopk;
  struct RowResult {
    int64_t mismatched = 0;
    double max_abs = 0, max_rel = 0;
    std::string first_mismatch;
  };
  std::vector<RowResult> rows(static_cast<size_t>(std::max<int64_t>(p.batch_size, 0)));
  auto score_rows = [&](int64_t first, int64_t end) {
    std::vector<float> xs(kTopk), ys(kTopk);
    for (int64_t b = first; b < end; ++b) {
      RowResult& row = rows[static_cast<size_t>(b)];
      for (int64_t i = 0; i < kTopk; ++i) {
        xs[i] = topk_indexer_score(p, b, candidate[b * kTopk + i]);
        const int32_t ref_id = reference[b * kTopk + i];
        ys[i] = ref_id < -1 ? std::numeric_limits<float>::quiet_NaN() : topk_indexer_score(p, b, ref_id);
      }
      std::sort(xs.begin(), xs.end(), std::greater<float>());
      std::sort(ys.begin(), ys.end(), std::greater<float>());
      for (int64_t i = 0; i < kTopk; ++i) {
        const float x = xs[i], y = ys[i];
        bool bad;
        if (std::isinf(x) || std::isinf(y) || std::isnan(x) || std::isnan(y)) {
          bad = !(x == y);  // -inf vs -inf matches; NaN never does
        } else {
          const double e = std::fabs(static_cast<double>(x) - y);
          const double r = e / (std::fabs(static_cast<double>(y)) + 1e-8);
          row.max_abs = std::max(row.max_abs, e);
          row.max_rel = std::max(row.max_rel, r);
          bad = e > options.atol && r > options.rtol;
        }
        if (bad) {
          ++row.mismatched;
          if (row.first_mismatch.empty())
            row.first_mismatch = "row " + std::to_string(b) + ", sorted rank " + std::to_string(i) +
                                 ": candidate score " + std::to_string(x) + " vs reference " + std::to_string(y);
        }
      }
    }
  };
  // Rows over the host's cores, each range its own rows' results.
  util::run_ranges(
      util::split_ranges(static_cast<uint64_t>(std::max<int64_t>(p.batch_size, 0)), 1),
      [&](size_t, uint64_t b, uint64_t e) { score_rows(static_cast<int64_t>(b), static_cast<int64_t>(e)); });
  std::string first_mismatch;
  for (const RowResult& row : rows) {
    result.mismatched += row.mismatched;
    result.max_absolute_error = std::max(result.max_absolute_error, row.max_abs);
    result.max_relative_error = std::max(result.max_relative_error, row.max_rel);
    if (first_mismatch.empty()) first_mismatch = row.first_mismatch;
  }
  result.matched_ratio =
      result.compared == 0 ? 1.0 : 1.0 - static_cast<double>(result.mismatched) / static_cast<double>(result.compared);
  if (result.matched_ratio < options.matched_ratio) {
    result.verdict = TopkVerdict::kScoreMismatch;
    result.message = std::to_string(result.mismatched) + " of " + std::to_string(result.compared) +
                     " sorted scores differ beyond tolerance; first: " + first_mismatch;
  }
  return result;
}

}  // namespace kda::contest
