#include "llm/price_table.h"

#include "util/fs.h"

namespace kda::llm {

using nlohmann::json;

PriceTable PriceTable::defaults() {
  // List prices in $/Mtok as published by the providers (snapshot, 2026). Edit or override with a
  // JSON file; an unlisted model costs 0 and is flagged.
  PriceTable t;
  t.entries_ = {
      {"claude-opus-4-5", 5, 25, 0.5, 6.25},
      {"claude-opus-4-1", 15, 75, 1.5, 18.75},
      {"claude-opus-4", 15, 75, 1.5, 18.75},
      {"claude-sonnet-4", 3, 15, 0.3, 3.75},
      {"claude-3-7-sonnet", 3, 15, 0.3, 3.75},
      {"claude-haiku-4-5", 1, 5, 0.1, 1.25},
      {"claude-3-5-haiku", 0.8, 4, 0.08, 1},
      {"gpt-5", 1.25, 10, 0.125, 0},
      {"gpt-5-mini", 0.25, 2, 0.025, 0},
      {"gpt-5-nano", 0.05, 0.4, 0.005, 0},
      {"gpt-4.1", 2, 8, 0.5, 0},
      {"gpt-4.1-mini", 0.4, 1.6, 0.1, 0},
      {"gpt-4.1-nano", 0.1, 0.4, 0.025, 0},
      {"gpt-4o", 2.5, 10, 1.25, 0},
      {"gpt-4o-mini", 0.15, 0.6, 0.075, 0},
      {"o3", 2, 8, 0.5, 0},
      {"o4-mini", 1.1, 4.4, 0.275, 0},
  };
  return t;
}

Result<PriceTable> PriceTable::from_json(const json& j) {
  const json* list = &j;
  if (j.is_object()) {
    auto it = j.find("models");
    if (it == j.end()) return Status::bad_input("price table: missing field 'models'");
    list = &*it;
  }
  if (!list->is_array()) return Status::bad_input("price table: 'models' must be an array");
  PriceTable t;
  for (size_t i = 0; i < list->size(); ++i) {
    const json& e = (*list)[i];
    std::string where = "price table: models[" + std::to_string(i) + "]";
    if (!e.is_object()) return Status::bad_input(where + " must be an object");
    auto p = e.find("prefix");
    if (p == e.end() || !p->is_string() || p->get<std::string>().empty()) {
      return Status::bad_input(where + ".prefix must be a non-empty string");
    }
    ModelPrice mp;
    mp.prefix = p->get<std::string>();
    for (auto [key, field] : {std::pair<const char*, double*>{"input", &mp.input},
                              {"output", &mp.output},
                              {"cache_read", &mp.cache_read},
                              {"cache_write", &mp.cache_write}}) {
      auto it = e.find(key);
      if (it == e.end()) continue;
      if (!it->is_number() || it->get<double>() < 0) {
        return Status::bad_input(where + "." + key + " must be a non-negative number ($/Mtok)");
      }
      *field = it->get<double>();
    }
    t.entries_.push_back(std::move(mp));
  }
  return t;
}

Result<PriceTable> PriceTable::load(const std::filesystem::path& file) {
  KDA_ASSIGN_OR_RETURN(std::string text, fs::read_file(file));
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return Status::bad_input(file.string() + ": not valid JSON");
  auto t = from_json(j);
  if (!t.ok()) return t.status().with_context(file.string());
  return t;
}

json PriceTable::to_json() const {
  json models = json::array();
  for (const auto& e : entries_) {
    models.push_back({{"prefix", e.prefix},
                      {"input", e.input},
                      {"output", e.output},
                      {"cache_read", e.cache_read},
                      {"cache_write", e.cache_write}});
  }
  return {{"models", models}};
}

const ModelPrice* PriceTable::find(const std::string& model) const {
  const ModelPrice* best = nullptr;
  for (const auto& e : entries_) {
    if (model.compare(0, e.prefix.size(), e.prefix) != 0) continue;
    bool boundary = model.size() == e.prefix.size() || model[e.prefix.size()] == '-' || model[e.prefix.size()] == '@' ||
                    model[e.prefix.size()] == ':';
    if (!boundary) continue;
    if (best == nullptr || e.prefix.size() > best->prefix.size()) best = &e;
  }
  return best;
}

Cost PriceTable::cost(const std::string& model, const agent::Usage& usage) const {
  const ModelPrice* p = find(model);
  if (p == nullptr) return {0, false};
  double usd =
      (static_cast<double>(usage.input_tokens) * p->input + static_cast<double>(usage.output_tokens) * p->output +
       static_cast<double>(usage.cache_read_tokens) * p->cache_read +
       static_cast<double>(usage.cache_write_tokens) * p->cache_write) /
      1e6;
  return {usd, true};
}

}  // namespace kda::llm
