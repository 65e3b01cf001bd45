// Stress inputs (task.toml [inputs] stress, docs/integrity-gates.md "Stress inputs"): transforms of one
// generator draw into inputs that real runs produce and random draws rarely do. Random GDN gates decay a
// state by a few bits a token; real ones decay it by hundreds of bits in a chunk of 64 tokens, or keep it
// for thousands of tokens. A constant tuned to the random distribution, a decay table in half precision or
// an exponent that underflows all pass random inputs and fail these. Each stress keeps every shape and the
// structure a pack's README promises (unit-norm keys, cu_seqlens that cover total_seq_len) and changes
// values only; the reference sees the same inputs. Every value a stress draws comes from its seed (the
// evaluator derives it from the secret seed), so a stressed input set is as fresh as any other.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/tensor.h"
#include "util/status.h"

namespace kda::contest {

// Transforms the generator's tensors of one input set in place. Errors: an input it needs is missing or
// has another shape (kInternal: the generator and the stress disagree).
using StressFn = Status (*)(const std::map<std::string, int64_t>& axes, uint64_t seed,
                            std::map<std::string, tensor::Tensor>& inputs);

struct Stress {
  std::string_view generator;  // the task.toml [inputs] generator it transforms the draws of
  std::string_view name;       // as task.toml [inputs] stress names it
  std::string_view what;       // one line: what the stressed inputs hold (verdicts, docs)
  StressFn apply;
};

// Every stress, one row each (a vocabulary: docs/integrity-gates.md lists the same rows).
std::span<const Stress> stresses();
const Stress* find_stress(std::string_view generator, std::string_view name);  // nullptr if unknown
std::vector<std::string> stress_names(std::string_view generator);             // in table order

}  // namespace kda::contest
