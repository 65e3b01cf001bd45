// task.toml: kda's per-pack settings (evaluation, timing, policy, roofline, baseline, reference, inputs,
// probes),
// every key optional, types and ranges checked with the file and key named.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "task/expression.h"
#include "util/diagnostics.h"
#include "util/status.h"

namespace kda::task {

enum class Backend { kHost, kCuda };
enum class Checker { kDefault, kTopkIndices };
enum class PersistentState { kNone, kScratch };
enum class Determinism { kBitwise, kTolerance };
// Off-distribution correctness probes (threat S7: numerics fitted to the test distribution). Each is
// one extra correctness trial in which the named inputs' random values are transformed with secret
// parameters: kOffset adds a constant, kScale multiplies by a power of two, kOutliers replaces a
// sparse random subset with large values of random sign.
enum class Probe { kOffset, kScale, kOutliers };

std::string_view backend_name(Backend b);  // "host" | "cuda"
std::string_view checker_name(Checker c);  // "default" | "topk_indices"
std::string_view persistent_state_name(PersistentState p);
std::string_view determinism_name(Determinism d);
std::string_view probe_name(Probe p);  // "offset" | "scale" | "outliers"

struct TaskSettings {
  // [evaluation]
  std::optional<Backend> backend;  // nullopt: implied by the reference language (cpp -> host, cuda -> cuda)
  Checker checker = Checker::kDefault;
  double atol = 1e-2;
  double rtol = 1e-2;
  double matched_ratio = 1.0;  // (0, 1]
  // The error budget a round of `kda run` may spend: the largest share of the tolerance any element
  // used (min(abs/atol, rel/rtol), eval::OutputCheck::tolerance_used). nullopt: no limit.
  std::optional<double> max_tolerance_used;
  std::vector<std::string> compare_outputs;  // empty: all outputs
  std::vector<std::string> dev_workloads;    // empty: 8 evenly spaced workloads
  // [timing]
  int warmup = 10;
  int iterations = 50;
  int trials = 3;
  double call_timeout_s = 30.0;
  double workload_timeout_s = 300.0;
  // [policy]
  std::vector<std::string> libraries;
  bool cuda_graphs = false;
  bool streams = false;
  bool threads = false;
  PersistentState persistent_state = PersistentState::kScratch;
  Determinism determinism = Determinism::kBitwise;
  // [contract] graph: the deployment contract is required (CUDA): one call captured into a CUDA graph
  // and replayed on fresh inputs in the same buffers must be correct. false: measured and reported
  // (the trace's kda.graph_safe), never a rejection.
  bool graph_contract = false;
  // [roofline]: formulas over axis names (parsed; see expression.h)
  std::optional<Expression> roofline_bytes;
  std::optional<Expression> roofline_flops;
  // [baseline]
  std::string baseline_name;  // empty: the only baseline, or "naive"
  // [reference]
  std::string reference_dir = "reference";
  std::optional<std::string> cpu_reference_dir;
  // [inputs]
  std::string inputs_generator;  // empty: plain FlashInfer-Bench inputs
  // [inputs] stress: the generator's stresses (contest/stress.h), one extra correctness trial each on
  // stressed inputs; the names are checked against the generator when an evaluation starts.
  std::vector<std::string> stress;
  // [probes]: input name -> the probes that transform it (floating-point, plain random inputs only)
  std::vector<std::pair<std::string, std::vector<Probe>>> probes;

  nlohmann::json to_json() const;
};

// Parses task.toml text. Unknown tables/keys are errors (typos would silently change an evaluation).
// Problems name the file, the line and the key (pointer "/evaluation/atol").
std::optional<TaskSettings> settings_from_toml(std::string_view text, const std::string& file, Diagnostics& diags);
std::optional<TaskSettings> load_settings(const std::filesystem::path& path, Diagnostics& diags);

}  // namespace kda::task
