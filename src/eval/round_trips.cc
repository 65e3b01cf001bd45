// Host round trips inside timed CUDA calls (round_trips.h).
#include "eval/round_trips.h"

#include <fmt/format.h>

namespace kda::eval {

using json = nlohmann::json;

void HostRoundTrips::add(const json& extra) {
  ++of_calls;
  bool any = false;
  if (const auto it = extra.find("host_waits"); it != extra.end() && it->is_object())
    for (const auto& [api, n] : it->items())
      if (n.is_number_integer() && n.get<int64_t>() > 0) {
        host_waits[api] += n.get<int64_t>();
        any = true;
      }
  if (const auto it = extra.find("copies"); it != extra.end() && it->is_object())
    for (const auto& [what, c] : it->items())
      if (what.ends_with(" pageable") && c.is_object() && c.value("count", int64_t{0}) > 0) {
        auto& [count, bytes] = pageable_copies[what];
        count += c.value("count", int64_t{0});
        bytes += c.value("bytes", int64_t{0});
        any = true;
      }
  if (any) ++calls;
}

json HostRoundTrips::to_json() const {
  json copies = json::object();
  for (const auto& [what, cb] : pageable_copies) copies[what] = {{"count", cb.first}, {"bytes", cb.second}};
  return {{"calls", calls}, {"of_calls", of_calls}, {"host_waits", host_waits}, {"pageable_copies", copies}};
}

std::string describe_round_trips(const json& rt) {
  if (!rt.is_object() || rt.value("calls", 0) == 0) return {};
  std::string what;
  const json waits = rt.value("host_waits", json::object()), copies = rt.value("pageable_copies", json::object());
  for (const auto& [api, n] : waits.items())
    what += fmt::format("{}{} x{}", what.empty() ? "" : ", ", api, n.get<int64_t>());
  for (const auto& [dir, c] : copies.items())
    what += fmt::format("{}{} copy x{} ({} B)", what.empty() ? "" : ", ", dir, c.value("count", int64_t{0}),
                        c.value("bytes", int64_t{0}));
  return fmt::format("{} of {} timed calls waited on the host or copied through pageable memory (CUPTI): {}",
                     rt.value("calls", 0), rt.value("of_calls", 0), what);
}

}  // namespace kda::eval
