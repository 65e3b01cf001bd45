// The evaluator <-> runner protocol: frames (proc/frame.h) whose payload is one JSON object.
//
//   runner -> evaluator  kHello   {"pid", "backend", "device", "capabilities"}
//   evaluator -> runner  kLoad    {"library", "symbol", "sandbox", "reload_root"}
//                                  (symbol "__tvm_ffi_<name>": the tvm-ffi packed convention)
//                                                                -> kReply {"sandbox", "environment"}
//                        kLoad    {"library", "symbol", "reload": true}  (a further library from under the
//                                  first load's reload_root: screening)               -> kReply {"loads"}
//   evaluator -> runner  kLayout  ArenaLayout JSON (the arena memfd is the runner's fd 5) -> kReply
//   evaluator -> runner  kCall    {"seq", "flush", "upload", "download", "download_outputs", "poison", "timed",
//                                  "guard_seed", "profile_range"}                     -> kReply
//   evaluator -> runner  kPrepare {"inputs": [{"random", "seed", "stream", "fingerprint_seed"}...],
//                                  "digest_key"}  (runners with the "device_inputs" capability)
//                                                                        -> kReply {"digests"}
//   evaluator -> runner  kCollect {}  (runners with the "deferred_records" capability: the CUPTI
//                                  summaries of the timed calls made with "defer_records")
//                                                     -> kReply {"calls": [{"seq", "cupti_span_ns", ...}]}
//   evaluator -> runner  kQuit    {}
//   runner -> evaluator  kReply   {"ok", "error", "rc", "elapsed_ns", "cupti": {...}, ...}
//
// Seeds travel only here: never through argv or the environment.
#pragma once

#include <cstdint>

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

}  // namespace kda::eval
