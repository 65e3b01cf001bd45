// The DSA top-k indexer's correctness rules (spec contest-kernels.md §3.1, FlashInfer-Bench DsaTopkIndexer after
// #354) as a pure function over host buffers. The evaluator checks shape and dtype before calling this.
//
// Per row b (L = seq_lens[b]), on the candidate's ids:
//   1. values: every id is -1 or >= 0 (anything below -1 is rejected; kda is stricter than the contest here);
//   2. reachability: for id >= 0, page = id/64 must occur in block_table[b, :]; with s its FIRST slot,
//      64*s + id%64 < L must hold (so trailing slots and pages of other rows are unreachable);
//   3. no duplicate non-negative ids;
//   4. scores: recompute the fp32 score of every id of the candidate's row and of the reference's row (-1 gives
//      -inf), sort both descending and compare elementwise: -inf vs -inf matches, -inf vs finite fails (so the
//      padding count must be exact), otherwise an element fails iff |x-y| > atol and |x-y|/(|y|+1e-8) > rtol.
//      The check fails when 1 - fails/(B*2048) < matched_ratio.
// Rules 1-3 fail immediately (INCORRECT_NUMERICAL in the trace); the first violation is described.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/tensor.h"
#include "util/status.h"

namespace kda::contest {

// Host views of the indexer's inputs (definition order; shapes as in the definition).
struct TopkIndexerProblem {
  int64_t batch_size = 0;
  int64_t max_num_pages = 0;
  int64_t num_pages = 0;
  const uint8_t* q_index_fp8 = nullptr;        // [B, 64, 128] e4m3 codes
  const uint8_t* k_index_cache_fp8 = nullptr;  // [P, 64, 1, 132] packed pages of 8448 bytes
  const float* weights = nullptr;              // [B, 64]
  const int32_t* seq_lens = nullptr;           // [B]
  const int32_t* block_table = nullptr;        // [B, max_num_pages]
};

struct TopkCheckOptions {
  double atol = 1e-2;
  double rtol = 1e-2;
  double matched_ratio = 1.0;
};

enum class TopkVerdict {
  kPassed,
  kBadValue,       // an id below -1
  kUnreachable,    // an id outside the row's reachable tokens
  kDuplicate,      // a non-negative id twice in one row
  kScoreMismatch,  // sorted scores differ beyond tolerance (includes a wrong padding count)
  kBadInput,       // the problem itself is malformed (null pointers, sizes, seq_lens or block_table out of range)
};

struct TopkCheckResult {
  TopkVerdict verdict = TopkVerdict::kPassed;
  std::string message;            // first violation (row, position, id), or the mismatch summary
  double max_absolute_error = 0;  // over finite score pairs
  double max_relative_error = 0;
  int64_t mismatched = 0;      // score elements failing the tolerance (incl. -inf vs finite)
  int64_t compared = 0;        // B * 2048
  double matched_ratio = 1.0;  // 1 - mismatched / compared
  bool passed() const { return verdict == TopkVerdict::kPassed; }
};

// candidate and reference: [B, 2048] int32 ids (page*64+slot, -1 padding).
TopkCheckResult check_topk_indices(const TopkIndexerProblem& problem, const int32_t* candidate,
                                   const int32_t* reference, const TopkCheckOptions& options = {});

// Views the five host input tensors (definition order: q_index_fp8, k_index_cache_fp8, weights, seq_lens,
// block_table) as a problem after checking their dtypes and shapes against each other; bad_input names the
// input. The tensors must outlive the view.
Result<TopkIndexerProblem> topk_indexer_problem(const std::vector<const tensor::Tensor*>& inputs);

// The same check on Tensors: candidate and reference must be int32 [B, 2048] (else kBadInput).
TopkCheckResult check_topk_indices(const std::vector<const tensor::Tensor*>& inputs, const tensor::Tensor& candidate,
                                   const tensor::Tensor& reference, const TopkCheckOptions& options = {});

// fp32 score of token id `id` of row b (the sum over heads of weights * relu(q . K)), -inf for id == -1. The id
// must be reachable or -1; otherwise the result is NaN. Accumulates in double, rounds once to float.
float topk_indexer_score(const TopkIndexerProblem& problem, int64_t b, int64_t id);

const char* topk_verdict_name(TopkVerdict v);

}  // namespace kda::contest
