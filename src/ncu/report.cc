#include "ncu/report.h"

#include <cmath>

#include <fmt/format.h>

namespace kda::ncu {

std::string_view message_type_name(MessageType t) {
  switch (t) {
    case MessageType::kWarning: return "WRN";
    case MessageType::kError: return "ERR";
    case MessageType::kOptimization: return "OPT";
    case MessageType::kInfo: return "INF";
    case MessageType::kNone: break;
  }
  return "";
}

MessageType message_type_from_name(std::string_view name) {
  if (name == "OPT") return MessageType::kOptimization;
  if (name == "WRN") return MessageType::kWarning;
  if (name == "ERR") return MessageType::kError;
  if (name == "INF" || name == "OK") return MessageType::kInfo;
  return MessageType::kNone;
}

const Metric* KernelResult::find(std::string_view metric_name) const {
  auto it = index_.find(std::string(metric_name));
  return it == index_.end() ? nullptr : &metrics[it->second];
}

std::optional<double> KernelResult::number(std::string_view metric_name) const {
  const Metric* m = find(metric_name);
  return m ? m->value.as_number() : std::nullopt;
}

void KernelResult::reindex() {
  index_.clear();
  index_.reserve(metrics.size());
  for (size_t i = 0; i < metrics.size(); ++i) index_.emplace(metrics[i].name, i);
}

namespace {

// Inserts ',' every three digits of the integer part of a plain decimal string.
std::string group_thousands(const std::string& s) {
  size_t start = (!s.empty() && s[0] == '-') ? 1 : 0;
  size_t dot = s.find('.');
  size_t int_end = dot == std::string::npos ? s.size() : dot;
  std::string out = s.substr(0, start);
  for (size_t i = start; i < int_end; ++i) {
    out += s[i];
    size_t left = int_end - i - 1;
    if (left > 0 && left % 3 == 0) out += ',';
  }
  out += s.substr(int_end);
  return out;
}

}  // namespace

std::string format_base(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kNone: return "";
    case Value::Kind::kString: return v.text;
    case Value::Kind::kUint32:
    case Value::Kind::kUint64: return group_thousands(std::to_string(v.integer));
    case Value::Kind::kFloat:
    case Value::Kind::kDouble: break;
  }
  double d = v.number;
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == std::trunc(d) && std::fabs(d) < 1e18) return group_thousands(fmt::format("{:.0f}", d));
  return group_thousands(fmt::format("{:.2f}", d));
}

}  // namespace kda::ncu
