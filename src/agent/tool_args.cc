#include "agent/tool_args.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "util/strings.h"

namespace kda::agent {

using json = nlohmann::json;

namespace {

// "an integer", "an integer of at least 1", "an integer from 1 to 20".
std::string integer_wording(const ArgSpec& s) {
  if (s.min && s.max) return fmt::format("an integer from {} to {}", *s.min, *s.max);
  if (s.min) return fmt::format("an integer of at least {}", *s.min);
  if (s.max) return fmt::format("an integer of at most {}", *s.max);
  return "an integer";
}

// An integer, or an integral float within ±1e15 (what a model writing 3.0 for 3 means).
std::optional<long long> as_integer(const json& v) {
  if (v.is_number_integer()) return v.get<long long>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::abs(d) <= 1e15 && d == std::floor(d)) return static_cast<long long>(d);
  }
  return std::nullopt;
}

json property(const ArgSpec& s) {
  json p;
  switch (s.type) {
    case ArgType::kString:
      p["type"] = "string";
      if (!s.one_of.empty()) p["enum"] = s.one_of;
      if (s.is_non_empty) p["minLength"] = 1;
      break;
    case ArgType::kInteger:
      p["type"] = "integer";
      if (s.min) p["minimum"] = *s.min;
      if (s.max) p["maximum"] = *s.max;
      break;
    case ArgType::kBoolean: p["type"] = "boolean"; break;
    case ArgType::kStringList:
      p["type"] = "array";
      p["items"] = {{"type", "string"}, {"minLength", 1}};
      if (s.max_items > 0) p["maxItems"] = s.max_items;
      break;
  }
  if (!s.description.empty()) p["description"] = s.description;
  return p;
}

}  // namespace

ArgSpec string_arg(std::string name, std::string description) {
  ArgSpec s;
  s.name = std::move(name);
  s.description = std::move(description);
  return s;
}
ArgSpec enum_arg(std::string name, std::string description, std::vector<std::string> values) {
  ArgSpec s = string_arg(std::move(name), std::move(description));
  s.one_of = std::move(values);
  return s;
}
ArgSpec integer_arg(std::string name, std::string description) {
  ArgSpec s = string_arg(std::move(name), std::move(description));
  s.type = ArgType::kInteger;
  return s;
}
ArgSpec boolean_arg(std::string name, std::string description) {
  ArgSpec s = string_arg(std::move(name), std::move(description));
  s.type = ArgType::kBoolean;
  return s;
}
ArgSpec string_list_arg(std::string name, std::string description, size_t max_items) {
  ArgSpec s = string_arg(std::move(name), std::move(description));
  s.type = ArgType::kStringList;
  s.max_items = max_items;
  return s;
}

json args_schema(const std::vector<ArgSpec>& specs) {
  json props = json::object();
  json required = json::array();
  for (const auto& s : specs) {
    props[s.name] = property(s);
    if (s.is_required) required.push_back(s.name);
  }
  return {{"type", "object"}, {"properties", props}, {"required", required}, {"additionalProperties", false}};
}

ArgValues::ArgValues(const std::vector<ArgSpec>& specs, const json& arguments, UnknownArgs unknown) : specs_(specs) {
  if (!arguments.is_null() && !arguments.is_object()) {
    error_ = "arguments must be a JSON object";
    return;
  }
  if (arguments.is_object() && unknown == UnknownArgs::kRefuse) {
    for (const auto& [key, v] : arguments.items()) {
      bool declared = false;
      for (const auto& s : specs_) declared = declared || s.name == key;
      if (declared) continue;
      std::vector<std::string> names;
      for (const auto& s : specs_) names.push_back(s.name);
      error_ =
          fmt::format("unknown argument \"{}\" (accepted: {})", key, names.empty() ? "none" : util::join(names, ", "));
      return;
    }
  }
  for (const auto& s : specs_) {
    const bool present = arguments.is_object() && arguments.contains(s.name) && !arguments[s.name].is_null();
    if (present) check(s, arguments[s.name]);
    if (error_) return;
    if (s.is_required && !values_.contains(s.name)) {
      error_ = fmt::format("missing required argument \"{}\"{}", s.name, s.is_non_empty ? " (a non-empty string)" : "");
      return;
    }
  }
}

void ArgValues::check(const ArgSpec& s, const json& v) {
  switch (s.type) {
    case ArgType::kString: {
      if (!v.is_string()) {
        error_ = fmt::format("argument \"{}\" must be a string", s.name);
        return;
      }
      const std::string text = v.get<std::string>();
      if (text.empty() && s.is_non_empty) {
        if (!s.is_required) error_ = fmt::format("argument \"{}\" must not be empty", s.name);
        return;  // a required one is then reported missing
      }
      if (!s.one_of.empty() && std::find(s.one_of.begin(), s.one_of.end(), text) == s.one_of.end()) {
        error_ = fmt::format("argument \"{}\" must be one of {}, not \"{}\"", s.name, util::join(s.one_of, ", "), text);
        return;
      }
      values_[s.name] = text;
      return;
    }
    case ArgType::kInteger: {
      auto n = as_integer(v);
      if (!n || (s.min && *n < *s.min) || (s.max && *n > *s.max)) {
        error_ = fmt::format("argument \"{}\" must be {}", s.name, integer_wording(s));
        return;
      }
      values_[s.name] = *n;
      return;
    }
    case ArgType::kBoolean:
      if (!v.is_boolean()) {
        error_ = fmt::format("argument \"{}\" must be true or false", s.name);
        return;
      }
      values_[s.name] = v;
      return;
    case ArgType::kStringList: {
      bool ok = v.is_array() && (s.max_items == 0 || v.size() <= s.max_items);
      for (size_t i = 0; ok && i < v.size(); ++i) ok = v[i].is_string() && !v[i].get<std::string>().empty();
      if (!ok) {
        error_ = s.max_items > 0 ? fmt::format("argument \"{}\" must be an array of at most {} non-empty strings",
                                               s.name, s.max_items)
                                 : fmt::format("argument \"{}\" must be an array of non-empty strings", s.name);
        return;
      }
      values_[s.name] = v;
      return;
    }
  }
}

std::optional<ToolOutcome> ArgValues::refusal(std::string_view tool) const {
  if (!error_) return std::nullopt;
  return ToolOutcome{std::string(tool) + ": " + *error_, true, {{"error", "bad_arguments"}}};
}

const ArgSpec* ArgValues::spec(std::string_view name, ArgType type) const {
  for (const auto& s : specs_)
    if (s.name == name && s.type == type) return &s;
  std::fprintf(stderr, "tool_args: argument '%.*s' of this type is not declared\n", static_cast<int>(name.size()),
               name.data());
  std::abort();  // a programming error: the handler reads what its declaration does not say
}

std::optional<std::string> ArgValues::string(std::string_view name) const {
  const ArgSpec* s = spec(name, ArgType::kString);
  if (error_ || !values_.contains(s->name)) return std::nullopt;
  return values_[s->name].get<std::string>();
}

std::optional<long long> ArgValues::integer(std::string_view name) const {
  const ArgSpec* s = spec(name, ArgType::kInteger);
  if (error_ || !values_.contains(s->name)) return std::nullopt;
  return values_[s->name].get<long long>();
}

std::optional<bool> ArgValues::boolean(std::string_view name) const {
  const ArgSpec* s = spec(name, ArgType::kBoolean);
  if (error_ || !values_.contains(s->name)) return std::nullopt;
  return values_[s->name].get<bool>();
}

std::vector<std::string> ArgValues::strings(std::string_view name) const {
  const ArgSpec* s = spec(name, ArgType::kStringList);
  if (error_ || !values_.contains(s->name)) return {};
  return values_[s->name].get<std::vector<std::string>>();
}

}  // namespace kda::agent
