// Registry of structured-input generators for the contest task packs (task.toml [inputs] generator = "<name>").
//
// A generator synthesises the inputs of a workload that need special structure: the ones the contest captured
// from real runs (sequence lengths, block tables, sparse indices, cu_seqlens, routing logits, GDN tensors and
// warmed states) and the indexer's packed fp8 K cache. The evaluator calls it once per (workload, input set) with
// that set's secret trial seed and applies its tensors to the inputs the workload marks {"type":"random"}; inputs
// a workload gives explicitly (safetensors blobs, scalars) take precedence, so edge-case workloads can pin e.g.
// their sequence lengths or a routing in a blob while the generator still supplies the rest. Inputs a generator
// does not fill stay generic random (spec §2.3).
//
// Fresh and fixed: every value a generator writes is drawn from the trial seed, so no value is a function of
// public data (the uuids are in the repository; captured values there would let a candidate precompute its
// answers). What stays fixed per workload is only what its axes define (every shape; e.g. total_seq_len and
// num_seqs, not how the tokens split into sequences) and the structure each pack's README documents, which every
// draw has (unit-norm GDN q/k, one long prefill sequence, disjoint DSA pages, a full indexer row, ...), plus the
// workload's blobs and scalars.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/tensor.h"
#include "util/status.h"

namespace kda::contest {

// Synthesises the structured inputs of one workload: fills `out` with host Tensors for every input it owns (exact
// definition shapes/dtypes); other inputs stay generic random. Every value derives from
// SeededRng::combine(workload_seed, trial_seed): trial_seed is the secret that makes the values fresh;
// workload_seed (public, from the uuid) is mixed in so that a caller that reuses one trial seed for several
// workloads (the bench/contest tools pass trial seed 0) still gets different inputs per workload. The same
// (axes, workload_seed, trial_seed) gives the same tensors bit for bit, on any thread count.
using Generator = Status (*)(const std::map<std::string, int64_t>& axes, uint64_t workload_seed, uint64_t trial_seed,
                             std::map<std::string, tensor::Tensor>& out);

const Generator* find_generator(std::string_view name);  // nullptr if unknown
std::vector<std::string> generator_names();              // sorted

// The workload seed of a uuid: the first 8 bytes (big-endian) of SHA-256("kda-contest-workload:" + uuid).
uint64_t workload_seed_from_uuid(std::string_view uuid);

}  // namespace kda::contest
