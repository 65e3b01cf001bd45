// The evaluator <-> runner protocol: frames (proc/frame.h) whose payload is one JSON object.
//
//   runner -> evaluator  kHello   Hello {"pid", "backend", "capabilities"}
//   evaluator -> runner  kLoad    LoadRequest {"library", "symbol", "sandbox", "reload_root"}
//                                  (symbol "__tvm_ffi_<name>": the tvm-ffi packed convention)
//                                                                -> kReply {"sandbox", "environment"}
//                        kLoad    {"library", "symbol", "reload": true}  (a further library from under the
//                                  first load's reload_root: screening)               -> kReply {"loads"}
//   evaluator -> runner  kLayout  ArenaLayout JSON (the arena memfd is the runner's fd 5) -> kReply
//   evaluator -> runner  kCall    CallRequest {"seq", "flush", "upload", "upload_from", "download",
//                                  "download_outputs", "timed", "profile_range", "defer_records", "poison"}
//                                  -> CallReply {"ok", "rc", "error", "elapsed_ns", "extra", "seq"}
//   evaluator -> runner  kPrepare PrepareRequest {"inputs": [{"random", "seed", "stream", "fingerprint_seed"}...],
//                                  "digest_key"}  (runners with the "device_inputs" capability)
//                                  -> PrepareReply {"ok", "error", "digests", "elapsed_ns"}
//   evaluator -> runner  kCollect {}  (runners with the "deferred_records" capability: the CUPTI
//                                  summaries of the timed calls made with "defer_records")
//                                          -> CollectReply {"ok", "error", "calls": [{"seq", "cupti_span_ns", ...}]}
//   evaluator -> runner  kQuit    {}
//   runner -> evaluator  kReply   {"ok", "error", ...}: the reply to each command (above)
//
// Seeds travel only here: never through argv or the environment. The structs below are these
// messages; their to_json / from_json are the one serialiser both sides use.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/status.h"

namespace kda::eval {

enum class MsgType : uint32_t {
  kHello = 1,
  kLoad = 2,
  kLayout = 3,
  kCall = 4,
  kQuit = 5,
  kReply = 6,
  kPrepare = 7,
  kCollect = 8
};

// Child fd numbers the evaluator gives every runner.
inline constexpr int kRunnerCommandFd = 3;  // evaluator -> runner
inline constexpr int kRunnerReplyFd = 4;    // runner -> evaluator
inline constexpr int kRunnerArenaFd = 5;    // the shared arena memfd
// How a runner's error begins when its own guard refused what the candidate did (a Python
// solution's audit hook: runner/kda_python.py), followed by "<category>: <what>"; the evaluator
// gives such a load or call the sandbox verdict with reason "sandbox_refused:<category>".
inline constexpr const char* kSandboxRefused = "sandbox refused ";

// The messages as types: each has one serialiser (to_json) and one reader (from_json) that the
// evaluator, the tool runs and kda-runner all use; a reader refuses a field of the wrong type
// (kBadInput, naming it) and gives an absent one its default. The Python runner of the torch oracle
// (runner/torch_oracle.py) reads the same JSON.

// kLoad: the first library of a runner (with the sandbox and, for screening, the root further
// libraries must come from), or with `reload` a further one from under that root.
struct LoadRequest {
  std::string library;
  std::string symbol;  // "__tvm_ffi_<name>": the tvm-ffi packed convention
  // A Python solution: `library` is its entry file (*.py) and `symbol` the function; true when the
  // function returns the outputs (destination_passing_style false) instead of writing them.
  bool returns_outputs = false;
  bool sandbox = false;
  // A JIT-compiling Python solution (language triton): the directory its compiler's cache and
  // temporary files go to, the one place its sandbox may write; its compilers may run.
  std::optional<std::string> jit_dir;
  // binding "torch": `library` is a Python extension module of this name (PyInit_<name>), imported
  // by the runner's interpreter; `symbol` is its attribute to call.
  std::optional<std::string> python_module;
  std::optional<std::string> reload_root;
  bool reload = false;

  nlohmann::json to_json() const;
  static Result<LoadRequest> from_json(const nlohmann::json& j);
};

// kCall: one call of the loaded entry point.
struct CallRequest {
  uint64_t seq = 0;
  bool flush = true;             // flush caches (host LLC / GPU L2) before the call
  bool upload = true;            // cuda: copy the arena to the device mirror before the call...
  uint64_t upload_from = 0;      // ...from this byte offset on (outputs only: skip unchanged inputs)
  bool download = true;          // cuda: copy the device mirror back to the arena after the call
  bool download_outputs = true;  // cuda, device-side inputs: false copies back only input guards and digests
  bool timed = false;            // record timing (events + CUPTI span on cuda, monotonic clock on host)
  bool profile_range = false;    // cuda: bracket the call with cudaProfilerStart/Stop (ncu --profile-from-start off)
  // cuda, timed: keep the call's window and summarise its CUPTI records at the next collect_records()
  // instead of flushing CUPTI now (a forced flush per call cost 0.1-0.4 ms, and the next activity
  // after it another 0.1-0.7 ms while CUPTI set up a new buffer: bench/results/h200, run 17).
  bool defer_records = false;
  // Device-side inputs only: (output index, seed) pairs to poison on the device before the call
  // (eval::poison_block tiled over the slot), instead of uploading host-poisoned outputs.
  std::vector<std::pair<uint32_t, uint64_t>> poison;
  // cuda, the deployment contract (docs/integrity-gates.md "CUDA graph contract"): kCapture records the
  // call into a CUDA graph on the harness stream (global capture mode: a synchronisation, a legacy-stream
  // copy or an allocation anywhere breaks it), instantiates and launches it; kReplay launches that graph
  // instead of calling the entry point (the inputs uploaded into the same buffers). The host backend
  // refuses both.
  enum class Graph { kNone, kCapture, kReplay };
  Graph graph = Graph::kNone;

  nlohmann::json to_json() const;
  static Result<CallRequest> from_json(const nlohmann::json& j);
};

// The reply to kCall.
struct CallReply {
  bool ok = false;    // the solution returned 0 and no runtime error occurred
  int rc = 0;         // the entry point's return value
  std::string error;  // CUDA error or other runtime failure
  int64_t elapsed_ns = 0;
  nlohmann::json extra = nlohmann::json::object();  // cupti span, kernel names, flush info...
  uint64_t seq = 0;                                 // the request's

  nlohmann::json to_json() const;
  static Result<CallReply> from_json(const nlohmann::json& j);
};

// kPrepare (device-side inputs, a runner with the "device_inputs" capability): the evaluator writes
// only the inputs it cannot describe by a seed (blobs, scalars, structured ones) and every guard band
// into the arena; the runner copies those, generates the plain random inputs itself and answers with
// a keyed digest of every input slot. Until the next layout, uploads never overwrite inputs,
// downloads bring back only outputs and guard bands, and every download adds the inputs' digests to
// the reply.
struct PrepareInput {
  bool random = false;  // false: copy the slot (and its guards) from the arena
  uint64_t seed = 0, stream = 0;
  std::optional<uint64_t> fingerprint_seed;  // eval::copy_fingerprint's positions come from this seed
};

struct PrepareRequest {
  std::vector<PrepareInput> inputs;  // one per input slot, in layout order
  uint64_t digest_key = 0;

  nlohmann::json to_json() const;
  static Result<PrepareRequest> from_json(const nlohmann::json& j);
};

struct PrepareReply {
  bool ok = false;
  std::string error;
  std::vector<std::array<uint64_t, 2>> digests;  // per input slot
  int64_t elapsed_ns = 0;                        // copy + generation + digests

  nlohmann::json to_json() const;
  static Result<PrepareReply> from_json(const nlohmann::json& j);
};

// kHello: the runner's first frame, before any command.
struct Hello {
  int64_t pid = 0;
  std::string backend;                    // "host", "cuda", "torch-cuda", ...
  std::vector<std::string> capabilities;  // "device_inputs", "deferred_records", "reload", ...

  nlohmann::json to_json() const;
  static Result<Hello> from_json(const nlohmann::json& j);
};

// The reply to kCollect: the CUPTI summaries of the timed calls made with "defer_records", one object
// per call (its "seq", "cupti_span_ns", "kernels", ...: the runner backend's own record).
struct CollectReply {
  bool ok = false;
  std::string error;
  std::vector<nlohmann::json> calls;

  nlohmann::json to_json() const;
  static Result<CollectReply> from_json(const nlohmann::json& j);
};

}  // namespace kda::eval
