// Input materialisation for one (workload, trial): scalars from the workload, safetensors blobs
// from the pack, structured inputs from the pack's generator, the rest seeded random with
// FlashInfer-Bench distributions. Every value derives from (trial seed, input position), so the
// reference runner, the candidate runner and the evaluator see identical inputs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "eval/arena.h"
#include "task/task_pack.h"
#include "tensor/tensor.h"
#include "util/status.h"

namespace kda::eval {

struct ResolvedWorkload {
  const task::Workload* workload = nullptr;
  std::map<std::string, int64_t> axes;
  std::vector<std::vector<int64_t>> input_shapes;  // definition order ({} for scalars)
  std::vector<std::vector<int64_t>> output_shapes;
};

Result<ResolvedWorkload> resolve_workload(const task::TaskPack& pack, const task::Workload& w);

// The workload's arena layout: every input and output tensor in its own guarded slot (an input
// without a fixed shape in the definition is marked variable).
ArenaLayout workload_layout(const task::Definition& def, const ResolvedWorkload& rw);

// Safetensors blobs, read once per evaluation.
class BlobCache {
 public:
  Result<tensor::Tensor> get(const std::filesystem::path& file, const std::string& key);

 private:
  std::map<std::string, tensor::Tensor> cache_;
};

// How a plain random input's values are defined: tensor::fill_random(seed, stream), except that the
// fingerprint positions of copy_fingerprint come from fingerprint_seed when it is set.
struct RandomSpec {
  uint64_t seed = 0;
  uint64_t stream = 0;
  std::optional<uint64_t> fingerprint_seed;
};

struct MaterializedInputs {
  std::vector<tensor::Tensor> tensors;  // definition order; scalars are 0-d tensors
  std::vector<bool> plain_random;       // true where the values are generic seeded random
  std::vector<RandomSpec> random;       // the definition of each plain random input (else unused)
  // False when plain random inputs were not filled on the host (their tensors are empty): a runner
  // with device-side inputs generates them from `random`.
  bool host_values = true;
  uint64_t id = 0;    // set by the evaluator: which input set a runner holds
  uint64_t seed = 0;  // set by the evaluator: the seed it was drawn from
};

// host_values = false skips the host fill of plain random inputs (they are described by `random`).
// generator_seed: the trial seed handed to the pack's generator instead of `trial_seed` (knock-out
// tests only: with a constant one, generated inputs are a function of the public uuid again).
// stress: one of the generator's stresses (task.toml [inputs] stress, contest/stress.h), applied to its
// draw with a seed of its own derived from trial_seed; "" for none. An unknown one is kBadInput.
Result<MaterializedInputs> materialize_inputs(const task::TaskPack& pack, const ResolvedWorkload& rw,
                                              uint64_t trial_seed, BlobCache& blobs, bool host_values = true,
                                              std::optional<uint64_t> generator_seed = std::nullopt,
                                              std::string_view stress = {});

// The stresses of an input generator this kda has (contest/stress.h), in table order; nullopt when it
// has no such generator (kda task validate checks packs with it).
std::optional<std::vector<std::string>> generator_stresses(std::string_view generator);

// The error for a task.toml [inputs] stress name the pack's generator does not have (the known ones listed).
std::string unknown_stress(const task::TaskPack& pack, std::string_view name);

// Copies the "fingerprint" of `from` into `to` for plain random inputs: the first and last 16
// elements and every 64th element (eval/fingerprint.h). A cache keyed on a sparse sample of the inputs then sees the
// same key for different inputs (threat S12); the re-check of timed outputs catches it.
void copy_fingerprint(const MaterializedInputs& from, MaterializedInputs& to);

// Deterministic per-purpose seeds: mix(master, uuid, trial, purpose).
uint64_t derive_seed(uint64_t master, const std::string& uuid, uint64_t trial, uint64_t purpose);

}  // namespace kda::eval
