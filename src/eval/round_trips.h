// Host round trips inside a candidate's timed CUDA calls, from the runner's CUPTI summary of each call
// (runner/cuda_backend.cc: host_waits by API, copies by direction and host memory): the host waits the
// entry point made (cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize) and its copies
// through pageable host memory. The CUDA graph contract reads them (eval/session_workload.cc): a call
// that makes them only when no capture is under way captures cleanly, and still stalls every plain call.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

namespace kda::eval {

struct HostRoundTrips {
  std::map<std::string, int64_t> host_waits;                           // API -> waits
  std::map<std::string, std::pair<int64_t, int64_t>> pageable_copies;  // "DtoH pageable" -> copies, bytes
  int calls = 0;                                                       // calls with any of them
  int of_calls = 0;                                                    // calls seen

  // Adds one timed call's summary (its CallReply extra).
  void add(const nlohmann::json& extra);
  // {"calls", "of_calls", "host_waits": {api: n}, "pageable_copies": {dir: {"count", "bytes"}}}: the
  // trace's kda.host_round_trips.
  nlohmann::json to_json() const;
};

// kda.host_round_trips in words ("3 of 40 timed calls waited on the host ...: cudaDeviceSynchronize
// x3, DtoH pageable copy x3 (6 B)"); empty where no call made one.
std::string describe_round_trips(const nlohmann::json& host_round_trips);

}  // namespace kda::eval
