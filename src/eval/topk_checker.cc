#include "eval/topk_checker.h"

#include <fmt/format.h>

#include "contest/topk_indices_check.h"

namespace kda::eval {

namespace {

const tensor::Tensor* input_named(const task::Definition& def, const std::vector<tensor::Tensor>& inputs,
                                  const std::string& name) {
  for (size_t i = 0; i < def.inputs.size() && i < inputs.size(); ++i)
    if (def.inputs[i].name == name) return &inputs[i];
  return nullptr;
}

}  // namespace

CheckResult check_topk_indices(const task::Definition& def, const std::vector<tensor::Tensor>& inputs,
                               const std::vector<tensor::Tensor>& candidate,
                               const std::vector<tensor::Tensor>& reference, const Tolerance& tol) {
  CheckResult res;
  const auto* q = input_named(def, inputs, "q_index_fp8");
  const auto* k = input_named(def, inputs, "k_index_cache_fp8");
  const auto* wts = input_named(def, inputs, "weights");
  const auto* lens = input_named(def, inputs, "seq_lens");
  const auto* table = input_named(def, inputs, "block_table");
  if (!q || !k || !wts || !lens || !table || candidate.size() != 1 || reference.size() != 1 ||
      table->shape().size() != 2 || k->shape().empty()) {
    res.verdict = CheckVerdict::kIncorrectNumerical;
    res.message = "topk_indices checker: the definition does not have the DSA indexer's inputs and output";
    return res;
  }
  const auto& x = candidate[0];
  const auto& y = reference[0];
  if (x.shape() != y.shape()) {
    res.verdict = CheckVerdict::kIncorrectShape;
    res.message = "output shape " + tensor::shape_string(x.shape()) + " expected " + tensor::shape_string(y.shape());
    return res;
  }
  if (x.dtype() != tensor::DType::kInt32 || y.dtype() != tensor::DType::kInt32) {
    res.verdict = CheckVerdict::kIncorrectDtype;
    res.message = "topk indices must be int32";
    return res;
  }
  contest::TopkIndexerProblem p;
  p.batch_size = table->shape()[0];
  p.max_num_pages = table->shape()[1];
  p.num_pages = k->shape()[0];
  p.q_index_fp8 = reinterpret_cast<const uint8_t*>(q->data());
  p.k_index_cache_fp8 = reinterpret_cast<const uint8_t*>(k->data());
  p.weights = wts->data_as<float>();
  p.seq_lens = lens->data_as<int32_t>();
  p.block_table = table->data_as<int32_t>();
  auto r = contest::check_topk_indices(p, x.data_as<int32_t>(), y.data_as<int32_t>(),
                                       {tol.atol, tol.rtol, tol.matched_ratio});
  OutputCheck oc;
  oc.name = def.outputs.empty() ? "topk_indices" : def.outputs[0].name;
  oc.numel = r.compared;
  oc.failed = r.mismatched;
  oc.max_abs = r.max_absolute_error;
  oc.max_rel = r.max_relative_error;
  oc.matched_ratio = r.matched_ratio;
  res.outputs.push_back(oc);
  res.max_abs = r.max_absolute_error;
  res.max_rel = r.max_relative_error;
  res.matched_ratio = r.matched_ratio;
  if (!r.passed()) {
    res.verdict = CheckVerdict::kIncorrectNumerical;
    res.message = fmt::format("topk_indices {}: {}", contest::topk_verdict_name(r.verdict), r.message);
  }
  return res;
}

}  // namespace kda::eval
