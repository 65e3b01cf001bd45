// Registry of structured-input generators for the contest task packs (task.toml [inputs] generator = "<name>").
//
// A generator synthesises the inputs of a workload that the contest captured from real runs (sequence lengths,
// block tables, sparse indices, cu_seqlens, routing logits, ...) or that it drew at random but that need special
// structure (the indexer's packed fp8 K cache). The evaluator calls it once per (workload, trial) and applies its
// tensors to the inputs the workload marks {"type":"random"}; inputs a workload gives explicitly (safetensors
// blobs, scalars) take precedence, so edge-case workloads can pin e.g. their sequence lengths in a blob while the
// generator still supplies the rest. Inputs a generator does not fill stay generic random (spec §2.3).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/tensor.h"
#include "util/status.h"

namespace kda::contest {

// Synthesises the structured inputs of one workload. workload_seed derives from the uuid (fixed per
// workload: "real" captured inputs); trial_seed changes every trial (inputs the contest drew at random
// but that need special structure, e.g. the indexer's packed fp8 K cache). Fills `out` with host Tensors
// for every input it owns (exact definition shapes/dtypes); other inputs stay generic random.
using Generator = Status (*)(const std::map<std::string, int64_t>& axes, uint64_t workload_seed,
                             uint64_t trial_seed, std::map<std::string, tensor::Tensor>& out);

const Generator* find_generator(std::string_view name);  // nullptr if unknown
std::vector<std::string> generator_names();              // sorted

// The workload seed of a uuid: the first 8 bytes (big-endian) of SHA-256("kda-contest-workload:" + uuid).
uint64_t workload_seed_from_uuid(std::string_view uuid);

}  // namespace kda::contest
