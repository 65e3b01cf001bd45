// Units of metrics. A .ncu-rep stores no units (ncu takes them from its metric database), so the
// native reader infers a base unit from the metric name's conventions (".pct" -> "%", "bytes" ->
// "byte", "...per_second" -> "/s", ...). On the fixtures this agrees with ncu's own base-units
// CSV export for 2078 of 2227 metrics (93.3%); the rest get "" or a close variant. CSV readers
// keep the unit ncu printed and convert auto-scaled units back to base units (unit_scale).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kda::ncu {

std::string infer_unit(std::string_view metric_name);

// Auto-scaled unit -> (base unit, factor such that base_value = printed_value * factor).
// Returns nullopt for units that are already base units or unknown.
struct UnitScale {
  std::string base_unit;
  double factor = 1;
};
std::optional<UnitScale> unit_scale(std::string_view unit);

}  // namespace kda::ncu
