// A tool's arguments, declared once: the JSON schema a model is shown (ToolSpec::input_schema) and
// the reader that checks a call's arguments both come from the same list of ArgSpec, so the two
// cannot disagree on a name, a type, a range or what is required.
//
//   const std::vector<ArgSpec> kArgs = {string_arg("path", "file, relative to the workspace").required(),
//                                       integer_arg("limit", "lines to return").at_least(1)};
//   spec.input_schema = args_schema(kArgs);
//   ArgValues a(kArgs, arguments);
//   if (auto bad = a.refusal("read_file")) return *bad;
//   std::string path = *a.string("path");
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/tool.h"

namespace kda::agent {

enum class ArgType { kString, kInteger, kBoolean, kStringList };

struct ArgSpec {
  std::string name;
  ArgType type = ArgType::kString;
  std::string description;
  bool is_required = false;
  bool is_non_empty = false;          // kString: "" is refused (and, when required, counts as missing)
  std::optional<long long> min, max;  // kInteger: the allowed range
  size_t max_items = 0;               // kStringList: at most this many (0: any number)
  std::vector<std::string> one_of;    // kString: the allowed values (a JSON-schema enum)

  ArgSpec required() && {
    is_required = true;
    return std::move(*this);
  }
  ArgSpec non_empty() && {
    is_non_empty = true;
    return std::move(*this);
  }
  ArgSpec at_least(long long lo) && {
    min = lo;
    return std::move(*this);
  }
  ArgSpec in_range(long long lo, long long hi) && {
    min = lo;
    max = hi;
    return std::move(*this);
  }
};

ArgSpec string_arg(std::string name, std::string description);
ArgSpec enum_arg(std::string name, std::string description, std::vector<std::string> values);
ArgSpec integer_arg(std::string name, std::string description);
ArgSpec boolean_arg(std::string name, std::string description);
ArgSpec string_list_arg(std::string name, std::string description, size_t max_items);

// {"type": "object", "properties": {...}, "required": [...], "additionalProperties": false}.
nlohmann::json args_schema(const std::vector<ArgSpec>& specs);

// What to do with a key no ArgSpec declares.
enum class UnknownArgs { kRefuse, kIgnore };

// A call's arguments (a JSON object, or null for none) read against their declarations. The first
// problem is error(), a message fit for a model: not an object, an unknown key (under kRefuse), a
// wrong type, an integer out of range, a value not among one_of, an empty string that must not be,
// a required argument missing. A JSON null counts as absent; an integral float (3.0) as an integer.
class ArgValues {
 public:
  ArgValues(const std::vector<ArgSpec>& specs, const nlohmann::json& arguments,
            UnknownArgs unknown = UnknownArgs::kRefuse);

  const std::optional<std::string>& error() const { return error_; }
  // The tool call's refusal when the arguments do not read: "<tool>: <error>", is_error, data
  // {"error": "bad_arguments"}; nullopt when they do.
  std::optional<ToolOutcome> refusal(std::string_view tool) const;

  // The value of a declared argument of that type, or nullopt / {} when absent (or on error).
  std::optional<std::string> string(std::string_view name) const;
  std::optional<long long> integer(std::string_view name) const;
  std::optional<bool> boolean(std::string_view name) const;
  std::vector<std::string> strings(std::string_view name) const;

 private:
  const ArgSpec* spec(std::string_view name, ArgType type) const;  // aborts on an undeclared name
  void check(const ArgSpec& s, const nlohmann::json& v);

  std::vector<ArgSpec> specs_;
  nlohmann::json values_ = nlohmann::json::object();  // the declared, present, checked ones
  std::optional<std::string> error_;
};

}  // namespace kda::agent
