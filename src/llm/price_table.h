// Token prices as editable data: per model-name prefix, US dollars per million tokens for input,
// output, cache reads and cache writes. The longest prefix that matches at a name boundary wins
// ("claude-sonnet-4" matches "claude-sonnet-4-5-20250929" but "gpt-5" does not match "gpt-5.5").
// Unknown model: cost 0 and known = false. The built-in table is a snapshot; prices change, so a
// JSON file (`?prices=FILE` in a provider spec) replaces it.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/backend.h"
#include "util/status.h"

namespace kda::llm {

struct ModelPrice {
  std::string prefix;
  double input = 0;  // $/Mtok, uncached input
  double output = 0;
  double cache_read = 0;
  double cache_write = 0;
};

struct Cost {
  double usd = 0;
  bool known = false;  // false: no price for this model (usd is 0)
};

class PriceTable {
 public:
  static PriceTable defaults();
  // {"models": [{"prefix": "...", "input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75}]}
  // or the bare array. Errors name the entry and the field.
  static Result<PriceTable> from_json(const nlohmann::json& j);
  static Result<PriceTable> load(const std::filesystem::path& file);
  nlohmann::json to_json() const;

  const ModelPrice* find(const std::string& model) const;
  Cost cost(const std::string& model, const agent::Usage& usage) const;
  const std::vector<ModelPrice>& entries() const { return entries_; }

 private:
  std::vector<ModelPrice> entries_;
};

}  // namespace kda::llm
