#include "eval/torch_oracle.h"

#include <cstdlib>
#include <mutex>
#include <optional>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "proc/subprocess.h"

namespace kda::eval {

namespace {

namespace stdfs = std::filesystem;

// The probe prints the interpreter's own path first, so a failing import still names it.
constexpr const char* kProbeSource =
    "import sys\n"
    "print(sys.executable, flush=True)\n"
    "import torch\n"
    "print('torch %s (cuda %s, %s)' % (torch.__version__, torch.version.cuda,\n"
    "      'cuda available' if torch.cuda.is_available() else 'no cuda device'))\n";

constexpr double kProbeTimeoutS = 60;

// Entries of the evaluator's environment the oracle's interpreter needs to find its packages
// (never seeds: the seeds travel over the command pipe only).
std::vector<std::string> forwarded_python_env() {
  std::vector<std::string> env{"PYTHONDONTWRITEBYTECODE=1"};
  for (const char* keep : {"PYTHONPATH", "PYENV_VERSION", "PYENV_ROOT"})
    if (const char* v = std::getenv(keep); v != nullptr && *v != '\0') env.push_back(std::string(keep) + "=" + v);
  return env;
}

// The environment RunnerClient gives every runner (runner_client.cc), plus `extra`: the probe must
// see what the oracle will see.
std::vector<std::string> runner_like_environment(const std::vector<std::string>& extra) {
  std::vector<std::string> env{"PATH=/usr/bin:/bin", "LANG=C"};
  for (const char* keep : {"CUDA_VISIBLE_DEVICES", "HOME", "LD_LIBRARY_PATH", "TMPDIR"})
    if (const char* v = std::getenv(keep); v != nullptr) env.push_back(std::string(keep) + "=" + v);
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

std::string last_line(const std::string& text) {
  std::string best;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.find_first_not_of(" \t\r") != std::string::npos) best = line;
  return best;
}

TorchProbe run_probe() {
  TorchProbe p;
  auto python = torch_oracle_python();
  if (!python.ok()) {
    p.detail = python.status().message();
    return p;
  }
  p.python = *python;
  proc::RunOptions ro;
  ro.argv = {p.python.string(), "-c", kProbeSource};
  ro.env = runner_like_environment(forwarded_python_env());
  ro.timeout_seconds = kProbeTimeoutS;
  ro.output_cap = 64 << 10;
  auto r = proc::run(ro);
  if (!r.ok()) {
    p.detail = p.python.string() + " does not start: " + r.status().message();
    return p;
  }
  std::istringstream out(r->stdout_text);
  std::string exe, detail;
  std::getline(out, exe);
  std::getline(out, detail);
  if (!exe.empty() && exe.front() == '/') p.executable = exe;
  if (r->exit.success() && !detail.empty()) {
    p.importable = true;
    p.detail = detail;
    return p;
  }
  std::string why = last_line(r->stderr_text);
  if (r->exit.timed_out)
    why = "import torch took longer than " + std::to_string(static_cast<int>(kProbeTimeoutS)) + " s";
  if (why.empty()) why = r->exit.describe();
  p.detail = "python3 -c 'import torch' failed under " + p.python.string() + ": " + why;
  return p;
}

}  // namespace

Result<stdfs::path> torch_oracle_python() {
  if (const char* v = std::getenv("KDA_PYTHON"); v != nullptr && *v != '\0') {
    auto found = proc::find_program(v);
    if (!found.ok()) return Status::not_found(std::string("KDA_PYTHON=") + v + ": " + found.status().message());
    return *found;
  }
  if (auto found = proc::find_program("python3"); found.ok()) return *found;
  if (auto found = proc::find_program("/usr/bin/python3"); found.ok()) return *found;
  return Status::not_found(
      "no python3 on PATH nor at /usr/bin/python3 (the torch oracle needs one; or set KDA_PYTHON)");
}

const TorchProbe& torch_probe() {
  static const TorchProbe probe = run_probe();
  return probe;
}

bool torch_importable() { return torch_probe().importable; }

namespace {

// What torch.utils.cpp_extension builds an extension with, as one JSON line (include_paths takes
// device_type since torch 2.4, cuda= before).
constexpr const char* kTorchExtensionQuery = R"(import json, sysconfig
import torch, torch.utils.cpp_extension as e
try:
    inc = e.include_paths(device_type="cuda" if torch.cuda.is_available() else "cpu")
except TypeError:
    inc = e.include_paths(cuda=torch.cuda.is_available())
print(json.dumps({"version": torch.__version__, "include_dirs": list(inc) + [sysconfig.get_paths()["include"]],
                  "library_dirs": list(e.library_paths()), "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
                  "nvcc_flags": list(e.COMMON_NVCC_FLAGS)}))
)";

Result<build::TorchExtension> query_torch_extension() {
  KDA_ASSIGN_OR_RETURN(stdfs::path python, torch_oracle_python());
  proc::RunOptions ro;
  ro.argv = {python.string(), "-c", kTorchExtensionQuery};
  ro.env = runner_like_environment(forwarded_python_env());
  ro.timeout_seconds = kProbeTimeoutS;
  ro.output_cap = 64 << 10;
  KDA_ASSIGN_OR_RETURN(proc::RunResult r, proc::run(ro));
  if (!r.exit.success()) {
    std::string why = last_line(r.stderr_text);
    return Status::not_found(python.string() + " cannot import torch.utils.cpp_extension (" +
                             (why.empty() ? r.exit.describe() : why) +
                             "): binding \"torch\" builds against an installed PyTorch; set KDA_PYTHON to an "
                             "interpreter that has one");
  }
  try {
    const auto j = nlohmann::json::parse(last_line(r.stdout_text));
    build::TorchExtension t;
    t.version = j.at("version").get<std::string>();
    t.include_dirs = j.at("include_dirs").get<std::vector<std::string>>();
    t.library_dirs = j.at("library_dirs").get<std::vector<std::string>>();
    t.cxx11_abi = j.at("cxx11_abi").get<bool>();
    t.nvcc_flags = j.at("nvcc_flags").get<std::vector<std::string>>();
    return t;
  } catch (const nlohmann::json::exception& e) {
    return Status::internal(python.string() + ": unreadable torch query output: " + e.what());
  }
}

}  // namespace

Result<build::TorchExtension> find_torch_extension() {
  static std::mutex mu;
  static std::optional<Result<build::TorchExtension>> found;
  std::lock_guard<std::mutex> lock(mu);
  if (!found) found = query_torch_extension();
  return *found;
}

Result<RunnerOptions> torch_oracle_runner_options(const stdfs::path& runner_binary, const std::string& backend) {
  if (backend != "host" && backend != "cuda")
    return Status::bad_input("torch oracle: backend '" + backend + "' (host or cuda)");
  stdfs::path script = runner_binary.parent_path() / kTorchOracleScript;
  std::error_code ec;
  if (!stdfs::is_regular_file(script, ec))
    return Status::not_found("torch oracle: " + script.string() + " not found (it is installed beside kda-runner)");
  stdfs::path python;
  if (const TorchProbe& p = torch_probe(); !p.executable.empty()) {
    python = p.executable;
  } else {
    KDA_ASSIGN_OR_RETURN(python, torch_oracle_python());
  }
  RunnerOptions o;
  o.runner_binary = script;
  o.backend = backend;
  o.role = RunnerRole::kReference;
  o.sandbox = false;  // trusted reference code; the oracle refuses a sandboxed load
  o.start_timeout_s = 60;
  o.wrapper = {python.string()};
  o.extra_env = forwarded_python_env();
  return o;
}

CallOutcome load_torch_reference(RunnerClient& oracle, const stdfs::path& definition, double timeout_s) {
  return oracle.load(definition, "run", timeout_s);
}

Result<RunnerClient> start_torch_reference(const stdfs::path& runner_binary, const std::string& backend,
                                           const stdfs::path& definition, double timeout_s) {
  KDA_ASSIGN_OR_RETURN(RunnerOptions options, torch_oracle_runner_options(runner_binary, backend));
  auto runner = RunnerClient::start(options);
  if (!runner.ok()) return runner.status().with_context("torch oracle");
  CallOutcome o = load_torch_reference(*runner, definition, timeout_s);
  if (o.kind != CallOutcome::Kind::kOk)
    return Status::failed("torch oracle could not load " + definition.string() + ": " + o.message +
                          (o.log.empty() ? "" : "\n" + o.log));
  return std::move(*runner);
}

}  // namespace kda::eval
