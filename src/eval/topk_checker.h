// The `topk_indices` checker (DSA indexer): adapts contest/topk_indices_check to the evaluator.
#pragma once

#include <vector>

#include "eval/compare.h"
#include "task/definition.h"

namespace kda::eval {

// inputs in definition order (q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table);
// outputs: the single [B, topk] int32 indices output.
CheckResult check_topk_indices(const task::Definition& def, const std::vector<tensor::Tensor>& inputs,
                               const std::vector<tensor::Tensor>& candidate,
                               const std::vector<tensor::Tensor>& reference, const Tolerance& tol);

}  // namespace kda::eval
