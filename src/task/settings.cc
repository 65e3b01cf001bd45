#include "task/settings.h"

#include <algorithm>
#include <functional>
#include <map>

#include <toml++/toml.h>

#include "util/fs.h"

namespace kda::task {

namespace {

// Reads the keys of one [table], recording problems with file, line and "table.key".
class TableReader {
 public:
  TableReader(const toml::table& root, const char* table, const std::string& file, Diagnostics& diags)
      : table_name_(table), file_(file), diags_(diags) {
    if (const toml::node* n = root.get(table)) {
      table_ = n->as_table();
      if (table_ == nullptr) error(*n, "", std::string("[") + table + "] must be a table");
    }
  }

  void error(const toml::node& n, const std::string& key, const std::string& message) {
    std::string pointer = "/" + table_name_ + (key.empty() ? "" : "/" + key);
    std::string name = table_name_ + (key.empty() ? "" : "." + key);
    diags_.add(file_, static_cast<int>(n.source().begin.line), pointer, name + ": " + message);
  }

  // Marks a key as known and returns its node (nullptr when absent).
  const toml::node* get(const std::string& key) {
    known_.push_back(key);
    return table_ == nullptr ? nullptr : table_->get(key);
  }

  void number(const std::string& key, double& out, double lo, double hi, bool lo_open, const char* range) {
    const toml::node* n = get(key);
    if (n == nullptr) return;
    double v;
    if (auto f = n->as_floating_point())
      v = f->get();
    else if (auto i = n->as_integer())
      v = static_cast<double>(i->get());
    else
      return error(*n, key, "must be a number");
    if (!(lo_open ? v > lo : v >= lo) || !(v <= hi)) return error(*n, key, std::string("must be in ") + range);
    out = v;
  }

  void integer(const std::string& key, int& out, int lo, int hi) {
    const toml::node* n = get(key);
    if (n == nullptr) return;
    auto i = n->as_integer();
    if (i == nullptr) return error(*n, key, "must be an integer");
    if (i->get() < lo || i->get() > hi)
      return error(*n, key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    out = static_cast<int>(i->get());
  }

  void boolean(const std::string& key, bool& out) {
    const toml::node* n = get(key);
    if (n == nullptr) return;
    auto b = n->as_boolean();
    if (b == nullptr) return error(*n, key, "must be true or false");
    out = b->get();
  }

  std::optional<std::string> string(const std::string& key, bool non_empty = true) {
    const toml::node* n = get(key);
    if (n == nullptr) return std::nullopt;
    auto s = n->as_string();
    if (s == nullptr) {
      error(*n, key, "must be a string");
      return std::nullopt;
    }
    if (non_empty && s->get().empty()) {
      error(*n, key, "must not be empty");
      return std::nullopt;
    }
    return s->get();
  }

  template <typename E>
  void choice(const std::string& key, E& out, const std::vector<std::pair<const char*, E>>& options) {
    auto s = string(key);
    if (!s) return;
    std::string allowed;
    for (const auto& [name, value] : options) {
      if (*s == name) {
        out = value;
        return;
      }
      allowed += (allowed.empty() ? "\"" : ", \"") + std::string(name) + "\"";
    }
    error(*table_->get(key), key, "must be one of " + allowed + "; got \"" + *s + "\"");
  }

  void string_list(const std::string& key, std::vector<std::string>& out) {
    const toml::node* n = get(key);
    if (n == nullptr) return;
    auto arr = n->as_array();
    if (arr == nullptr) return error(*n, key, "must be a list of strings");
    std::vector<std::string> v;
    for (const auto& e : *arr) {
      auto s = e.as_string();
      if (s == nullptr) return error(e, key, "must be a list of strings");
      v.push_back(s->get());
    }
    out = std::move(v);
  }

  void expression(const std::string& key, std::optional<Expression>& out) {
    auto s = string(key);
    if (!s) return;
    auto e = Expression::parse(*s);
    if (!e.ok()) return error(*table_->get(key), key, "bad formula \"" + *s + "\": " + e.status().message());
    out = std::move(*e);
  }

  // Every key not asked for is unknown.
  void reject_unknown() {
    if (table_ == nullptr) return;
    for (const auto& [k, v] : *table_) {
      std::string key(k.str());
      if (std::find(known_.begin(), known_.end(), key) == known_.end()) error(v, key, "unknown key");
    }
  }

 private:
  std::string table_name_;
  const std::string& file_;
  Diagnostics& diags_;
  const toml::table* table_ = nullptr;
  std::vector<std::string> known_;
};

}  // namespace

std::string_view backend_name(Backend b) { return b == Backend::kHost ? "host" : "cuda"; }
std::string_view checker_name(Checker c) { return c == Checker::kDefault ? "default" : "topk_indices"; }
std::string_view persistent_state_name(PersistentState p) { return p == PersistentState::kNone ? "none" : "scratch"; }
std::string_view determinism_name(Determinism d) { return d == Determinism::kBitwise ? "bitwise" : "tolerance"; }
std::string_view probe_name(Probe p) {
  switch (p) {
    case Probe::kOffset: return "offset";
    case Probe::kScale: return "scale";
    case Probe::kOutliers: return "outliers";
  }
  return "?";
}

nlohmann::json TaskSettings::to_json() const {
  nlohmann::json j;
  j["evaluation"] = {
      {"backend", backend ? nlohmann::json(backend_name(*backend)) : nlohmann::json(nullptr)},
      {"checker", checker_name(checker)},
      {"atol", atol},
      {"rtol", rtol},
      {"matched_ratio", matched_ratio},
      {"max_tolerance_used", max_tolerance_used ? nlohmann::json(*max_tolerance_used) : nlohmann::json(nullptr)},
      {"compare_outputs", compare_outputs},
      {"dev_workloads", dev_workloads}};
  j["timing"] = {{"warmup", warmup},
                 {"iterations", iterations},
                 {"trials", trials},
                 {"call_timeout_s", call_timeout_s},
                 {"workload_timeout_s", workload_timeout_s}};
  j["policy"] = {{"libraries", libraries},
                 {"cuda_graphs", cuda_graphs},
                 {"streams", streams},
                 {"threads", threads},
                 {"persistent_state", persistent_state_name(persistent_state)},
                 {"determinism", determinism_name(determinism)}};
  j["roofline"] = {{"bytes", roofline_bytes ? nlohmann::json(roofline_bytes->text()) : nlohmann::json(nullptr)},
                   {"flops", roofline_flops ? nlohmann::json(roofline_flops->text()) : nlohmann::json(nullptr)}};
  j["baseline"] = {{"name", baseline_name}};
  j["reference"] = {{"solution", reference_dir},
                    {"cpu_solution", cpu_reference_dir ? nlohmann::json(*cpu_reference_dir) : nlohmann::json(nullptr)}};
  j["inputs"] = {{"generator", inputs_generator}, {"stress", stress}};
  j["contract"] = {{"graph", graph_contract}};
  nlohmann::json probe_json = nlohmann::json::object();
  for (const auto& [input, list] : probes) {
    auto& arr = probe_json[input] = nlohmann::json::array();
    for (Probe p : list) arr.push_back(probe_name(p));
  }
  j["probes"] = std::move(probe_json);
  return j;
}

std::optional<TaskSettings> settings_from_toml(std::string_view text, const std::string& file, Diagnostics& diags) {
  toml::table root;
  try {
    root = toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    diags.add(file, static_cast<int>(e.source().begin.line), "", "invalid TOML: " + std::string(e.description()));
    return std::nullopt;
  }
  size_t before = diags.size();
  TaskSettings s;
  static const std::vector<std::string> kTables{"evaluation", "timing", "policy", "roofline", "baseline",
                                                "reference",  "inputs", "probes", "contract"};
  for (const auto& [k, v] : root) {
    std::string key(k.str());
    if (std::find(kTables.begin(), kTables.end(), key) == kTables.end())
      diags.add(file, static_cast<int>(v.source().begin.line), "/" + key, "unknown table or key '" + key + "'");
  }

  TableReader ev(root, "evaluation", file, diags);
  if (auto b = ev.string("backend")) {
    if (*b == "host")
      s.backend = Backend::kHost;
    else if (*b == "cuda")
      s.backend = Backend::kCuda;
    else
      ev.error(*root["evaluation"]["backend"].node(), "backend", "must be \"host\" or \"cuda\"; got \"" + *b + "\"");
  }
  ev.choice("checker", s.checker, {{"default", Checker::kDefault}, {"topk_indices", Checker::kTopkIndices}});
  ev.number("atol", s.atol, 0, 1e300, false, "[0, inf)");
  ev.number("rtol", s.rtol, 0, 1e300, false, "[0, inf)");
  ev.number("matched_ratio", s.matched_ratio, 0, 1, true, "(0, 1]");
  double budget = -1;  // stays -1 when absent or invalid (an invalid one is an error already)
  ev.number("max_tolerance_used", budget, 0, 1e300, true, "(0, inf)");
  if (budget > 0) s.max_tolerance_used = budget;
  ev.string_list("compare_outputs", s.compare_outputs);
  ev.string_list("dev_workloads", s.dev_workloads);
  ev.reject_unknown();

  TableReader tm(root, "timing", file, diags);
  tm.integer("warmup", s.warmup, 0, 1000000);
  tm.integer("iterations", s.iterations, 1, 1000000);
  tm.integer("trials", s.trials, 1, 1000);
  tm.number("call_timeout_s", s.call_timeout_s, 0, 1e6, true, "(0, 1e6]");
  tm.number("workload_timeout_s", s.workload_timeout_s, 0, 1e7, true, "(0, 1e7]");
  tm.reject_unknown();

  TableReader po(root, "policy", file, diags);
  po.string_list("libraries", s.libraries);
  po.boolean("cuda_graphs", s.cuda_graphs);
  po.boolean("streams", s.streams);
  po.boolean("threads", s.threads);
  po.choice("persistent_state", s.persistent_state,
            {{"none", PersistentState::kNone}, {"scratch", PersistentState::kScratch}});
  po.choice("determinism", s.determinism, {{"bitwise", Determinism::kBitwise}, {"tolerance", Determinism::kTolerance}});
  po.reject_unknown();

  TableReader rf(root, "roofline", file, diags);
  rf.expression("bytes", s.roofline_bytes);
  rf.expression("flops", s.roofline_flops);
  rf.reject_unknown();

  TableReader bl(root, "baseline", file, diags);
  if (auto n = bl.string("name")) s.baseline_name = *n;
  bl.reject_unknown();

  TableReader rs(root, "reference", file, diags);
  if (auto d = rs.string("solution")) s.reference_dir = *d;
  s.cpu_reference_dir = rs.string("cpu_solution");
  rs.reject_unknown();

  TableReader ct(root, "contract", file, diags);
  ct.boolean("graph", s.graph_contract);
  ct.reject_unknown();

  TableReader in(root, "inputs", file, diags);
  if (auto g = in.string("generator")) s.inputs_generator = *g;
  in.string_list("stress", s.stress);
  if (const toml::node* n = root.at_path("inputs.stress").node(); n != nullptr && s.inputs_generator.empty())
    in.error(*n, "stress", "stress inputs transform a generator's draws: set [inputs] generator too");
  in.reject_unknown();

  // [probes]: every key is an input name (checked against the definition when the pack loads).
  TableReader pr(root, "probes", file, diags);
  if (const toml::node* n = root.get("probes"); n != nullptr && n->as_table() != nullptr) {
    for (const auto& [k, v] : *n->as_table()) {
      const std::string input(k.str());
      std::vector<std::string> names;
      pr.string_list(input, names);
      std::vector<Probe> probes;
      for (const auto& name : names) {
        if (name == "offset")
          probes.push_back(Probe::kOffset);
        else if (name == "scale")
          probes.push_back(Probe::kScale);
        else if (name == "outliers")
          probes.push_back(Probe::kOutliers);
        else
          pr.error(v, input, "unknown probe \"" + name + "\" (one of \"offset\", \"scale\", \"outliers\")");
      }
      if (!probes.empty()) s.probes.emplace_back(input, std::move(probes));
    }
  }
  pr.reject_unknown();

  if (diags.size() > before) return std::nullopt;
  return s;
}

std::optional<TaskSettings> load_settings(const std::filesystem::path& path, Diagnostics& diags) {
  auto text = fs::read_file(path);
  if (!text.ok()) {
    diags.add(path.string(), 0, "", text.status().message());
    return std::nullopt;
  }
  return settings_from_toml(*text, path.string(), diags);
}

}  // namespace kda::task
