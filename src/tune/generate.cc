#include "tune/generate.h"

#include <charconv>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "util/fs.h"

namespace kda::tune {

namespace {

bool is_translation_unit(const std::string& path) {
  static const std::set<std::string> kExts = {".c", ".cc", ".cpp", ".cxx", ".cu"};
  return kExts.count(std::filesystem::path(path).extension().string()) > 0;
}

// The #define block for one configuration; `renames` maps entry functions to per-config names.
std::string define_block(const Tunables& t, const Config& c, const std::string& path,
                         const std::map<std::string, std::string>& renames) {
  std::string s = "// kda tune: configuration " + c.id() + " (" + c.label() + ")\n";
  const auto values = all_values(t, c);
  for (const auto& p : t.parameters) s += "#define " + p.macro + " " + macro_text(values.at(p.name)) + "\n";
  s += "#define KDA_TUNE_CONFIG_ID \"" + c.id() + "\"\n";
  for (const auto& [from, to] : renames) s += "#define " + from + " " + to + "\n";
  // Compiler messages keep pointing at the author's file and line. Not for .cu: nvcc's dependency
  // output names the #line file, which the builder's include check then finds outside the sources.
  if (std::filesystem::path(path).extension() != ".cu") s += "#line 1 \"" + path + "\"\n";
  return s;
}

Result<const Variant*> variant_of(const Tunables& t, const Config& c) {
  const Variant* v = find_variant(t, c.variant);
  if (v == nullptr) return Status::bad_input("configuration " + c.id() + ": unknown variant '" + c.variant + "'");
  return v;
}

std::vector<const task::SourceFile*> variant_sources(const task::Solution& base, const Variant& v) {
  std::vector<const task::SourceFile*> out;
  for (const auto& s : base.sources)
    if (v.sources.empty() || std::find(v.sources.begin(), v.sources.end(), s.path) != v.sources.end())
      out.push_back(&s);
  return out;
}

// The guard's baseline compiled into the dispatcher `s` under baseline/, its entry renamed to
// kda_tune_baseline_<entry>: its prototype and table row follow the configurations'.
Status embed_baseline(const task::Solution& baseline, task::Solution& s, std::string& protos, std::string& table) {
  if (baseline.spec.language != s.spec.language)
    return Status::bad_input("dispatcher: the baseline is " + baseline.spec.language + ", the tuned solution " +
                             s.spec.language);
  const std::string entry_fn = baseline.spec.entry_function();
  const std::string renamed = "kda_tune_baseline_" + entry_fn;
  for (const auto& f : baseline.sources) {
    task::SourceFile out{"baseline/" + f.path, f.content};
    if (is_translation_unit(f.path)) {
      std::string block =
          "// kda tune: the pack's baseline, " + baseline.name + "\n#define " + entry_fn + " " + renamed + "\n";
      if (std::filesystem::path(f.path).extension() != ".cu") block += "#line 1 \"" + f.path + "\"\n";
      out.content = block + f.content;
    }
    s.sources.push_back(std::move(out));
  }
  protos +=
      fmt::format("extern \"C\" int {}(const DLTensor*, int64_t, DLTensor*, int64_t, void*);  // baseline\n", renamed);
  table += fmt::format("    {},\n", renamed);
  return {};
}

}  // namespace

Result<task::Solution> config_solution(const task::Solution& base, const Tunables& t, const Config& c) {
  KDA_ASSIGN_OR_RETURN(const Variant* v, variant_of(t, c));
  task::Solution s = base;
  s.name = base.name + "_" + c.id();
  s.spec.entry_point = v->entry_point;
  s.description = "kda tune configuration " + c.id() + " (" + c.label() + ") of " + base.name;
  s.sources.clear();
  for (const task::SourceFile* f : variant_sources(base, *v)) {
    task::SourceFile out = *f;
    if (is_translation_unit(f->path)) out.content = define_block(t, c, f->path, {}) + f->content;
    s.sources.push_back(std::move(out));
  }
  return s;
}

namespace {

// A --param value as the parameter's declared values are typed: the declared value whose macro text it is
// (so `true` and `1` for a boolean, `4` and `+4`... name one configuration, one id), else an integer, a
// boolean, or macro text.
nlohmann::json typed_value(const std::string& text, const Parameter& p) {
  for (const auto& v : p.values)
    if (macro_text(v) == text || (v.is_boolean() && text == (v.get<bool>() ? "true" : "false"))) return v;
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc() && end == text.data() + text.size() && !text.empty()) return v;
  if (text == "true" || text == "false") return text == "true";
  return text;
}

std::string names_of(const Tunables& t) {
  std::string out;
  for (const auto& p : t.parameters) out += (out.empty() ? "" : ", ") + p.name;
  return out.empty() ? "none" : out;
}

}  // namespace

Result<Configured> configured_solution(const task::Solution& base, const std::filesystem::path& dir,
                                       const task::Definition& def, const std::vector<std::string>& assignments) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    return Status::bad_input("--param: " + dir.string() +
                             " is not a solution directory (its tunables.toml lives beside solution.json)");
  std::vector<std::string> paths;
  for (const auto& f : base.sources) paths.push_back(f.path);
  KDA_ASSIGN_OR_RETURN(Tunables t, load_tunables(dir, def, base.spec.entry_point, paths));
  Configured out;
  out.config.variant = t.variants.front().name;
  std::map<std::string, nlohmann::json> set;
  for (const auto& a : assignments) {
    const size_t eq = a.find('=');
    if (eq == std::string::npos || eq == 0) return Status::bad_input("--param '" + a + "': expected NAME=VALUE");
    const std::string name = a.substr(0, eq), text = a.substr(eq + 1);
    if (name == "variant") {
      if (find_variant(t, text) == nullptr) {
        std::string variants;
        for (const auto& v : t.variants) variants += (variants.empty() ? "" : ", ") + v.name;
        return Status::bad_input(
            fmt::format("--param {}: {} has no variant '{}' (it has {})", a, t.file, text, variants));
      }
      out.config.variant = text;
      continue;
    }
    const auto p =
        std::find_if(t.parameters.begin(), t.parameters.end(), [&](const Parameter& x) { return x.name == name; });
    if (p == t.parameters.end())
      return Status::bad_input(
          fmt::format("--param {}: {} has no parameter {} (it has {})", a, t.file, name, names_of(t)));
    set[name] = typed_value(text, *p);
    if (set[name].is_string() && !is_macro_safe(text))
      return Status::bad_input(fmt::format("--param {}: the value is not one line of macro text", a));
    if (set[name].is_string() && p->binding == Binding::kTemplate && !is_identifier(text))
      return Status::bad_input(
          fmt::format("--param {}: {} binds {} as a template argument: an integer or an identifier", a, t.file, name));
    if (std::find(p->values.begin(), p->values.end(), set[name]) == p->values.end()) {
      std::string declared;
      for (const auto& v : p->values) declared += (declared.empty() ? "" : ", ") + v.dump();
      out.notes.push_back(fmt::format("{}={} is not among the values {} declares for it ({}): built as given", name,
                                      text, t.file, declared));
    }
  }
  const Variant* variant = find_variant(t, out.config.variant);
  for (const auto& p : t.parameters) {
    const bool varied = varies(*variant, p.name);
    if (!varied && set.count(p.name))
      return Status::bad_input(
          fmt::format("--param {}=...: variant '{}' of {} does not vary {}", p.name, variant->name, t.file, p.name));
    if (varied) out.config.params[p.name] = set.count(p.name) ? set[p.name] : p.values.front();
  }
  const Result<const Constraint*> broken = violated_constraint(t, out.config);
  if (!broken.ok())  // a value the constraints cannot read (macro text where they compare numbers)
    return Status::bad_input("--param " + out.config.label() + ": " + broken.status().message());
  if (*broken != nullptr)
    return Status::bad_input(fmt::format("--param: {} breaks the constraint '{}' ({}:{})", out.config.label(),
                                         (*broken)->expression.text(), t.file, (*broken)->line));
  std::string per_workload;
  for (const auto& c : t.constraints)
    if (c.uses_axes) per_workload += (per_workload.empty() ? "'" : ", '") + c.expression.text() + "'";
  if (!per_workload.empty())
    out.notes.push_back(
        fmt::format("{} also constrains configurations per workload ({}): kda tune measures one only "
                    "where they hold; this evaluation takes every selected workload",
                    t.file, per_workload));
  KDA_ASSIGN_OR_RETURN(out.solution, config_solution(base, t, out.config));
  return out;
}

Result<std::vector<AxisSource>> axis_sources(const task::Definition& def) {
  std::vector<AxisSource> out;
  for (const auto& axis : def.var_axes()) {
    bool found = false;
    for (int side = 0; side < 2 && !found; ++side) {
      const auto& tensors = side == 0 ? def.inputs : def.outputs;
      for (size_t i = 0; i < tensors.size() && !found; ++i) {
        if (!tensors[i].shape) continue;
        for (size_t d = 0; d < tensors[i].shape->size(); ++d)
          if ((*tensors[i].shape)[d] == axis) {
            out.push_back({axis, side == 1, i, d});
            found = true;
            break;
          }
      }
    }
    if (!found)
      return Status::bad_input("definition " + def.name + ": var axis '" + axis + "' is in no tensor's shape");
  }
  return out;
}

namespace {

// The generated kda_dispatch source: the entries' prototypes and table, the routes, how a shape no
// route matches is served, the axis reads, and the entry `fn` that routes each call.
struct DispatchText {
  std::string axis_list, protos, table, rows, points, slower, reads, fn;
  size_t n_axes = 0, fallback = 0, beyond = 0;
  int rule = 0;  // Unmatched::Rule as a number
  int factor = 2;
  double reach = 0;  // Unmatched::reach (log2); infinite: no limit
};

// The generated code's helpers for shapes no route matches (plain text, not a format string).
constexpr std::string_view kUnmatchedHelpers =
    R"(// How far the shape lies outside a route's ranges, as the fraction num / den = 2^(kda tune's
// shape_distance): per axis lo / v below the range and v / hi above it. Routes are compared by
// cross-multiplying, so a call pays no division or log2 per route (a sub-us call cannot).
void distance(const Route& r, const int64_t* axes, double* num, double* den) {
  *num = 1;
  *den = 1;
  for (int a = 0; a < kAxes; ++a) {
    const double v = axes[a] >= 1 ? (double)axes[a] : 0.5;
    if (axes[a] < r.lo[a]) {
      *num *= (double)r.lo[a];
      *den *= v;
    }
    if (axes[a] > r.hi[a]) {
      *num *= v;
      *den *= r.hi[a] >= 1 ? (double)r.hi[a] : 0.5;
    }
  }
}

// The nearest of `rs` (the first on a tie), or nullptr; its distance in *num / *den.
const Route* nearest(const Route* rs, const int64_t* axes, double* num, double* den) {
  const Route* best = nullptr;
  for (const Route* r = rs; r->config != kEnd; ++r) {
    double n, d;
    distance(*r, axes, &n, &d);
    if (best == nullptr || n * *den < *num * d) {
      best = r;
      *num = n;
      *den = d;
    }
  }
  return best;
}

// Whether a distance num / den lies within the rule's reach (2^reach; kda tune checked the rule no
// farther out).
bool within_reach(double num, double den) { return !kCapped || num <= den * kReachRatio; }

// The margin rule: the nearest point's target; kBeyondReach where that point lies beyond the reach;
// -1 (the fallback) where it is vetoed (kda tune's check of the rule failed there) or a point where
// its target is slower lies less than kMarginFactor times as far (in log2) away.
int margin(const int64_t* axes) {
  double num = 1, den = 1;
  const Route* p = nearest(kPoints, axes, &num, &den);
  if (p == nullptr) return -1;
  if (!within_reach(num, den)) return kBeyondReach;
  if (p->config == kVetoed) return -1;
  double pn = 1, pd = 1;  // (num / den)^kMarginFactor
  for (int i = 0; i < kMarginFactor; ++i) {
    pn *= num;
    pd *= den;
  }
  for (const Route* q = kSlower; q->config != kEnd; ++q) {
    if (q->config != p->config) continue;
    double n, d;
    distance(*q, axes, &n, &d);
    if (!(pn * d < n * pd)) return -1;
  }
  return p->config;
}

// The entry for `axes`: the first route whose ranges hold, else the rule for unmatched shapes.
int route(const int64_t* axes) {
  for (const Route* r = kRoutes; r->config != kEnd; ++r) {
    bool match = true;
    for (int a = 0; a < kAxes; ++a) match = match && axes[a] >= r->lo[a] && axes[a] <= r->hi[a];
    if (match) return r->config;
  }
  if (kRule == 1) {
    double num = 1, den = 1;
    const Route* r = nearest(kRoutes, axes, &num, &den);
    if (r != nullptr) return within_reach(num, den) ? r->config : kBeyondReach;
  }
  if (kRule == 2) {
    const int c = margin(axes);
    if (c >= 0) return c;
  }
  return kFallback;
}

// The last shape routed and its entry, behind a sequence lock: odd while a writer stores, so a reader
// that saw the same even count before and after read one consistent pair. A writer that finds the
// lock taken skips the store; the memo is only ever a shortcut to route()'s answer.
struct Memo {
  std::atomic<uint64_t> seq{0};
  std::atomic<int64_t> axes[kAxes > 0 ? kAxes : 1];
  std::atomic<int> entry{-1};
};
Memo g_memo;

int memo_get(const int64_t* axes) {
  const uint64_t s0 = g_memo.seq.load(std::memory_order_acquire);
  if (s0 & 1) return -1;
  const int e = g_memo.entry.load(std::memory_order_relaxed);
  bool same = e >= 0;
  for (int a = 0; a < kAxes; ++a) same = same && g_memo.axes[a].load(std::memory_order_relaxed) == axes[a];
  std::atomic_thread_fence(std::memory_order_acquire);
  return same && g_memo.seq.load(std::memory_order_relaxed) == s0 ? e : -1;
}

void memo_put(const int64_t* axes, int e) {
  uint64_t s0 = g_memo.seq.load(std::memory_order_relaxed);
  if ((s0 & 1) || !g_memo.seq.compare_exchange_strong(s0, s0 + 1, std::memory_order_acquire)) return;
  std::atomic_thread_fence(std::memory_order_release);
  for (int a = 0; a < kAxes; ++a) g_memo.axes[a].store(axes[a], std::memory_order_relaxed);
  g_memo.entry.store(e, std::memory_order_relaxed);
  g_memo.seq.store(s0 + 2, std::memory_order_release);
}

)";

std::string dispatch_source(const DispatchText& t) {
  return fmt::format(
      R"(// Generated by kda tune: routes each call to the configuration tuned for its shape regime.
// Reads only tensor shapes (axes: {axis_list}), never tensor data.
#include <dlpack/dlpack.h>
#include <stdint.h>

#include <atomic>

{protos}
namespace {{

typedef int (*Entry)(const DLTensor*, int64_t, DLTensor*, int64_t, void*);
constexpr int kAxes = {n_axes};
struct Route {{
  int config;
  int64_t lo[kAxes > 0 ? kAxes : 1];
  int64_t hi[kAxes > 0 ? kAxes : 1];
}};

constexpr int kEnd = -1, kVetoed = -2;  // a table's last row; a point where the rule's check failed
const Entry kEntries[] = {{
{table}}};
const Route kRoutes[] = {{
{rows}    {{kEnd, {{0}}, {{0}}}},
}};
// Visible workloads (lo = hi = the shape) and where each is routed (kVetoed: the fallback serves the
// shapes nearest to it); then, per target, the visible workloads where it was slower than the
// baseline. Used by the margin rule only.
const Route kPoints[] = {{
{points}    {{kEnd, {{0}}, {{0}}}},
}};
const Route kSlower[] = {{
{slower}    {{kEnd, {{0}}, {{0}}}},
}};
constexpr int kFallback = {fallback};
// A shape beyond the rule's reach: {beyond_what}.
constexpr int kBeyondReach = {beyond};
// A shape no route matches: {unmatched}.
constexpr int kRule = {rule};  // 0: the fallback, 1: the nearest route, 2: the margin rule
constexpr int kMarginFactor = {factor};
// The rule's reach as a ratio, 2^{reach_log2} (kCapped false: no limit).
constexpr bool kCapped = {capped};
constexpr double kReachRatio = {reach_ratio};

{helpers}bool read_axes(const DLTensor* inputs, int64_t num_inputs, DLTensor* outputs, int64_t num_outputs, int64_t* axes) {{
  (void)inputs; (void)num_inputs; (void)outputs; (void)num_outputs; (void)axes;
{reads}  return true;
}}

}}  // namespace

extern "C" __attribute__((visibility("default"))) int {fn}(const DLTensor* inputs, int64_t num_inputs,
                                                          DLTensor* outputs, int64_t num_outputs, void* stream) {{
  int64_t axes[kAxes > 0 ? kAxes : 1] = {{0}};
  if (!read_axes(inputs, num_inputs, outputs, num_outputs, axes))
    return kEntries[kFallback](inputs, num_inputs, outputs, num_outputs, stream);
  int e = memo_get(axes);
  if (e < 0) {{
    e = route(axes);
    memo_put(axes, e);
  }}
  return kEntries[e](inputs, num_inputs, outputs, num_outputs, stream);
}}
)",
      fmt::arg("axis_list", t.axis_list), fmt::arg("protos", t.protos), fmt::arg("n_axes", t.n_axes),
      fmt::arg("table", t.table), fmt::arg("rows", t.rows), fmt::arg("points", t.points), fmt::arg("slower", t.slower),
      fmt::arg("fallback", t.fallback), fmt::arg("beyond", t.beyond),
      fmt::arg("beyond_what", t.beyond == t.fallback ? "the fallback" : "kda tune's choice there (the baseline)"),
      fmt::arg("reads", t.reads), fmt::arg("fn", t.fn), fmt::arg("rule", t.rule), fmt::arg("factor", t.factor),
      fmt::arg("helpers", kUnmatchedHelpers), fmt::arg("capped", std::isfinite(t.reach) ? "true" : "false"),
      fmt::arg("reach_log2", std::isfinite(t.reach) ? fmt::format("{:.4f}", t.reach) : std::string("inf")),
      fmt::arg("reach_ratio", std::isfinite(t.reach) ? fmt::format("{:.17g}", std::exp2(t.reach) * (1 + 1e-9)) : "0"),
      fmt::arg("unmatched", t.rule == 1   ? "the route whose ranges are nearest, within the reach; else the fallback"
                            : t.rule == 2 ? "the margin rule's target, within the reach; else the fallback"
                                          : "the fallback"));
}

// The row config of a margin-rule point where the rule's check failed (kVetoed in the generated file).
constexpr int64_t kVetoedRow = -2;

// One row of a table of routes: `{config, {lo...}, {hi...}},` over the var axes in `sources` (an axis
// not in `ranges` matches anything); an axis of `ranges` that is not a var axis is an error.
Result<std::string> table_row(const std::vector<AxisSource>& sources,
                              const std::map<std::string, std::pair<int64_t, int64_t>>& ranges, int64_t config) {
  std::string lo, hi;
  for (size_t a = 0; a < sources.size(); ++a) {
    auto it = ranges.find(sources[a].axis);
    lo += fmt::format("{}{}", a ? ", " : "", it == ranges.end() ? "INT64_MIN" : std::to_string(it->second.first));
    hi += fmt::format("{}{}", a ? ", " : "", it == ranges.end() ? "INT64_MAX" : std::to_string(it->second.second));
  }
  for (const auto& [axis, _] : ranges) {
    bool known = false;
    for (const auto& src : sources) known |= src.axis == axis;
    if (!known) return Status::bad_input("'" + axis + "' is not a var axis");
  }
  return fmt::format("    {{{}, {{{}}}, {{{}}}}},",
                     config == kVetoedRow ? std::string("kVetoed") : std::to_string(config), lo, hi);
}

}  // namespace

Result<task::Solution> dispatcher_solution(const task::Solution& base, const task::Definition& def, const Tunables& t,
                                           const std::vector<Config>& configs, const std::vector<Route>& routes,
                                           size_t fallback, const task::Solution* baseline,
                                           const Unmatched& unmatched) {
  if (configs.empty() || fallback >= configs.size() + (baseline != nullptr ? 1 : 0))
    return Status::internal("dispatcher: no fallback configuration");
  KDA_ASSIGN_OR_RETURN(auto sources, axis_sources(def));
  task::Solution s = base;
  s.name = base.name + "_dispatch";
  s.sources.clear();
  std::string fn_name = base.spec.entry_function();
  std::string protos, table;
  for (size_t i = 0; i < configs.size(); ++i) {
    KDA_ASSIGN_OR_RETURN(const Variant* v, variant_of(t, configs[i]));
    const std::string dir = fmt::format("c{}", i);
    const auto pos = v->entry_point.find("::");
    const std::string entry_fn = v->entry_point.substr(pos + 2);
    const std::string renamed = fmt::format("kda_tune_c{}_{}", i, entry_fn);
    // Every entry function any variant (or solution.json) names gets a per-config name, so the
    // other variants' entries compiled along in these sources cannot collide across configs or
    // with the dispatcher's own entry.
    std::map<std::string, std::string> renames{{base.spec.entry_function(), ""}};
    for (const auto& var : t.variants) renames[var.entry_point.substr(var.entry_point.find("::") + 2)] = "";
    for (auto& [from, to] : renames) to = fmt::format("kda_tune_c{}_{}", i, from);
    for (const task::SourceFile* f : variant_sources(base, *v)) {
      task::SourceFile out{dir + "/" + f->path, f->content};
      if (is_translation_unit(f->path)) out.content = define_block(t, configs[i], f->path, renames) + f->content;
      s.sources.push_back(std::move(out));
    }
    protos += fmt::format("extern \"C\" int {}(const DLTensor*, int64_t, DLTensor*, int64_t, void*);  // {}\n", renamed,
                          configs[i].label());
    table += fmt::format("    {},\n", renamed);
  }
  if (baseline != nullptr) KDA_RETURN_IF_ERROR(embed_baseline(*baseline, s, protos, table));
  const size_t targets = configs.size() + (baseline != nullptr ? 1 : 0);
  const size_t n_axes = sources.size();
  std::string reads;
  for (size_t a = 0; a < n_axes; ++a) {
    const auto& src = sources[a];
    const auto& spec = src.output ? def.outputs[src.tensor] : def.inputs[src.tensor];
    const char* arr = src.output ? "outputs" : "inputs";
    const char* count = src.output ? "num_outputs" : "num_inputs";
    reads += fmt::format(
        "  if ({count} <= {t} || {arr}[{t}].ndim != {rank}) return false;\n"
        "  axes[{a}] = {arr}[{t}].shape[{d}];  // {axis}\n",
        fmt::arg("count", count), fmt::arg("t", src.tensor), fmt::arg("arr", arr), fmt::arg("rank", spec.shape->size()),
        fmt::arg("a", a), fmt::arg("d", src.dim), fmt::arg("axis", src.axis));
  }
  auto label = [&](size_t c) { return c < configs.size() ? configs[c].label() : std::string("the baseline"); };
  std::string rows, points, slower;
  for (const auto& r : routes) {
    if (r.config >= targets) return Status::internal("dispatcher: route to a missing configuration");
    auto row = table_row(sources, r.ranges, r.config);
    if (!row.ok()) return Status::bad_input("regime '" + r.regime + "': " + row.status().message());
    rows += fmt::format("{}  // {}: {}\n", *row, r.regime, label(r.config));
  }
  if (unmatched.beyond && *unmatched.beyond >= targets)
    return Status::internal("dispatcher: the target beyond the reach is a missing configuration");
  for (int side = 0; side < 2 && unmatched.rule == Unmatched::Rule::kMargin; ++side) {
    for (const auto& p : side == 0 ? unmatched.points : unmatched.slower) {
      if (p.config >= targets) return Status::internal("dispatcher: a point of a missing configuration");
      std::map<std::string, std::pair<int64_t, int64_t>> at;
      for (const auto& [axis, v] : p.axes) at[axis] = {v, v};
      const bool vetoed = side == 0 && p.vetoed;
      KDA_ASSIGN_OR_RETURN(std::string row,
                           table_row(sources, at, vetoed ? kVetoedRow : static_cast<int64_t>(p.config)));
      (side == 0 ? points : slower) += fmt::format(
          "{}  // {}\n", row, vetoed ? "vetoed (was " + label(p.config) + "): the fallback" : label(p.config));
    }
  }
  std::string axis_list;
  for (const auto& src : sources) axis_list += (axis_list.empty() ? "" : ", ") + src.axis;
  const std::string dispatch = dispatch_source({.axis_list = axis_list,
                                                .protos = protos,
                                                .table = table,
                                                .rows = rows,
                                                .points = points,
                                                .slower = slower,
                                                .reads = reads,
                                                .fn = fn_name,
                                                .n_axes = n_axes,
                                                .fallback = fallback,
                                                .beyond = unmatched.beyond.value_or(fallback),
                                                .rule = static_cast<int>(unmatched.rule),
                                                .factor = unmatched.factor,
                                                .reach = unmatched.reach});
  const std::string dispatch_file = base.spec.language == "cuda" ? "kda_dispatch.cu" : "kda_dispatch.cc";
  s.sources.push_back({dispatch_file, dispatch});
  s.spec.entry_point = dispatch_file + "::" + fn_name;
  std::string desc = "kda tune dispatcher over " + std::to_string(configs.size()) + " configurations of " + base.name +
                     (baseline != nullptr ? " and the baseline " + baseline->name : "");
  s.description = desc;
  return s;
}

Status write_solution_dir(const task::Solution& s, const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  KDA_RETURN_IF_ERROR(fs::ensure_dir(dir));
  nlohmann::json j = s.to_json();
  for (auto& src : j["sources"]) src.erase("content");
  for (const auto& src : s.sources) {
    const auto path = dir / src.path;
    KDA_RETURN_IF_ERROR(fs::ensure_dir(path.parent_path()));
    KDA_RETURN_IF_ERROR(fs::write_file_atomic(path, src.content));
  }
  return fs::write_file_atomic(dir / "solution.json", j.dump(2) + "\n");
}

}  // namespace kda::tune
