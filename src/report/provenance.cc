#include "report/provenance.h"

#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <regex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "report/sources.h"
#include "util/strings.h"

namespace kda::report {

namespace {

using nlohmann::json;

std::string unescape(std::string s) {
  static const std::pair<const char*, const char*> kEntities[] = {
      {"&quot;", "\""}, {"&#39;", "'"}, {"&lt;", "<"}, {"&gt;", ">"}, {"&amp;", "&"}};
  for (const auto& [from, to] : kEntities)
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + 1))
      s.replace(at, std::strlen(from), to);
  return s;
}

std::optional<std::string> attr(const std::string& tag, const std::string& name) {
  const std::regex re("\\s" + name + "=\"([^\"]*)\"");
  std::smatch m;
  if (!std::regex_search(tag, m, re)) return std::nullopt;
  return unescape(m[1].str());
}

// The value at one source ("file[:line]#pointer"), or why there is none.
std::optional<double> resolve(Files& files, const std::string& src, std::string& why) {
  const size_t hash = src.find('#');
  if (hash == std::string::npos) return why = "no '#' in the source", std::nullopt;
  std::string file = src.substr(0, hash);
  int line = 0;
  if (const size_t colon = file.rfind(':'); colon != std::string::npos) {
    line = std::atoi(file.c_str() + colon + 1);
    file.resize(colon);
  }
  const std::string pointer = src.substr(hash + 1);
  if (line > 0) {
    auto lines = files.lines(file);
    if (!lines.ok()) return why = lines.status().message(), std::nullopt;
    if (static_cast<size_t>(line) > (*lines)->size()) return why = "no line " + std::to_string(line), std::nullopt;
    auto v = number_at((**lines)[line - 1], pointer);
    if (!v) why = "no number at " + pointer;
    return v;
  }
  auto j = files.json_file(file);
  if (!j.ok()) return why = j.status().message(), std::nullopt;
  auto v = number_at(**j, pointer);
  if (!v) why = "no number at " + pointer;
  return v;
}

bool close(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max({1e-300, std::abs(a), std::abs(b)}); }

// Whether `text` reads as `value` at its shown precision ("2.19 us" for 0.002187 ms, "41 %" for
// 0.4103, "1.234x"); text without a number is not checked.
bool text_matches(const std::string& text, double value) {
  static const std::regex re(R"(([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(us|ms|%|x|s|min|h|USD)?)");
  std::smatch m;
  if (!std::regex_search(text, m, re)) return true;
  const std::string digits = m[1].str(), unit = m[2].str();
  const double shown = std::stod(digits);
  const double scale = unit == "us" ? 1e-3 : unit == "%" ? 1e-2 : 1;
  std::string mantissa = digits;
  int exponent = 0;
  if (const size_t e = digits.find_first_of("eE"); e != std::string::npos) {
    exponent = std::stoi(digits.substr(e + 1));
    mantissa = digits.substr(0, e);
  }
  const size_t dot = mantissa.find('.');
  const int decimals = dot == std::string::npos ? 0 : static_cast<int>(mantissa.size() - dot - 1);
  // Half a unit of the last digit shown.
  const double half_ulp = 0.5 * std::pow(10.0, exponent - decimals) * scale;
  return std::abs(shown * scale - value) <= half_ulp * 1.0001 + 1e-15 * std::abs(value);
}

}  // namespace

ProvenanceCheck check_provenance(const std::string& html, const std::filesystem::path& root) {
  ProvenanceCheck out;
  Files files(root);
  static const std::regex tag_re(R"(<([a-zA-Z]+)\s[^>]*data-src="[^"]*"[^>]*>)");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), tag_re); it != std::sregex_iterator(); ++it) {
    const std::string tag = (*it)[0].str(), name = (*it)[1].str();
    ++out.checked;
    const std::string srcs_text = attr(tag, "data-src").value_or("");
    auto value_text = name == "data" ? attr(tag, "value") : attr(tag, "data-value");
    if (!value_text) {
      out.problems.push_back(srcs_text + ": no value attribute");
      continue;
    }
    const double value = std::stod(*value_text);
    const std::vector<std::string> srcs = util::split_list(srcs_text, ' ');
    std::vector<double> got;
    std::string why;
    for (const auto& s : srcs) {
      auto v = resolve(files, s, why);
      if (!v) {
        out.problems.push_back(fmt::format("{}: {}", s, why));
        break;
      }
      got.push_back(*v);
    }
    if (got.size() != srcs.size() || got.empty()) continue;
    const bool is_ratio = attr(tag, "data-op").value_or("") == "ratio";
    if (is_ratio && got.size() != 2) {
      out.problems.push_back(srcs_text + ": a ratio needs two sources");
      continue;
    }
    const double expected = is_ratio ? got[0] / got[1] : got[0];
    if (!close(value, expected)) {
      out.problems.push_back(fmt::format("{}: the page says {:.17g}, the file {:.17g}", srcs_text, value, expected));
      continue;
    }
    if (name == "data") {
      const size_t end = html.find("</data>", (*it).position(0) + tag.size());
      const std::string text = html.substr((*it).position(0) + tag.size(), end - (*it).position(0) - tag.size());
      if (end == std::string::npos || !text_matches(unescape(text), value))
        out.problems.push_back(fmt::format("{}: shown as \"{}\", the value is {:.17g}", srcs_text, text, value));
    }
  }
  return out;
}

}  // namespace kda::report
