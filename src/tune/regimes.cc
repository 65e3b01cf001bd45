#include "tune/regimes.h"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>

#include "eval/roofline.h"

namespace kda::tune {

namespace {

constexpr double kHostRidge = 10.0;

// [2^k, 2^(k+1) - 1] holding v; values below 1 get their own bucket [INT64_MIN, 0].
std::pair<int64_t, int64_t> pow2_bucket(int64_t v) {
  if (v < 1) return {INT64_MIN, 0};
  int64_t lo = 1;
  while (lo <= v / 2) lo *= 2;
  const int64_t hi = lo > INT64_MAX / 2 ? INT64_MAX : lo * 2 - 1;
  return {lo, hi};
}

std::string range_text(const std::pair<int64_t, int64_t>& r) {
  if (r.first == r.second) return std::to_string(r.first);
  auto end = [](int64_t v) {
    return v == INT64_MIN ? std::string("-inf") : v == INT64_MAX ? "inf" : std::to_string(v);
  };
  return end(r.first) + ".." + end(r.second);
}

std::string ranges_text(const std::map<std::string, std::pair<int64_t, int64_t>>& ranges) {
  std::string s;
  for (const auto& [axis, r] : ranges) s += (s.empty() ? "" : " ") + axis + "=" + range_text(r);
  return s.empty() ? "*" : s;
}

Bound merge(Bound a, Bound b) {
  if (a == b) return a;
  if (a == Bound::kUnknown) return b;
  if (b == Bound::kUnknown) return a;
  return Bound::kMixed;
}

}  // namespace

const char* bound_name(Bound b) {
  switch (b) {
    case Bound::kMemory: return "memory";
    case Bound::kCompute: return "compute";
    case Bound::kMixed: return "mixed";
    case Bound::kUnknown: break;
  }
  return "-";
}

double ridge_flops_per_byte(const task::TaskPack& pack) {
  if (pack.backend == task::Backend::kCuda) {
    const auto p = eval::h200_peaks();
    return p.flops_per_s / p.bytes_per_s;
  }
  return kHostRidge;
}

Bound workload_bound(const task::TaskPack& pack, const std::map<std::string, int64_t>& axes) {
  const auto& s = pack.settings;
  if (!s.roofline_bytes || !s.roofline_flops) return Bound::kUnknown;
  std::map<std::string, int64_t> vars = pack.definition.const_axes();
  for (const auto& [k, v] : axes) vars[k] = v;
  auto bytes = s.roofline_bytes->evaluate(vars);
  auto flops = s.roofline_flops->evaluate(vars);
  if (!bytes.ok() || !flops.ok() || *bytes <= 0) return Bound::kUnknown;
  return *flops / *bytes >= ridge_flops_per_byte(pack) ? Bound::kCompute : Bound::kMemory;
}

std::vector<Regime> group_regimes(const task::TaskPack& pack, const std::vector<const task::Workload*>& workloads,
                                  const std::vector<RegimeSpec>& specs) {
  std::vector<Regime> out;
  if (!specs.empty()) {
    for (const auto& spec : specs) out.push_back({spec.name, spec.ranges, Bound::kUnknown, {}, true, false});
    Regime other{"other", {}, Bound::kUnknown, {}, true, true};
    for (const task::Workload* w : workloads) {
      Regime* home = &other;
      for (auto& r : out) {
        bool in = true;
        for (const auto& [axis, range] : r.ranges) {
          auto it = w->axes.find(axis);
          in = in && it != w->axes.end() && it->second >= range.first && it->second <= range.second;
        }
        if (in) {
          home = &r;
          break;
        }
      }
      home->workloads.push_back(w->uuid);
      home->bound = merge(home->bound, workload_bound(pack, w->axes));
    }
    if (!other.workloads.empty()) out.push_back(std::move(other));
    out.erase(std::remove_if(out.begin(), out.end(), [](const Regime& r) { return r.workloads.empty(); }), out.end());
    return out;
  }

  // Buckets first, then split a bucket whose workloads differ in bound; a split regime routes on its
  // members' exact hull so the two halves do not overlap more than their shapes do.
  using Key = std::map<std::string, std::pair<int64_t, int64_t>>;
  std::vector<std::pair<Key, std::vector<const task::Workload*>>> buckets;
  const auto var_axes = pack.definition.var_axes();
  for (const task::Workload* w : workloads) {
    Key key;
    for (const auto& axis : var_axes) {
      auto it = w->axes.find(axis);
      if (it != w->axes.end()) key[axis] = pow2_bucket(it->second);
    }
    auto b = std::find_if(buckets.begin(), buckets.end(), [&](const auto& e) { return e.first == key; });
    if (b == buckets.end())
      buckets.push_back({key, {w}});
    else
      b->second.push_back(w);
  }
  for (const auto& [key, members] : buckets) {
    std::map<Bound, std::vector<const task::Workload*>> by_bound;
    for (const task::Workload* w : members) by_bound[workload_bound(pack, w->axes)].push_back(w);
    for (const auto& [bound, ws] : by_bound) {
      Regime r;
      r.bound = bound;
      if (by_bound.size() == 1) {
        r.ranges = key;
      } else {
        for (const task::Workload* w : ws)
          for (const auto& [axis, v] : w->axes) {
            auto it = r.ranges.find(axis);
            if (it == r.ranges.end())
              r.ranges[axis] = {v, v};
            else
              it->second = {std::min(it->second.first, v), std::max(it->second.second, v)};
          }
      }
      for (const task::Workload* w : ws) r.workloads.push_back(w->uuid);
      r.name = ranges_text(r.ranges) + (bound == Bound::kUnknown ? "" : std::string("/") + bound_name(bound));
      out.push_back(std::move(r));
    }
  }
  return out;
}

std::string regimes_table(const std::vector<Regime>& regimes) {
  size_t w = 6;
  for (const auto& r : regimes) w = std::max(w, r.name.size());
  std::string s = fmt::format("{:<{}}  {:<40}  {:<7}  {}\n", "regime", w, "routes on", "bound", "workloads");
  for (const auto& r : regimes)
    s += fmt::format("{:<{}}  {:<40}  {:<7}  {}\n", r.name, w, r.fallback_only ? "(fallback)" : ranges_text(r.ranges),
                     bound_name(r.bound), r.workloads.size());
  return s;
}

}  // namespace kda::tune
