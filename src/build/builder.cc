#include "build/builder.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "build/compiler_sandbox.h"
#include "elf/elf_file.h"
#include "proc/subprocess.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace kda::build {

namespace stdfs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kCacheFormat = "kda-build-v1";

enum class Language { kCpp, kCuda };

bool is_translation_unit(const std::string& path) {
  static const std::set<std::string> kExts = {".c", ".cc", ".cpp", ".cxx", ".cu"};
  return kExts.count(stdfs::path(path).extension().string()) > 0;
}

bool is_system_include_dir(const std::string& dir) {
  std::error_code ec;
  auto canon = stdfs::weakly_canonical(dir, ec).string();
  return canon == "/usr/include" || canon == "/usr/local/include";
}

// `<compiler> --version`, once per compiler per process.
Result<std::string> compiler_identity(const std::string& compiler) {
  static std::mutex mu;
  static std::map<std::string, std::string> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(compiler); it != cache.end()) return it->second;
  }
  proc::RunOptions o;
  o.argv = {compiler, "--version"};
  o.timeout_seconds = 120;
  KDA_ASSIGN_OR_RETURN(proc::RunResult r, proc::run(o));
  if (!r.exit.success())
    return Status::io(compiler + " --version failed (" + r.exit.describe() + "): " + r.stderr_text);
  std::lock_guard<std::mutex> lock(mu);
  cache[compiler] = r.stdout_text;
  return r.stdout_text;
}

// The line of `--version` output that names the version: nvcc's "Cuda compilation tools, release
// ...", otherwise the first line ("g++ (Debian 12.2.0-14) 12.2.0").
std::string version_line(const std::string& text) {
  std::istringstream in(text);
  std::string first;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    if (line.find(", release ") != std::string::npos) return line;
    if (first.empty()) first = line;
  }
  return first;
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

// Everything that decides what the compiler produces, except the sources.
struct Plan {
  Language language = Language::kCpp;
  std::string compiler;               // resolved path
  std::string host_compiler;          // cuda: the C++ compiler nvcc drives (resolved), if found
  std::string identity;               // --version output(s)
  std::vector<std::string> versions;  // one line per compiler (version_line), for provenance
  std::vector<std::string> compile_flags;
  std::vector<std::string> link_flags;
  std::vector<stdfs::path> include_roots;  // where headers may come from (besides the sources)
};

stdfs::path normalized(const stdfs::path& p) {
  std::error_code ec;
  auto c = stdfs::weakly_canonical(p, ec);
  return ec ? p.lexically_normal() : c;
}

bool is_under(const stdfs::path& p, const stdfs::path& root) {
  auto rel = p.lexically_relative(root);
  return !rel.empty() && *rel.begin() != "..";
}

// binding "torch": the flags torch.utils.cpp_extension gives an extension (FlashInfer-Bench's torch
// builder adds none of its own): C++17, TORCH_EXTENSION_NAME, the ABI flag, torch's headers as system
// headers, its nvcc defines for CUDA; linked against torch's libraries, found again at load through
// the rpath. Torch's and Python's directories become include roots: the compiler sandbox lets them be
// read and the included-header record hashes what was read there.
Status add_torch_extension(const BuildRequest& req, Plan& plan) {
  if (!req.torch) return Status::bad_input("binding torch: no torch to build against (eval::find_torch)");
  const TorchExtension& t = *req.torch;
  static const std::regex module_re("[A-Za-z_][A-Za-z0-9_]*");
  if (!std::regex_match(t.module, module_re))
    return Status::bad_input("binding torch: module name '" + t.module + "' is not an identifier");
  const bool cuda = plan.language == Language::kCuda;
  for (auto& f : plan.compile_flags)
    if (f == "-std=c++20") f = "-std=c++17";  // torch's extensions build as C++17
  std::vector<std::string> flags = {"-DTORCH_EXTENSION_NAME=" + t.module, "-DTORCH_API_INCLUDE_EXTENSION_H",
                                    std::string("-D_GLIBCXX_USE_CXX11_ABI=") + (t.cxx11_abi ? "1" : "0")};
  if (cuda) flags.insert(flags.end(), t.nvcc_flags.begin(), t.nvcc_flags.end());
  for (const auto& d : t.include_dirs) {
    if (!stdfs::path(d).is_absolute())
      return Status::bad_input("binding torch: include dir '" + d + "' is not absolute");
    flags.push_back("-isystem");
    flags.push_back(d);
    plan.include_roots.push_back(normalized(d));
  }
  plan.compile_flags.insert(plan.compile_flags.end(), flags.begin(), flags.end());
  for (const auto& d : t.library_dirs) {
    if (!stdfs::path(d).is_absolute())
      return Status::bad_input("binding torch: library dir '" + d + "' is not absolute");
    plan.link_flags.push_back("-L" + d);
    plan.link_flags.push_back(cuda ? "-Xlinker" : "-Wl,-rpath," + d);
    if (cuda) plan.link_flags.push_back("-rpath," + d);
    plan.include_roots.push_back(normalized(d));
  }
  for (const char* l : kTorchLibraries) plan.link_flags.push_back(std::string("-l") + l);
  if (cuda)
    for (const char* l : kTorchCudaLibraries) plan.link_flags.push_back(std::string("-l") + l);
  return {};
}

Result<Plan> make_plan(const BuildRequest& req, const BuilderConfig& cfg) {
  Plan plan;
  if (req.language == "cpp") {
    plan.language = Language::kCpp;
  } else if (req.language == "cuda") {
    plan.language = Language::kCuda;
  } else {
    return Status::bad_input("language: '" + req.language + "' is not buildable (expected cpp or cuda)");
  }
  if (req.sources.empty()) return Status::bad_input("sources: empty");
  std::set<std::string> seen;
  bool have_tu = false;
  for (const auto& s : req.sources) {
    KDA_RETURN_IF_ERROR(validate_source_path(s.path).with_context("sources"));
    if (!seen.insert(s.path).second) return Status::bad_input("sources: duplicate path '" + s.path + "'");
    have_tu = have_tu || is_translation_unit(s.path);
  }
  if (!have_tu) return Status::bad_input("sources: no translation unit (.cu, .cc, .cpp, .cxx or .c)");
  if (!seen.count(req.entry_file))
    return Status::bad_input("entry_point: file '" + req.entry_file + "' is not among the sources");
  static const std::regex symbol_re("[A-Za-z_][A-Za-z0-9_]*");
  if (!std::regex_match(req.entry_symbol, symbol_re))
    return Status::bad_input("entry_point: '" + req.entry_symbol + "' is not a C identifier");
  static const std::regex arch_re("[0-9]{2,3}[af]?");
  if (!std::regex_match(req.cuda_arch, arch_re))
    return Status::bad_input("cuda_arch: '" + req.cuda_arch + "' (expected e.g. 90a, 100a, 89)");
  if (req.opt_level < 0 || req.opt_level > 3) return Status::bad_input("opt_level: must be 0..3");
  static const std::regex lib_re("[A-Za-z0-9_+.-]+");
  for (const auto& l : req.libraries)
    if (!std::regex_match(l, lib_re)) return Status::bad_input("libraries: invalid library name '" + l + "'");
  for (const auto& d : req.include_dirs)
    if (!stdfs::path(d).is_absolute()) return Status::bad_input("include_dirs: '" + d + "' is not absolute");

  std::vector<std::string> includes = {"-Isrc"};
#ifdef KDA_DLPACK_INCLUDE_DIR
  if (!is_system_include_dir(KDA_DLPACK_INCLUDE_DIR)) includes.push_back(std::string("-I") + KDA_DLPACK_INCLUDE_DIR);
#endif
#ifdef KDA_TVM_FFI_INCLUDE_DIR
  includes.push_back(std::string("-I") + KDA_TVM_FFI_INCLUDE_DIR);  // tvm/ffi/*.h: kda's tvm-ffi subset
#endif
  for (const auto& d : req.include_dirs) includes.push_back("-I" + d);
  const std::string opt = "-O" + std::to_string(req.opt_level);

  std::string cxx = cfg.cxx.empty() ? env_or("KDA_CXX", "c++") : cfg.cxx;
  auto cxx_path = proc::find_program(cxx);
  if (plan.language == Language::kCpp) {
    if (!cxx_path.ok()) return Status::not_found("C++ compiler '" + cxx + "' not found (set KDA_CXX)");
    plan.compiler = cxx_path->string();
    KDA_ASSIGN_OR_RETURN(plan.identity, compiler_identity(plan.compiler));
    plan.versions = {version_line(plan.identity)};
    plan.compile_flags = {"-std=c++20", opt, "-fPIC"};
    if (req.debug_lineinfo) plan.compile_flags.push_back("-g");
    plan.link_flags = {"-shared", "-Wl,-z,relro,-z,now"};
  } else {
#ifdef KDA_DEFAULT_NVCC
    std::string fallback = KDA_DEFAULT_NVCC;
#else
    std::string fallback = "nvcc";
#endif
    std::string nvcc = cfg.nvcc.empty() ? env_or("KDA_NVCC", fallback) : cfg.nvcc;
    auto nvcc_path = proc::find_program(nvcc);
    if (!nvcc_path.ok()) return Status::not_found("CUDA compiler '" + nvcc + "' not found (set KDA_NVCC)");
    plan.compiler = nvcc_path->string();
    KDA_ASSIGN_OR_RETURN(plan.identity, compiler_identity(plan.compiler));
    plan.versions = {version_line(plan.identity)};
    // nvcc drives the host compiler found on PATH; its version matters too.
    if (cxx_path.ok()) {
      plan.host_compiler = cxx_path->string();
      auto host = compiler_identity(cxx_path->string());
      if (host.ok()) {
        plan.identity += "\n" + *host;
        plan.versions.push_back(version_line(*host));
      }
    }
    const std::string gencode = "-gencode=arch=compute_" + req.cuda_arch + ",code=sm_" + req.cuda_arch;
    plan.compile_flags = {"-std=c++17", opt, "-Xcompiler", "-fPIC", gencode, "-Xptxas", "-v"};
    // CUB and Thrust include NVTX, whose loader imports getenv, dlopen and dlsym: forbidden imports
    // for an honest kernel. Without NVTX ranges (nobody reads them under kda) nothing is loaded.
    if (!req.nvtx) plan.compile_flags.push_back("-DNVTX_DISABLE");
    if (req.debug_lineinfo) plan.compile_flags.push_back("-lineinfo");
    plan.link_flags = {"-shared", "-cudart", "shared", gencode, "-Xlinker", "-z,relro,-z,now"};
  }
  plan.compile_flags.insert(plan.compile_flags.end(), req.extra_flags.begin(), req.extra_flags.end());
  plan.compile_flags.insert(plan.compile_flags.end(), includes.begin(), includes.end());
  if (req.binding == "torch") KDA_RETURN_IF_ERROR(add_torch_extension(req, plan));
  for (const char* r : {"/usr/include", "/usr/lib", "/usr/lib64", "/usr/local/include"})
    plan.include_roots.push_back(r);
  if (plan.language == Language::kCuda) {
    // <toolkit>/bin/nvcc -> <toolkit>, and wherever that symlink points.
    stdfs::path toolkit = stdfs::path(plan.compiler).parent_path().parent_path();
    if (toolkit != "/usr" && toolkit != "/" && !toolkit.empty()) plan.include_roots.push_back(toolkit);
  }
#ifdef KDA_DLPACK_INCLUDE_DIR
  plan.include_roots.push_back(KDA_DLPACK_INCLUDE_DIR);
#endif
#ifdef KDA_TVM_FFI_INCLUDE_DIR
  plan.include_roots.push_back(KDA_TVM_FFI_INCLUDE_DIR);
#endif
  for (const auto& d : req.include_dirs) plan.include_roots.push_back(d);
  for (auto& r : plan.include_roots) r = normalized(r);
  for (const auto& l : req.libraries) plan.link_flags.push_back("-l" + l);
  return plan;
}

std::string compute_key(const BuildRequest& req, const Plan& plan) {
  Sha256 h;
  h.update_field(kCacheFormat).update_field(req.language).update_field(req.entry_file).update_field(req.entry_symbol);
  h.update_field("binding:" + req.binding);
  if (req.binding == "torch" && req.torch) h.update_field("torch:" + req.torch->version);
  std::vector<const SourceFile*> sorted;
  for (const auto& s : req.sources) sorted.push_back(&s);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->path < b->path; });
  h.update_field(std::to_string(sorted.size()));
  for (const auto* s : sorted) h.update_field(s->path).update_field(s->content);
  h.update_field("compile");
  for (const auto& f : plan.compile_flags) h.update_field(f);
  h.update_field("link");
  for (const auto& f : plan.link_flags) h.update_field(f);
  h.update_field(plan.compiler).update_field(plan.identity);
  return h.hex_digest();
}

// Dependencies listed in a make-style .d file (escaped spaces honoured).
std::vector<std::string> parse_depfile(const std::string& text) {
  std::vector<std::string> deps;
  std::string cur;
  bool after_colon = false;
  auto flush = [&] {
    if (!cur.empty() && after_colon) deps.push_back(cur);
    cur.clear();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\\' && i + 1 < text.size() && (text[i + 1] == '\n' || text[i + 1] == '\r')) {
      flush();
      ++i;
    } else if (c == '\\' && i + 1 < text.size() && text[i + 1] == ' ') {
      cur += ' ';
      ++i;
    } else if (c == ':' && !after_colon && (i + 1 >= text.size() || text[i + 1] == ' ' || text[i + 1] == '\n')) {
      cur.clear();
      after_colon = true;
    } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      flush();
      if (c == '\n') after_colon = false;  // a new rule starts on the next line
    } else {
      cur += c;
    }
  }
  flush();
  return deps;
}

std::string capped(std::string s, size_t cap) {
  if (s.size() <= cap) return s;
  size_t dropped = s.size() - cap;
  s.resize(cap);
  return s + "\n[truncated " + std::to_string(dropped) + " bytes]\n";
}

std::string command_line(const std::vector<std::string>& argv) {
  std::string out = "$";
  for (const auto& a : argv) out += " " + a;
  return out + "\n";
}

// The cached entry at dir, if complete and its library and recorded headers are unchanged.
std::optional<BuildResult> load_entry(const stdfs::path& dir, const std::string& key) {
  auto meta_text = fs::read_file(dir / "meta.json");
  if (!meta_text.ok()) return std::nullopt;
  json meta = json::parse(*meta_text, nullptr, /*allow_exceptions=*/false);
  if (!meta.is_object() || meta.value("format", "") != kCacheFormat || meta.value("key", "") != key)
    return std::nullopt;
  try {
    auto lib_hash = sha256_file_hex(dir / "lib.so");
    if (!lib_hash.ok() || *lib_hash != meta.at("library_sha256").get<std::string>()) return std::nullopt;
    for (const auto& h : meta.at("headers")) {
      auto got = sha256_file_hex(h.at("path").get<std::string>());
      if (!got.ok() || *got != h.at("sha256").get<std::string>()) return std::nullopt;
    }
    BuildResult r;
    r.ok = true;
    r.status = "ok";
    r.key = key;
    r.library = dir / "lib.so";
    auto log = fs::read_file(dir / "build.log");
    r.log = log.ok() ? *log : std::string();
    r.resources = meta.at("resources").get<std::vector<KernelResources>>();
    r.compile_seconds = meta.value("compile_seconds", 0.0);
    r.entry_export = meta.value("entry_export", meta.value("entry_symbol", std::string()));
    return r;
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

std::string random_suffix() {
  static thread_local std::mt19937_64 rng(std::random_device{}() ^ static_cast<uint64_t>(::getpid()));
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

// Moves a complete staging directory to root/key. If another builder published first, ours is
// dropped and theirs used; a stale entry (headers changed) is moved aside and replaced.
Result<BuildResult> publish(const stdfs::path& root, const std::string& key, const stdfs::path& staging,
                            BuildResult built) {
  const stdfs::path final_dir = root / key;
  std::error_code ec;
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (::rename(staging.c_str(), final_dir.c_str()) == 0) {
      built.library = final_dir / "lib.so";
      return built;
    }
    if (errno != ENOTEMPTY && errno != EEXIST)
      return Status::io("publishing build " + key + ": rename: " + std::strerror(errno));
    if (auto winner = load_entry(final_dir, key)) {
      stdfs::remove_all(staging, ec);
      winner->log = built.log;  // we did compile; our log says so
      winner->compile_seconds = built.compile_seconds;
      winner->compilers = built.compilers;
      return *winner;
    }
    const stdfs::path stale = root / ("stale-" + key + "-" + random_suffix());
    if (::rename(final_dir.c_str(), stale.c_str()) == 0) stdfs::remove_all(stale, ec);
  }
  stdfs::remove_all(staging, ec);
  return Status::io("publishing build " + key + ": could not replace the cache entry");
}

// Staging and stale directories left by builders that crashed (older than a day) are removed.
void sweep_abandoned(const stdfs::path& root) {
  std::error_code ec;
  const auto cutoff = stdfs::file_time_type::clock::now() - std::chrono::hours(24);
  for (auto it = stdfs::directory_iterator(root, ec); !ec && it != stdfs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("tmp-", 0) != 0 && name.rfind("stale-", 0) != 0) continue;
    std::error_code tec;
    auto t = stdfs::last_write_time(it->path(), tec);
    if (!tec && t < cutoff) stdfs::remove_all(it->path(), tec);
  }
}

// The staging directory's layout: src/ (the solution's sources), obj/ and tmp/ (the compilers').
Status stage_sources(const BuildRequest& req, const stdfs::path& staging) {
  for (const auto& s : req.sources) {
    stdfs::path p = staging / "src" / s.path;
    KDA_RETURN_IF_ERROR(fs::ensure_dir(p.parent_path()));
    KDA_RETURN_IF_ERROR(fs::write_file_atomic(p, s.content));
  }
  KDA_RETURN_IF_ERROR(fs::ensure_dir(staging / "obj"));
  return fs::ensure_dir(staging / "tmp");
}

// meta.json of a cache entry: what was built, how, and the hashes a later hit is checked against.
json cache_meta(const BuildRequest& req, const Plan& plan, const std::string& key, const BuildResult& result,
                const json& headers, const std::string& lib_hash) {
  return {{"format", kCacheFormat},
          {"key", key},
          {"language", req.language},
          {"entry_symbol", req.entry_symbol},
          {"entry_export", result.entry_export},
          {"compiler", plan.compiler},
          {"compile_flags", plan.compile_flags},
          {"link_flags", plan.link_flags},
          {"library_sha256", lib_hash},
          {"headers", headers},
          {"resources", result.resources},
          {"compile_seconds", result.compile_seconds}};
}

// The compilers' pre-exec hook: the build sandbox (reads confined to the toolchain, the system
// trees, the allowed include directories and the staging directory) unless it is off, then the
// caller's own hook. *note says which, for the build log.
std::function<int()> compiler_pre_exec(const BuilderConfig& cfg, const Plan& plan, const stdfs::path& staging,
                                       std::string* note) {
  const char* sandbox_env = std::getenv("KDA_BUILD_SANDBOX");
  if (!cfg.confine_compiler_reads || (sandbox_env != nullptr && std::string(sandbox_env) == "0")) {
    *note = "[build sandbox: off]\n";
    return cfg.compiler_pre_exec;
  }
  std::vector<stdfs::path> roots = system_read_roots(plan.compiler);
  if (!plan.host_compiler.empty()) {
    auto host_roots = system_read_roots(plan.host_compiler);
    roots.insert(roots.end(), host_roots.begin(), host_roots.end());
  }
  roots.insert(roots.end(), plan.include_roots.begin(), plan.include_roots.end());
  roots.push_back(staging);
  auto sandbox = std::make_shared<CompilerSandbox>(CompilerSandbox::prepare(roots));
  *note = "[build sandbox: " + sandbox->describe() + "]\n";
  std::function<int()> user = cfg.compiler_pre_exec;
  return [sandbox, user]() -> int {
    int e = sandbox->apply();
    if (e != 0) return e;
    return user ? user() : 0;
  };
}

// The symbol the runner will call: the C entry point, or its tvm-ffi export (binding "tvm-ffi", or
// binding null with only the tvm-ffi export, as FlashInfer-Bench defaults); why not, when neither fits.
std::optional<std::string> entry_export(const elf::ElfInfo& elf, const BuildRequest& req, std::string* symbol) {
  if (req.binding == "torch") {  // a Python extension module; Python finds the entry as its attribute
    const std::string init = "PyInit_" + (req.torch ? req.torch->module : std::string());
    if (elf.find_export(init) == nullptr)
      return "entry point " + req.entry_symbol + " not exported: binding torch needs PYBIND11_MODULE(" +
             "TORCH_EXTENSION_NAME, m) { m.def(\"" + req.entry_symbol + "\", ...); } in the sources (no " + init + ")";
    *symbol = req.entry_symbol;
    return std::nullopt;
  }
  const std::string tvm_ffi_export = "__tvm_ffi_" + req.entry_symbol;
  const bool has_c_abi = elf.find_export(req.entry_symbol) != nullptr;
  const bool has_tvm_ffi = elf.find_export(tvm_ffi_export) != nullptr;
  if (req.binding == "tvm-ffi") {
    if (!has_tvm_ffi)
      return "entry point " + req.entry_symbol + " not exported: binding tvm-ffi needs TVM_FFI_DLL_EXPORT_TYPED_FUNC(" +
             req.entry_symbol + ", <function>) in " + req.entry_file;
    *symbol = tvm_ffi_export;
    return std::nullopt;
  }
  if (!has_c_abi && has_tvm_ffi) {
    *symbol = tvm_ffi_export;
    return std::nullopt;
  }
  if (!has_c_abi) {
    std::string why = "entry point " + req.entry_symbol + " not exported";
    for (const auto& e : elf.exports) {
      if (e.name != req.entry_symbol && e.name.find(req.entry_symbol) != std::string::npos) {
        why += " (found C++ symbol " + e.name + "; declare it extern \"C\")";
        break;
      }
    }
    return why;
  }
  *symbol = req.entry_symbol;
  return std::nullopt;
}

// The headers the compile read outside the staging directory, with their hashes, from the
// compilers' dependency files; *outside names the first one under no allowed include root (then
// the list is incomplete and the build refused).
Result<json> included_headers(const std::vector<std::string>& depfiles, const stdfs::path& staging,
                              const std::vector<stdfs::path>& include_roots, std::string* outside) {
  json headers = json::array();
  std::set<std::string> seen;
  for (const auto& dep : depfiles) {
    KDA_ASSIGN_OR_RETURN(std::string text, fs::read_file(staging / dep));
    for (const auto& d : parse_depfile(text)) {
      stdfs::path p = stdfs::path(d).is_absolute() ? stdfs::path(d) : staging / d;
      p = p.lexically_normal();
      if (is_under(p, staging / "src")) continue;  // the solution's own files: already in the key
      p = normalized(p);
      if (is_under(p, normalized(staging / "src"))) continue;
      std::string norm = p.string();
      if (!seen.insert(norm).second) continue;
      if (!std::any_of(include_roots.begin(), include_roots.end(),
                       [&](const stdfs::path& r) { return is_under(p, r); })) {
        *outside = norm;
        return headers;
      }
      auto hash = sha256_file_hex(norm);
      if (!hash.ok()) return hash.status().with_context("hashing included header");
      headers.push_back({{"path", norm}, {"sha256", *hash}});
    }
  }
  return headers;
}

// The sources staged under dir/src are exactly req's (a Python entry is checked file by file: it
// has no library whose hash would say so).
bool staged_sources_match(const BuildRequest& req, const stdfs::path& dir) {
  for (const auto& src : req.sources) {
    auto have = fs::read_file(dir / "src" / src.path);
    if (!have.ok() || *have != src.content) return false;
  }
  return true;
}

// A Python solution's "compile" step, as FlashInfer-Bench has one: every .py source of the staged
// tree parsed (compile(), nothing run) by $KDA_PYTHON or python3, so a syntax error is a compile
// error naming file and line, not an import failure in the runner. True when all parse; without a
// python3 the check is left to the runner's import, and the log says so.
Result<bool> python_sources_parse(const BuildRequest& req, const stdfs::path& staging, std::string* log) {
  const char* env = std::getenv("KDA_PYTHON");
  auto python = proc::find_program(env != nullptr && *env != '\0' ? env : "python3");
  if (!python.ok()) {
    *log += "[no python3 found to check the sources' syntax: errors will show when kda-runner imports them]\n";
    return true;
  }
  proc::RunOptions o;
  o.argv = {python->string(), "-I", "-B", "-c",
            "import sys\nfor p in sys.argv[1:]:\n    compile(open(p, 'rb').read(), p, 'exec')"};
  for (const auto& src : req.sources)
    if (stdfs::path(src.path).extension() == ".py") o.argv.push_back("src/" + src.path);
  o.cwd = staging;
  o.timeout_seconds = 120;
  o.output_cap = 64 * 1024;
  KDA_ASSIGN_OR_RETURN(proc::RunResult r, proc::run(o));
  if (r.exit.success()) return true;
  *log += r.stderr_text + r.stdout_text + "[" + r.exit.describe() + "]\n";
  return false;
}

// Python and Triton solutions are not compiled: their sources are staged once per content
// (root/py-<key>/src) and kda-runner's interpreter imports the entry file from there.
Result<BuildResult> stage_python(const BuildRequest& req, const stdfs::path& root) {
  if (req.sources.empty()) return Status::bad_input("sources: empty");
  std::set<std::string> seen;
  Sha256 h;
  h.update_field("kda-python-v1");
  h.update_field(req.language);
  h.update_field(req.entry_file);
  h.update_field(req.entry_symbol);
  std::vector<const SourceFile*> sorted;
  for (const auto& src : req.sources) {
    KDA_RETURN_IF_ERROR(validate_source_path(src.path).with_context("sources"));
    if (!seen.insert(src.path).second) return Status::bad_input("sources: duplicate path '" + src.path + "'");
    sorted.push_back(&src);
  }
  if (!seen.count(req.entry_file))
    return Status::bad_input("entry_point: file '" + req.entry_file + "' is not among the sources");
  if (stdfs::path(req.entry_file).extension() != ".py")
    return Status::bad_input("entry_point: '" + req.entry_file + "' is not a .py file (language " + req.language + ")");
  static const std::regex identifier("[A-Za-z_][A-Za-z0-9_]*");
  if (!std::regex_match(req.entry_symbol, identifier))
    return Status::bad_input("entry_point: '" + req.entry_symbol + "' is not a Python identifier");
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->path < b->path; });
  for (const auto* src : sorted) {
    h.update_field(src->path);
    h.update_field(src->content);
  }
  const std::string key = "py-" + h.hex_digest();
  const stdfs::path final_dir = root / key;
  BuildResult result;
  result.ok = true;
  result.status = "ok";
  result.key = key;
  result.entry_export = req.entry_symbol;
  result.library = final_dir / "src" / req.entry_file;
  result.log = "[" + req.language + ": sources staged, not compiled; imported by kda-runner's interpreter]\n";
  if (staged_sources_match(req, final_dir)) {
    result.cache_hit = true;
    return result;
  }
  KDA_RETURN_IF_ERROR(fs::ensure_dir(root));
  KDA_ASSIGN_OR_RETURN(stdfs::path staging, fs::make_temp_dir(root, "tmp"));
  for (const auto& src : req.sources) {
    const stdfs::path p = staging / "src" / src.path;
    KDA_RETURN_IF_ERROR(fs::ensure_dir(p.parent_path()));
    KDA_RETURN_IF_ERROR(fs::write_file_atomic(p, src.content));
  }
  std::error_code ec;
  KDA_ASSIGN_OR_RETURN(bool parses, python_sources_parse(req, staging, &result.log));
  if (!parses) {
    stdfs::remove_all(staging, ec);
    result.ok = false;
    result.status = "compile error";
    result.library.clear();
    return result;
  }
  if (::rename(staging.c_str(), final_dir.c_str()) == 0) return result;
  if (staged_sources_match(req, final_dir)) {  // another evaluation staged the same content first
    stdfs::remove_all(staging, ec);
    return result;
  }
  const stdfs::path stale = root / ("stale-" + key + "-" + random_suffix());  // an incomplete entry
  if (::rename(final_dir.c_str(), stale.c_str()) == 0) stdfs::remove_all(stale, ec);
  if (::rename(staging.c_str(), final_dir.c_str()) == 0) return result;
  stdfs::remove_all(staging, ec);
  return Status::io("staging " + key + ": rename: " + std::strerror(errno));
}

}  // namespace

Status validate_source_path(const std::string& path) {
  if (path.empty()) return Status::bad_input("empty source path");
  if (path.find('\0') != std::string::npos || path.find('\\') != std::string::npos)
    return Status::bad_input("source path '" + path + "' contains a NUL or backslash");
  if (path.front() == '/') return Status::bad_input("source path '" + path + "' is absolute");
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == "..")
      return Status::bad_input("source path '" + path + "' has an empty, '.' or '..' component");
    start = end + 1;
  }
  return {};
}

Result<std::string> build_key(const BuildRequest& request, const BuilderConfig& config) {
  KDA_ASSIGN_OR_RETURN(Plan plan, make_plan(request, config));
  return compute_key(request, plan);
}

namespace {

Result<BuildResult> build_compiled(const BuildRequest& req, const BuilderConfig& cfg);

}  // namespace

Result<BuildResult> build_solution(const BuildRequest& req, const BuilderConfig& cfg) {
  if (req.language == "python" || req.language == "triton")
    return stage_python(req, cfg.cache_root.empty() ? fs::user_cache_dir("KDA_CACHE_DIR") / "build" : cfg.cache_root);
  return build_compiled(req, cfg);
}

namespace {

// A cpp or cuda solution: compiled and linked into the content-addressed cache.
Result<BuildResult> build_compiled(const BuildRequest& req, const BuilderConfig& cfg) {
  // Phase 1: what would be built, and its key.
  KDA_ASSIGN_OR_RETURN(Plan plan, make_plan(req, cfg));
  const std::string key = compute_key(req, plan);
  const stdfs::path root = cfg.cache_root.empty() ? fs::user_cache_dir("KDA_CACHE_DIR") / "build" : cfg.cache_root;

  // Phase 2: a valid cached entry wins.
  if (auto hit = load_entry(root / key, key)) {
    hit->cache_hit = true;
    hit->compilers = plan.versions;
    return *hit;
  }

  // Phase 3: write the sources into a fresh staging directory under the cache root.
  sweep_abandoned(root);
  KDA_ASSIGN_OR_RETURN(stdfs::path staging, fs::make_temp_dir(root, "tmp"));
  struct Cleanup {
    stdfs::path dir;
    bool keep = false;
    ~Cleanup() {
      std::error_code ec;
      if (!keep) stdfs::remove_all(dir, ec);
    }
  } cleanup{staging};
  KDA_RETURN_IF_ERROR(stage_sources(req, staging));

  // Compilers read only the toolchain, system trees, allowed include dirs and the staging dir.
  std::string log;  // starts with the sandbox's note
  const std::function<int()> pre_exec = compiler_pre_exec(cfg, plan, staging, &log);

  // Phase 4: compile each translation unit (own dependency file), then link.
  std::vector<std::string> env = proc::current_environment();
  std::erase_if(env, [](const std::string& e) { return e.rfind("LC_ALL=", 0) == 0; });
  env.push_back("LC_ALL=C");  // ptxas and compiler messages in the language the parser expects
  std::erase_if(env, [](const std::string& e) { return e.rfind("TMPDIR=", 0) == 0; });
  env.push_back("TMPDIR=" + (staging / "tmp").string());  // compilers' scratch stays in the staging dir
  BuildResult result;
  result.key = key;
  result.compilers = plan.versions;
  std::string ptxas_text;
  auto t0 = std::chrono::steady_clock::now();
  auto run_step = [&](std::vector<std::string> argv, const char* failure) -> Result<bool> {
    log += command_line(argv);
    proc::RunOptions o;
    o.argv = std::move(argv);
    o.cwd = staging;
    o.env = env;
    o.timeout_seconds = cfg.compile_timeout_seconds;
    o.output_cap = cfg.log_cap;
    o.pre_exec = pre_exec;
    KDA_ASSIGN_OR_RETURN(proc::RunResult r, proc::run(o));
    log += r.stdout_text;
    log += r.stderr_text;
    ptxas_text += r.stderr_text;
    ptxas_text += r.stdout_text;
    if (r.exit.success()) return true;
    result.status = r.exit.timed_out ? std::string("compiler timed out") : std::string(failure);
    if (!r.exit.timed_out) log += "[" + r.exit.describe() + "]\n";
    return false;
  };
  std::vector<std::string> objects;
  std::vector<std::string> depfiles;
  for (size_t i = 0; i < req.sources.size(); ++i) {
    const auto& s = req.sources[i];
    if (!is_translation_unit(s.path)) continue;
    std::string obj = "obj/" + std::to_string(i) + ".o";
    std::string dep = "obj/" + std::to_string(i) + ".d";
    std::vector<std::string> argv = {plan.compiler};
    argv.insert(argv.end(), plan.compile_flags.begin(), plan.compile_flags.end());
    argv.insert(argv.end(), {"-MD", "-MF", dep, "-c", "src/" + s.path, "-o", obj});
    KDA_ASSIGN_OR_RETURN(bool ok, run_step(std::move(argv), "compile error"));
    if (!ok) {
      result.log = capped(log, cfg.log_cap);
      return result;
    }
    objects.push_back(obj);
    depfiles.push_back(dep);
  }
  std::vector<std::string> link = {plan.compiler};
  link.insert(link.end(), plan.link_flags.begin(), plan.link_flags.end());
  link.insert(link.end(), objects.begin(), objects.end());
  link.insert(link.end(), {"-o", "lib.so"});
  KDA_ASSIGN_OR_RETURN(bool linked, run_step(std::move(link), "link error"));
  result.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  result.log = capped(log, cfg.log_cap);
  if (!linked) return result;
  if (plan.language == Language::kCuda) result.resources = parse_ptxas_log(ptxas_text);

  // Phase 5: the entry point must be a defined, exported symbol (what dlsym will find).
  auto elf = elf::read_elf_file(staging / "lib.so");
  if (!elf.ok()) {
    result.status = "unreadable library: " + elf.status().message();
    return result;
  }
  if (auto why = entry_export(*elf, req, &result.entry_export)) {
    result.status = *why;
    return result;
  }

  // Phase 6: record the headers the compile read (outside the staging dir) with their hashes.
  std::string outside;
  KDA_ASSIGN_OR_RETURN(json headers, included_headers(depfiles, staging, plan.include_roots, &outside));
  if (!outside.empty()) {
    result.status = "source includes a file outside the allowed include directories: " + outside;
    return result;
  }
  KDA_ASSIGN_OR_RETURN(std::string lib_hash, sha256_file_hex(staging / "lib.so"));
  const json meta = cache_meta(req, plan, key, result, headers, lib_hash);
  std::error_code ec;
  stdfs::remove_all(staging / "obj", ec);
  stdfs::remove_all(staging / "tmp", ec);
  KDA_RETURN_IF_ERROR(fs::write_file_atomic(staging / "build.log", result.log));
  KDA_RETURN_IF_ERROR(fs::write_file_atomic(staging / "meta.json", meta.dump(2)));

  // Phase 7: publish atomically.
  result.ok = true;
  result.status = "ok";
  cleanup.keep = true;  // publish() owns the staging dir from here
  return publish(root, key, staging, std::move(result));
}

}  // namespace

std::vector<std::string> error_lines(const std::string& log, size_t max_lines) {
  static const std::regex kError(
      R"((^|[:)\] ])(fatal )?error( #?[A-Za-z]*[0-9][A-Za-z0-9-]*)?:|undefined reference|multiple definition|ptxas (fatal|error))",
      std::regex::icase);
  std::vector<std::string> lines, errors;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    if (line.rfind("src/", 0) == 0) line.erase(0, 4);  // the staging directory's prefix of the solution's files
    for (size_t p; (p = line.find(" src/")) != std::string::npos;) line.erase(p + 1, 4);
    if (line.size() > 240) line = line.substr(0, 237) + "...";
    if (std::regex_search(line, kError) && errors.size() < max_lines) errors.push_back(line);
    lines.push_back(std::move(line));
  }
  if (!errors.empty()) return errors;
  const size_t from = lines.size() > max_lines ? lines.size() - max_lines : 0;
  return {lines.begin() + static_cast<std::ptrdiff_t>(from), lines.end()};
}

}  // namespace kda::build
