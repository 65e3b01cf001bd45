#include "eval/evaluator.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "contest/stress.h"
#include "eval/arena.h"
#include "eval/attestation.h"
#include "eval/input_digest.h"
#include "eval/inputs.h"
#include "eval/probes.h"
#include "eval/roofline.h"
#include "eval/runner_client.h"
#include "eval/solution_build.h"
#include "eval/static_gate.h"
#include "eval/topk_checker.h"
#include "eval/torch_oracle.h"
#include "util/parallel.h"
#include "util/strings.h"
#include "eval/session.h"

namespace kda::eval {

using namespace detail;

namespace {

// What evaluate() and Screener refuse before anything runs: a candidate for another definition or
// in the wrong language.
Status check_candidate(const task::TaskPack& pack, const task::Solution& candidate) {
  if (candidate.definition != pack.definition.name)
    return Status::bad_input(fmt::format("solution '{}' is for definition '{}', the task is '{}'", candidate.name,
                                         candidate.definition, pack.definition.name));
  // Python runs on either backend (numpy views on the host, torch tensors on CUDA); Triton needs a GPU.
  const bool cuda = pack.backend == task::Backend::kCuda;
  const std::string& lang = candidate.spec.language;
  const std::string compiled = cuda ? "cuda" : "cpp";
  if (lang != compiled && lang != "python" && !(cuda && lang == "triton"))
    return Status::bad_input(fmt::format(
        "solution '{}' is written in '{}', but task '{}' runs on the {} backend, which takes '{}' solutions",
        candidate.name, lang, pack.definition.name, cuda ? "cuda" : "host",
        cuda ? "cuda', 'python' or 'triton" : "cpp' or 'python"));
  return {};
}

Status check_options(const task::TaskPack& pack, EvalOptions& opts) {
  for (const auto& s : pack.settings.stress)  // a pack's mistake, before any candidate is judged by it
    if (contest::find_stress(pack.settings.inputs_generator, s) == nullptr)
      return Status::bad_input(unknown_stress(pack, s));
  KDA_RETURN_IF_ERROR(check_gpu_machine(pack));
  if (!opts.seed) opts.seed = fresh_secret_seed();
  if (opts.reference != "pack" && opts.reference != "torch")
    return Status::bad_input("--reference must be 'pack' or 'torch', not '" + opts.reference + "'");
  if (pack.python_reference_only && opts.reference != "torch")
    return Status::bad_input(
        fmt::format("{}: definition '{}' has no reference solution, only its Python reference: evaluate "
                    "with --reference torch",
                    pack.definition_file.string(), pack.definition.name));
  if (opts.sealed) {
    KDA_ASSIGN_OR_RETURN(task::Manifest now, task::pack_manifest(pack.root));
    task::ManifestDiff diff = task::manifest_diff(*opts.sealed, now);
    if (!diff.empty())
      return Status::failed(
          fmt::format("{}: the task pack no longer matches its sealed manifest ({}); refusing to "
                      "evaluate",
                      pack.root.string(), task::describe(diff)));
  }
  return {};
}

}  // namespace

Status check_gpu_machine(const task::TaskPack& pack, const std::vector<std::filesystem::path>& driver_files) {
  if (pack.backend != task::Backend::kCuda) return {};
  static const std::vector<std::filesystem::path> kDriverFiles = {"/proc/driver/nvidia/version", "/dev/nvidiactl",
                                                                  "/dev/nvidia0", "/dev/dxg"};
  const auto& files = driver_files.empty() ? kDriverFiles : driver_files;
  std::error_code ec;
  for (const auto& f : files)
    if (std::filesystem::exists(f, ec)) return {};
  std::string looked;
  for (const auto& f : files) looked += (looked.empty() ? "" : ", ") + f.string();
  return Status::bad_input(fmt::format(
      "{}: a CUDA task pack, and this machine has no NVIDIA GPU driver (none of {} exists); evaluate it on a machine "
      "with an NVIDIA GPU (the host packs in tasks/host run anywhere)",
      pack.root.string(), looked));
}

Result<std::vector<std::string>> selected_workload_uuids(const task::TaskPack& pack, const std::string& which) {
  Status error;
  std::vector<std::string> out;
  for (const task::Workload* w : detail::select_workloads(pack, which, &error)) out.push_back(w->uuid);
  if (!error.ok()) return error;
  return out;
}

Result<EvalReport> evaluate(const task::TaskPack& pack, const task::Solution& candidate, const EvalOptions& options) {
  EvalOptions opts = options;
  KDA_RETURN_IF_ERROR(check_options(pack, opts));
  KDA_RETURN_IF_ERROR(check_candidate(pack, candidate));
  if (opts.baseline) {
    Status st = check_candidate(pack, *opts.baseline);
    if (!st.ok()) return Status::bad_input("--baseline: " + st.message());
  }
  Session s(pack, opts);
  return s.run(candidate);
}

struct Screener::Impl {
  const task::TaskPack& pack;
  EvalOptions options;  // the session reads these: timing is set per candidate
  ScreenCache cache;    // what the session reuses from one candidate to the next
  Session session;
  Impl(const task::TaskPack& p, EvalOptions o) : pack(p), options(std::move(o)), session(pack, options) {
    session.enable_screening(&cache);
  }
};

Result<std::unique_ptr<Screener>> Screener::open(const task::TaskPack& pack, EvalOptions options) {
  KDA_RETURN_IF_ERROR(check_options(pack, options));
  options.with_baseline = false;
  options.sealed.reset();  // checked once, here
  auto s = std::unique_ptr<Screener>(new Screener());
  s->impl_ = std::make_unique<Impl>(pack, std::move(options));
  return s;
}

Screener::Screener() = default;
Screener::~Screener() = default;

Result<EvalReport> Screener::evaluate(const task::Solution& candidate, const std::string& workloads, int trials,
                                      int warmup, int iterations, ScreenChecks checks) {
  KDA_RETURN_IF_ERROR(check_candidate(impl_->pack, candidate));
  impl_->cache.checks = checks;
  impl_->options.workloads = workloads;
  impl_->options.trials = trials;
  impl_->options.warmup = warmup;
  impl_->options.iterations = iterations;
  return impl_->session.rerun(candidate);
}

ScreenStats Screener::stats() const { return impl_->cache.stats(); }

}  // namespace kda::eval
