#include "tune/tunables.h"

#include <algorithm>
#include <regex>
#include <set>

#include <toml++/toml.h>

#include "util/fs.h"
#include "util/sha256.h"

namespace kda::tune {

namespace {

constexpr size_t kMaxValues = 4096;      // per parameter
constexpr size_t kMaxConfigs = 1000000;  // whole space, before constraints

int line_of(const toml::node& n) { return static_cast<int>(n.source().begin.line); }

Status bad(const std::string& file, int line, const std::string& what, const std::string& message) {
  return Status::bad_input(file + ":" + std::to_string(line) + ": " + what + ": " + message);
}

Result<nlohmann::json> value_of(const toml::node& n, const std::string& file, const std::string& what) {
  if (auto v = n.as_integer()) return nlohmann::json(v->get());
  if (auto v = n.as_boolean()) return nlohmann::json(v->get());
  if (auto v = n.as_string()) {
    if (!is_macro_safe(v->get()))
      return bad(file, line_of(n), what, "string value '" + v->get() + "' is not one line of macro text");
    return nlohmann::json(v->get());
  }
  return bad(file, line_of(n), what, "values must be integers, booleans or strings");
}

Result<std::vector<nlohmann::json>> parse_values(const toml::table& t, const std::string& file, const std::string& what,
                                                 int line) {
  const toml::node* values = t.get("values");
  const toml::node* range = t.get("range");
  if ((values != nullptr) == (range != nullptr))
    return bad(file, line, what, "give exactly one of 'values' (a list) or 'range' ({min, max, step})");
  std::vector<nlohmann::json> out;
  if (values != nullptr) {
    const toml::array* a = values->as_array();
    if (a == nullptr || a->empty()) return bad(file, line_of(*values), what, "'values' must be a non-empty list");
    for (const toml::node& v : *a) {
      KDA_ASSIGN_OR_RETURN(auto j, value_of(v, file, what));
      if (std::find(out.begin(), out.end(), j) != out.end())
        return bad(file, line_of(v), what, "value " + j.dump() + " is listed twice");
      out.push_back(std::move(j));
    }
  } else {
    const toml::table* r = range->as_table();
    if (r == nullptr) return bad(file, line_of(*range), what, "'range' must be a table {min = , max = , step = }");
    auto get = [&](const char* key, std::optional<int64_t> def) -> Result<int64_t> {
      const toml::node* n = r->get(key);
      if (n == nullptr) {
        if (def) return *def;
        return bad(file, line_of(*range), what, std::string("range needs '") + key + "'");
      }
      auto v = n->as_integer();
      if (!v) return bad(file, line_of(*n), what, std::string("range '") + key + "' must be an integer");
      return v->get();
    };
    KDA_ASSIGN_OR_RETURN(int64_t lo, get("min", std::nullopt));
    KDA_ASSIGN_OR_RETURN(int64_t hi, get("max", std::nullopt));
    KDA_ASSIGN_OR_RETURN(int64_t step, get("step", 1));
    for (const auto& [k, _] : *r)
      if (k.str() != "min" && k.str() != "max" && k.str() != "step")
        return bad(file, line_of(*range), what, "unknown range key '" + std::string(k.str()) + "'");
    if (step <= 0) return bad(file, line_of(*range), what, "range step must be positive");
    if (hi < lo) return bad(file, line_of(*range), what, "range max is below min");
    if ((hi - lo) / step + 1 > static_cast<int64_t>(kMaxValues))
      return bad(file, line_of(*range), what, "range has more than 4096 values");
    for (int64_t v = lo; v <= hi; v += step) out.push_back(v);
  }
  if (out.size() > kMaxValues) return bad(file, line, what, "more than 4096 values");
  return out;
}

Result<std::vector<std::string>> string_list(const toml::node& n, const std::string& file, const std::string& what,
                                             const std::string& key) {
  const toml::array* a = n.as_array();
  if (a == nullptr) return bad(file, line_of(n), what, "'" + key + "' must be a list of strings");
  std::vector<std::string> out;
  for (const toml::node& v : *a) {
    auto s = v.as_string();
    if (!s) return bad(file, line_of(v), what, "'" + key + "' must be a list of strings");
    out.push_back(s->get());
  }
  return out;
}

Result<std::vector<RegimeSpec>> parse_regimes(const toml::table& root, const std::string& file,
                                              const task::Definition& def) {
  std::vector<RegimeSpec> out;
  const toml::node* n = root.get("regime");
  if (n == nullptr) return out;
  const toml::array* a = n->as_array();
  if (a == nullptr) return bad(file, line_of(*n), "regime", "use [[regime]] tables");
  std::set<std::string> names;
  for (const toml::node& item : *a) {
    const toml::table* t = item.as_table();
    if (t == nullptr) return bad(file, line_of(item), "regime", "use [[regime]] tables");
    RegimeSpec r;
    r.line = line_of(item);
    const toml::node* name = t->get("name");
    if (name == nullptr || !name->as_string() || name->as_string()->get().empty())
      return bad(file, r.line, "regime", "needs a non-empty 'name'");
    r.name = name->as_string()->get();
    const std::string what = "regime '" + r.name + "'";
    if (!names.insert(r.name).second) return bad(file, r.line, what, "declared twice");
    for (const auto& [k, v] : *t) {
      const std::string key(k.str());
      if (key == "name") continue;
      const task::AxisSpec* axis = def.axis(key);
      if (axis == nullptr || axis->kind != task::AxisSpec::Kind::kVar)
        return bad(file, line_of(v), what, "'" + key + "' is not a var axis of " + def.name);
      if (auto i = v.as_integer()) {
        r.ranges[key] = {i->get(), i->get()};
      } else if (auto arr = v.as_array();
                 arr != nullptr && arr->size() == 2 && (*arr)[0].as_integer() && (*arr)[1].as_integer()) {
        int64_t lo = (*arr)[0].as_integer()->get(), hi = (*arr)[1].as_integer()->get();
        if (hi < lo) return bad(file, line_of(v), what, "'" + key + "' range [lo, hi] has hi < lo");
        r.ranges[key] = {lo, hi};
      } else {
        return bad(file, line_of(v), what, "'" + key + "' must be an integer or an inclusive range [lo, hi]");
      }
    }
    if (r.ranges.empty()) return bad(file, r.line, what, "constrains no axis");
    out.push_back(std::move(r));
  }
  return out;
}

Result<toml::table> parse_toml(std::string_view text, const std::string& file) {
  try {
    return toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    return Status::bad_input(file + ":" + std::to_string(e.source().begin.line) + ": " + std::string(e.description()));
  }
}

}  // namespace

bool is_identifier(const std::string& s) {
  static const std::regex re("[A-Za-z_][A-Za-z0-9_]*");
  return std::regex_match(s, re);
}

bool is_macro_safe(const std::string& s) {
  return !s.empty() && s.find_first_of("\n\r\\") == std::string::npos && s.find("/*") == std::string::npos &&
         s.find("//") == std::string::npos;
}

std::string macro_text(const nlohmann::json& value) {
  if (value.is_boolean()) return value.get<bool>() ? "1" : "0";
  if (value.is_string()) return value.get<std::string>();
  return value.dump();
}

nlohmann::json Config::to_json() const {
  nlohmann::json p = nlohmann::json::object();
  for (const auto& [k, v] : params) p[k] = v;
  return {{"variant", variant}, {"params", p}, {"id", id()}, {"label", label()}};
}

std::string Config::id() const {
  nlohmann::json p = nlohmann::json::object();
  for (const auto& [k, v] : params) p[k] = v;
  return sha256_hex(nlohmann::json{{"variant", variant}, {"params", p}}.dump()).substr(0, 12);
}

std::string Config::label() const {
  std::string s = variant == "default" ? "" : variant;
  for (const auto& [k, v] : params) s += (s.empty() ? "" : " ") + k + "=" + macro_text(v);
  return s.empty() ? "default" : s;
}

Result<Config> Config::from_json(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("variant") || !j["variant"].is_string() || !j.contains("params") ||
      !j["params"].is_object())
    return Status::bad_input("configuration: expected {\"variant\": string, \"params\": object}");
  Config c;
  c.variant = j["variant"].get<std::string>();
  for (const auto& [k, v] : j["params"].items()) c.params[k] = v;
  return c;
}

// One [parameters.NAME] table: its values or range, macro (not one of `macros`, which it joins) and
// binding.
Result<Parameter> parse_parameter(const std::string& name, const toml::node& v, const std::string& file,
                                  const std::set<std::string>& axis_names, std::set<std::string>& macros) {
  Parameter p;
  p.name = name;
  p.line = line_of(v);
  const std::string what = "parameter '" + p.name + "'";
  if (!is_identifier(p.name)) return bad(file, p.line, what, "name must be an identifier");
  if (axis_names.count(p.name)) return bad(file, p.line, what, "has the name of a definition axis");
  const toml::table* body = v.as_table();
  if (body == nullptr) return bad(file, p.line, what, "must be a table (values or range, macro, bind)");
  for (const auto& [bk, bv] : *body) {
    static const std::set<std::string> kKeys = {"values", "range", "macro", "bind"};
    if (!kKeys.count(std::string(bk.str())))
      return bad(file, line_of(bv), what, "unknown key '" + std::string(bk.str()) + "'");
  }
  KDA_ASSIGN_OR_RETURN(p.values, parse_values(*body, file, what, p.line));
  p.macro = p.name;
  if (const toml::node* m = body->get("macro")) {
    if (!m->as_string() || !is_identifier(m->as_string()->get()))
      return bad(file, line_of(*m), what, "'macro' must be an identifier");
    p.macro = m->as_string()->get();
  }
  if (!macros.insert(p.macro).second) return bad(file, p.line, what, "macro '" + p.macro + "' is bound twice");
  if (const toml::node* b = body->get("bind")) {
    std::string s = b->as_string() ? b->as_string()->get() : "";
    if (s == "define")
      p.binding = Binding::kDefine;
    else if (s == "template")
      p.binding = Binding::kTemplate;
    else
      return bad(file, line_of(*b), what, "'bind' must be \"define\" or \"template\"");
  }
  if (p.binding == Binding::kTemplate)
    for (const auto& val : p.values)
      if (val.is_string() && !is_identifier(val.get<std::string>()))
        return bad(file, p.line, what, "template argument value '" + val.get<std::string>() + "' is not an identifier");
  return p;
}

Result<Tunables> parse_tunables(std::string_view text, const std::string& file, const task::Definition& def,
                                const std::string& default_entry_point, const std::vector<std::string>& source_paths) {
  KDA_ASSIGN_OR_RETURN(toml::table root, parse_toml(text, file));
  Tunables t;
  t.file = file;
  static const std::set<std::string> kTop = {"parameters", "constraints", "variant", "regime"};
  for (const auto& [k, v] : root)
    if (!kTop.count(std::string(k.str())))
      return bad(file, line_of(v), std::string(k.str()),
                 "unknown section (expected parameters, constraints, variant, regime)");

  std::set<std::string> axis_names;
  for (const auto& a : def.axes) axis_names.insert(a.name);
  if (const toml::node* ps = root.get("parameters")) {
    const toml::table* pt = ps->as_table();
    if (pt == nullptr) return bad(file, line_of(*ps), "parameters", "must be a table of [parameters.NAME] tables");
    std::set<std::string> macros;
    for (const auto& [k, v] : *pt) {
      KDA_ASSIGN_OR_RETURN(Parameter p, parse_parameter(std::string(k.str()), v, file, axis_names, macros));
      t.parameters.push_back(std::move(p));
    }
    // toml++ tables iterate by key; file order is what users read and what the default config means.
    std::sort(t.parameters.begin(), t.parameters.end(),
              [](const Parameter& a, const Parameter& b) { return a.line < b.line; });
  }

  std::map<std::string, const Parameter*> by_name;
  for (const auto& p : t.parameters) by_name[p.name] = &p;
  if (const toml::node* cs = root.get("constraints")) {
    const toml::array* a = cs->as_array();
    if (a == nullptr) return bad(file, line_of(*cs), "constraints", "must be a list of expression strings");
    for (const toml::node& c : *a) {
      auto s = c.as_string();
      if (!s) return bad(file, line_of(c), "constraints", "must be a list of expression strings");
      auto e = task::Expression::parse(s->get());
      if (!e.ok()) return bad(file, line_of(c), "constraint '" + s->get() + "'", e.status().message());
      Constraint con{*e, false, line_of(c)};
      for (const auto& id : e->identifiers()) {
        if (axis_names.count(id)) {
          con.uses_axes = true;
          continue;
        }
        auto it = by_name.find(id);
        if (it == by_name.end())
          return bad(file, con.line, "constraint '" + s->get() + "'",
                     "'" + id + "' is neither a parameter nor an axis");
        for (const auto& v : it->second->values)
          if (!v.is_number_integer() && !v.is_boolean())
            return bad(file, con.line, "constraint '" + s->get() + "'",
                       "parameter '" + id + "' has non-integer values");
      }
      t.constraints.push_back(std::move(con));
    }
  }

  std::set<std::string> sources(source_paths.begin(), source_paths.end());
  auto check_entry = [&](const std::string& ep, const std::string& what, int line) -> Status {
    auto pos = ep.find("::");
    if (pos == std::string::npos || pos == 0 || pos + 2 >= ep.size())
      return bad(file, line, what, "entry_point must be \"file::function\"");
    if (!sources.count(ep.substr(0, pos)))
      return bad(file, line, what, "entry_point file '" + ep.substr(0, pos) + "' is not a source of the solution");
    if (!is_identifier(ep.substr(pos + 2))) return bad(file, line, what, "entry_point function is not an identifier");
    return Status::ok_status();
  };
  if (const toml::node* vs = root.get("variant")) {
    const toml::array* a = vs->as_array();
    if (a == nullptr) return bad(file, line_of(*vs), "variant", "use [[variant]] tables");
    std::set<std::string> names;
    for (const toml::node& item : *a) {
      const toml::table* vt = item.as_table();
      if (vt == nullptr) return bad(file, line_of(item), "variant", "use [[variant]] tables");
      Variant var;
      var.line = line_of(item);
      const toml::node* name = vt->get("name");
      if (name == nullptr || !name->as_string() || !is_identifier(name->as_string()->get()))
        return bad(file, var.line, "variant", "needs a 'name' that is an identifier");
      var.name = name->as_string()->get();
      const std::string what = "variant '" + var.name + "'";
      if (!names.insert(var.name).second) return bad(file, var.line, what, "declared twice");
      for (const auto& [k, v] : *vt) {
        const std::string key(k.str());
        if (key == "name") continue;
        if (key == "entry_point") {
          if (!v.as_string()) return bad(file, line_of(v), what, "'entry_point' must be a string");
          var.entry_point = v.as_string()->get();
        } else if (key == "sources") {
          KDA_ASSIGN_OR_RETURN(var.sources, string_list(v, file, what, key));
          for (const auto& s : var.sources)
            if (!sources.count(s)) return bad(file, line_of(v), what, "source '" + s + "' is not in solution.json");
        } else if (key == "parameters") {
          KDA_ASSIGN_OR_RETURN(var.parameters, string_list(v, file, what, key));
          for (const auto& s : var.parameters)
            if (!by_name.count(s)) return bad(file, line_of(v), what, "parameter '" + s + "' is not declared");
        } else {
          return bad(file, line_of(v), what, "unknown key '" + key + "'");
        }
      }
      if (var.entry_point.empty()) var.entry_point = default_entry_point;
      KDA_RETURN_IF_ERROR(check_entry(var.entry_point, what, var.line));
      if (!var.sources.empty() && std::find(var.sources.begin(), var.sources.end(),
                                            var.entry_point.substr(0, var.entry_point.find("::"))) == var.sources.end())
        return bad(file, var.line, what, "its sources do not include its entry_point file");
      t.variants.push_back(std::move(var));
    }
  }
  if (t.variants.empty()) t.variants.push_back({"default", default_entry_point, {}, {}, 0});
  KDA_ASSIGN_OR_RETURN(t.regimes, parse_regimes(root, file, def));
  return t;
}

Result<Tunables> load_tunables(const std::filesystem::path& solution_dir, const task::Definition& def,
                               const std::string& default_entry_point, const std::vector<std::string>& source_paths) {
  const auto path = solution_dir / kTunablesFile;
  if (!std::filesystem::exists(path))
    return Status::bad_input(path.string() + ": not found (a tunable solution declares its parameters there)");
  KDA_ASSIGN_OR_RETURN(std::string text, fs::read_file(path));
  return parse_tunables(text, path.string(), def, default_entry_point, source_paths);
}

Result<std::vector<RegimeSpec>> load_regimes_file(const std::filesystem::path& file, const task::Definition& def) {
  KDA_ASSIGN_OR_RETURN(std::string text, fs::read_file(file));
  KDA_ASSIGN_OR_RETURN(toml::table root, parse_toml(text, file.string()));
  for (const auto& [k, v] : root)
    if (k.str() != "regime")
      return bad(file.string(), line_of(v), std::string(k.str()), "unknown section (expected [[regime]])");
  KDA_ASSIGN_OR_RETURN(auto r, parse_regimes(root, file.string(), def));
  if (r.empty()) return Status::bad_input(file.string() + ": declares no [[regime]]");
  return r;
}

std::map<std::string, nlohmann::json> all_values(const Tunables& t, const Config& c) {
  std::map<std::string, nlohmann::json> out;
  for (const auto& p : t.parameters) {
    auto it = c.params.find(p.name);
    out[p.name] = it != c.params.end() ? it->second : p.values.front();
  }
  return out;
}

bool varies(const Variant& v, const std::string& parameter) {
  return v.parameters.empty() || std::find(v.parameters.begin(), v.parameters.end(), parameter) != v.parameters.end();
}

const Variant* find_variant(const Tunables& t, const std::string& name) {
  for (const auto& v : t.variants)
    if (v.name == name) return &v;
  return nullptr;
}

namespace {

// `c`'s integer and boolean values (true is 1) added to `vars`, for the constraint expressions.
std::map<std::string, int64_t> with_values(std::map<std::string, int64_t> vars, const Tunables& t, const Config& c) {
  for (const auto& [k, v] : all_values(t, c))
    if (v.is_number_integer())
      vars[k] = v.get<int64_t>();
    else if (v.is_boolean())
      vars[k] = v.get<bool>() ? 1 : 0;
  return vars;
}

}  // namespace

Result<const Constraint*> violated_constraint(const Tunables& t, const Config& c) {
  const std::map<std::string, int64_t> vars = with_values({}, t, c);
  for (const auto& con : t.constraints) {
    if (con.uses_axes) continue;
    auto r = con.expression.evaluate(vars);
    if (!r.ok())
      return Status::bad_input(t.file + ":" + std::to_string(con.line) + ": constraint '" + con.expression.text() +
                               "': " + r.status().message());
    if (*r == 0) return &con;
  }
  return static_cast<const Constraint*>(nullptr);
}

Result<std::vector<Config>> enumerate_configs(const Tunables& t) {
  std::vector<Config> out;
  for (const auto& var : t.variants) {
    std::vector<const Parameter*> varying;
    Config base;
    base.variant = var.name;
    for (const auto& p : t.parameters) {
      if (varies(var, p.name)) varying.push_back(&p);
    }
    size_t total = 1;
    for (const Parameter* p : varying) {
      total *= p->values.size();
      if (total > kMaxConfigs)
        return Status::bad_input(t.file + ": variant '" + var.name + "' spans more than 1000000 configurations");
    }
    std::vector<size_t> idx(varying.size(), 0);
    for (size_t n = 0; n < total; ++n) {
      Config c = base;
      for (size_t i = 0; i < varying.size(); ++i) c.params[varying[i]->name] = varying[i]->values[idx[i]];
      KDA_ASSIGN_OR_RETURN(const Constraint* broken, violated_constraint(t, c));
      if (broken == nullptr) out.push_back(std::move(c));
      for (size_t i = varying.size(); i-- > 0;) {  // odometer, last parameter fastest
        if (++idx[i] < varying[i]->values.size()) break;
        idx[i] = 0;
      }
    }
  }
  if (out.empty()) return Status::bad_input(t.file + ": the constraints exclude every configuration");
  return out;
}

Result<bool> applies_to(const Tunables& t, const Config& c, const std::map<std::string, int64_t>& axes) {
  const std::map<std::string, int64_t> vars = with_values(axes, t, c);
  for (const auto& con : t.constraints) {
    if (!con.uses_axes) continue;
    auto r = con.expression.evaluate(vars);
    if (!r.ok())
      return Status::bad_input(t.file + ":" + std::to_string(con.line) + ": constraint '" + con.expression.text() +
                               "': " + r.status().message());
    if (*r == 0) return false;
  }
  return true;
}

}  // namespace kda::tune
