// kda-runner: executes one solution library for the evaluator. It receives everything secret
// (seeds, layouts, call plans) over its command pipe (fd 3), answers on fd 4 and maps the
// evaluator's arena (fd 5). As a candidate runner it sandboxes itself before dlopen, so the
// candidate's static constructors already run confined.
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>

#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "eval/arena.h"
#include "eval/protocol.h"
#include "proc/frame.h"
#include "runner/backend.h"
#include "sandbox/landlock.h"
#include "sandbox/seccomp.h"
#include "util/fs.h"

namespace {

using kda::Status;
using kda::eval::MsgType;
using nlohmann::json;

Status reply(const json& j) {
  return kda::proc::write_frame(kda::eval::kRunnerReplyFd, static_cast<uint32_t>(MsgType::kReply), j.dump());
}

json error_reply(const std::string& msg) { return {{"ok", false}, {"error", msg}}; }

// Read-only paths a dlopen'ed solution needs: its own directory (or, for a runner that loads
// several, the directory they all come from) and the system libraries.
// A Python solution's runner also reads the interpreter's directories (Backend::python_read_paths).
// A JIT-compiling solution's runner (`jit_dir` set) also writes that directory and runs its
// compilers: the programs python_exec_paths() names and what a C compiler reads and runs.
kda::sandbox::LandlockPolicy candidate_policy(const std::filesystem::path& library_dir, const kda::runner::Backend& b,
                                              const std::filesystem::path& jit_dir) {
  kda::sandbox::LandlockPolicy p;
  p.read_only = {library_dir,  "/usr/lib",           "/usr/lib64",       "/lib",
                 "/lib64",     "/usr/local/cuda",    "/etc/ld.so.cache", "/sys/devices/system/cpu",
                 "/proc/self", "/proc/driver/nvidia"};
  for (const auto& dir : b.python_read_paths()) p.read_only.push_back(dir);
  if (!jit_dir.empty()) {
    p.read_write.push_back(jit_dir);
    for (const auto& tool : b.python_exec_paths()) p.read_only.push_back(tool);
    for (const char* dir : {"/usr/include", "/usr/libexec", "/usr/local/include"}) p.read_only.emplace_back(dir);
  }
  p.devices = b.sandbox_devices();
  if (!p.devices.empty()) p.devices.push_back("/dev/null");
  return p;
}

// What the first load allowed later ones (screening: {"reload_root"} at the first, {"reload": true}
// after it). A runner without a reload root loads exactly one library.
struct Loads {
  int count = 0;
  std::filesystem::path root;
};

// `p` is `root` or beneath it once both are resolved (symlinks, "..").
bool under(const std::filesystem::path& p, const std::filesystem::path& root) {
  std::error_code ec;
  const auto a = std::filesystem::weakly_canonical(p, ec);
  if (ec) return false;
  const auto b = std::filesystem::weakly_canonical(root, ec);
  return !ec && kda::fs::is_within(a, b);
}

Status handle_load(const json& msg, kda::runner::Backend& backend, Loads& loads, json& out) {
  KDA_ASSIGN_OR_RETURN(kda::eval::LoadRequest req, kda::eval::LoadRequest::from_json(msg));
  const std::filesystem::path library = req.library;
  if (loads.count > 0) {
    if (!req.reload || loads.root.empty())
      return kda::Status::failed("a library is already loaded (a runner loads one unless started with a reload root)");
    if (!under(library, loads.root))
      return kda::Status::failed("reload: " + library.string() + " is not under the reload root " +
                                 loads.root.string());
    if (library.extension() == ".py" || req.python_module)
      return kda::Status::failed("reload: a Python solution is loaded by a runner of its own");
    KDA_RETURN_IF_ERROR(backend.load(library, req.symbol));
    ++loads.count;
    out["loads"] = loads.count;
    return {};
  }
  if (req.reload_root) {
    loads.root = *req.reload_root;
    if (!under(library, loads.root))
      return kda::Status::failed(library.string() + " is not under the reload root " + loads.root.string());
  }
  KDA_RETURN_IF_ERROR(backend.init());
  out["environment"] = backend.environment();  // read before the sandbox hides /proc files
  // The interpreter and its array library are imported before the sandbox; the solution after it.
  const std::filesystem::path jit_dir = req.jit_dir.value_or("");
  const std::string module = req.python_module.value_or("");
  const bool python = library.extension() == ".py" || !module.empty();  // a torch extension is imported too
  if (!jit_dir.empty() && library.extension() != ".py")
    return kda::Status::failed("a JIT directory is for a Python solution only");
  if (!jit_dir.empty()) KDA_RETURN_IF_ERROR(kda::fs::ensure_dir(jit_dir));
  if (python) KDA_RETURN_IF_ERROR(backend.start_python(jit_dir));
  json sandbox = json::object();
  if (req.sandbox) {
    auto ll = kda::sandbox::apply_landlock(
        candidate_policy(loads.root.empty() ? library.parent_path() : loads.root, backend, jit_dir));
    if (!ll.ok()) return ll.status().with_context("sandbox");
    sandbox["landlock_abi"] = ll->abi;
    sandbox["network"] = ll->network;
    sandbox["scoped"] = ll->scoped;
    if (kda::sandbox::seccomp_available()) {
      KDA_RETURN_IF_ERROR(kda::sandbox::apply_seccomp({.allow_threads = true, .allow_processes = !jit_dir.empty()}));
      sandbox["seccomp"] = true;
    }
    if (!jit_dir.empty()) {
      json tools = json::array();
      for (const auto& t : backend.python_exec_paths()) tools.push_back(t.string());
      sandbox["jit"] = {{"dir", jit_dir.string()}, {"programs", tools}};
    }
  }
  KDA_RETURN_IF_ERROR(backend.load(library, req.symbol, req.returns_outputs, module));
  loads.count = 1;
  out["sandbox"] = sandbox;
  return {};
}

int serve(kda::runner::Backend& backend) {
  kda::eval::SharedArena arena;
  kda::eval::ArenaLayout layout;
  Loads loads;
  for (;;) {
    auto frame = kda::proc::read_frame(kda::eval::kRunnerCommandFd);
    if (!frame.ok()) {
      backend.release_layout();  // before the arena is unmapped
      return frame.error == kda::proc::FrameError::kEof ? 0 : 3;
    }
    json msg = json::parse(frame.frame->payload, nullptr, false);
    if (msg.is_discarded()) {
      (void)reply(error_reply("malformed command"));
      return 3;
    }
    json out{{"ok", true}};
    try {
      switch (static_cast<MsgType>(frame.frame->type)) {
        case MsgType::kLoad: {
          Status st = handle_load(msg, backend, loads, out);
          if (!st.ok()) out = error_reply(st.message());
          break;
        }
        case MsgType::kLayout: {
          auto l = kda::eval::ArenaLayout::from_json(msg);
          if (!l.ok()) {
            out = error_reply(l.status().message());
            break;
          }
          layout = std::move(*l);
          // The evaluator's memfd only grows; the whole of it is mapped, and the mapping (with what a
          // backend holds on it) is kept while its size stays the same.
          struct stat file {};
          if (::fstat(kda::eval::kRunnerArenaFd, &file) != 0 || static_cast<uint64_t>(file.st_size) < layout.size) {
            out = error_reply(fmt::format("layout: the arena holds {} bytes, the layout needs {}",
                                          static_cast<long long>(file.st_size), layout.size));
            break;
          }
          if (arena.size() != static_cast<uint64_t>(file.st_size)) {
            backend.release_layout();
            arena = kda::eval::SharedArena();  // unmap the previous size first
            auto a = kda::eval::SharedArena::map_fd(kda::eval::kRunnerArenaFd, static_cast<uint64_t>(file.st_size));
            if (!a.ok()) {
              out = error_reply(a.status().message());
              break;
            }
            arena = std::move(*a);
          }
          Status st = backend.set_layout(layout, arena);
          if (!st.ok()) out = error_reply(st.message());
          break;
        }
        case MsgType::kCall: {
          auto req = kda::eval::CallRequest::from_json(msg);
          if (!req.ok()) {
            out = error_reply("malformed command: " + req.status().message());
            break;
          }
          kda::eval::CallReply r = backend.call(*req);
          r.seq = req->seq;
          out = r.to_json();
          break;
        }
        case MsgType::kPrepare: {
          auto req = kda::eval::PrepareRequest::from_json(msg);
          if (!req.ok()) {
            out = error_reply("malformed command: " + req.status().message());
            break;
          }
          out = backend.prepare(*req).to_json();
          break;
        }
        case MsgType::kCollect: {
          kda::eval::CollectReply reply{.ok = true};
          for (auto& c : backend.collect_records()) reply.calls.push_back(std::move(c));
          out = reply.to_json();
          break;
        }
        case MsgType::kQuit:
          backend.release_layout();  // before the arena is unmapped
          return 0;
        default: out = error_reply("unknown command type");
      }
    } catch (const json::exception& e) {  // a field of the wrong type: the command is malformed
      out = error_reply(std::string("malformed command: ") + e.what());
    }
    if (!reply(out).ok()) return 3;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // A runner never outlives its evaluator (a killed evaluator must not leave GPU work running).
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  std::string backend_name = "host";
  bool clean_exit = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--backend") == 0 && i + 1 < argc) backend_name = argv[i + 1];
    if (std::strcmp(argv[i], "--clean-exit") == 0) clean_exit = true;
  }
  std::unique_ptr<kda::runner::Backend> backend =
      backend_name == "cuda" ? kda::runner::make_cuda_backend() : kda::runner::make_host_backend();
  if (!backend) {
    std::cerr << "kda-runner: backend '" << backend_name << "' is not available in this build\n";
    return 2;
  }
  kda::eval::Hello hello{.pid = ::getpid(), .backend = backend_name, .capabilities = backend->capabilities()};
  hello.capabilities.push_back("reload");  // further libraries from a reload root (screening)
  if (!kda::proc::write_frame(kda::eval::kRunnerReplyFd, static_cast<uint32_t>(MsgType::kHello), hello.to_json().dump())
           .ok())
    return 3;
  const int rc = serve(*backend);
  if (clean_exit) return rc;
  // No destructors and no atexit handlers: tearing down a CUDA context (and CUPTI) took longer than
  // everything else a short evaluation does after its last call, and the kernel driver reclaims the
  // device memory and context of an exiting process anyway. Nothing is buffered: replies are
  // written with write(2). (--clean-exit: a tool wrapping the runner finishes its work at exit.)
  std::cerr.flush();
  ::_exit(rc);
}
