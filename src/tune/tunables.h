// tunables.toml: the parameters, constraints, variants and regime overrides a tunable solution
// declares beside its solution.json (which stays a plain FlashInfer-Bench Solution), and the
// configuration space they span. See docs/tune.md for the format.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "task/definition.h"
#include "task/expression.h"
#include "util/status.h"

namespace kda::tune {

inline constexpr const char* kTunablesFile = "tunables.toml";

// How a parameter reaches the source: always a -D style macro (a `#define` block at the top of each
// translation unit); kTemplate documents that the macro is used as a template argument, so its
// values must be integers or identifiers.
enum class Binding { kDefine, kTemplate };

struct Parameter {
  std::string name;
  std::string macro;  // defaults to the name
  Binding binding = Binding::kDefine;
  std::vector<nlohmann::json> values;  // integers, booleans or strings (macro text), in declared order
  int line = 0;                        // in tunables.toml
};

struct Constraint {
  task::Expression expression;
  bool uses_axes = false;  // refers to a definition axis: checked per workload, not per configuration
  int line = 0;
};

struct Variant {
  std::string name;
  std::string entry_point;              // "file::function"; defaults to solution.json's
  std::vector<std::string> sources;     // the solution's sources this variant compiles; empty = all
  std::vector<std::string> parameters;  // the parameters it varies; empty = all (others stay at their first value)
  int line = 0;
};

// A user-declared regime: inclusive ranges over var axes (an axis not named is unconstrained).
struct RegimeSpec {
  std::string name;
  std::map<std::string, std::pair<int64_t, int64_t>> ranges;
  int line = 0;
};

struct Tunables {
  std::string file;                   // for messages
  std::vector<Parameter> parameters;  // in file order
  std::vector<Constraint> constraints;
  std::vector<Variant> variants;    // at least one (the implicit "default")
  std::vector<RegimeSpec> regimes;  // empty = group automatically
};

// One point of the space: a variant and a value per parameter the variant varies (the others are
// at their first value and left out, so they do not show in ids and labels).
struct Config {
  std::string variant;
  std::map<std::string, nlohmann::json> params;
  std::string id() const;          // 12 hex digits of the SHA-256 of to_json() minus the id
  std::string label() const;       // "variant A=1 B=2" (variant left out when it is "default")
  nlohmann::json to_json() const;  // {"variant", "params", "id", "label"}
  static Result<Config> from_json(const nlohmann::json& j);
};

// Parses tunables.toml text; `def` names the axes constraints may use. Errors are kBadInput and
// name the file, line and parameter.
Result<Tunables> parse_tunables(std::string_view text, const std::string& file, const task::Definition& def,
                                const std::string& default_entry_point, const std::vector<std::string>& source_paths);
// Reads <solution_dir>/tunables.toml.
Result<Tunables> load_tunables(const std::filesystem::path& solution_dir, const task::Definition& def,
                               const std::string& default_entry_point, const std::vector<std::string>& source_paths);
// [[regime]] tables from a separate file (--regimes FILE), same syntax as in tunables.toml.
Result<std::vector<RegimeSpec>> load_regimes_file(const std::filesystem::path& file, const task::Definition& def);

// Every configuration whose parameter-only constraints hold, variants in file order, parameters
// varying fastest last. The first is the default configuration (every parameter at its first value).
Result<std::vector<Config>> enumerate_configs(const Tunables& t);

// The first parameter-only constraint `c` breaks, or null when they all hold.
Result<const Constraint*> violated_constraint(const Tunables& t, const Config& c);

// Whether the axis constraints hold for a workload's axes (const axes included by the caller).
Result<bool> applies_to(const Tunables& t, const Config& c, const std::map<std::string, int64_t>& axes);

const Variant* find_variant(const Tunables& t, const std::string& name);
// Whether variant `v` varies `parameter` (a variant that lists none varies them all).
bool varies(const Variant& v, const std::string& parameter);
// Every parameter's value in `c`: its own, else the parameter's first value.
std::map<std::string, nlohmann::json> all_values(const Tunables& t, const Config& c);
bool is_identifier(const std::string& s);
// A macro value must stay one preprocessing line: no newlines, no comment or continuation tricks.
bool is_macro_safe(const std::string& s);
// The macro text of a value: integers as decimal, booleans 1/0, strings verbatim.
std::string macro_text(const nlohmann::json& value);

}  // namespace kda::tune
