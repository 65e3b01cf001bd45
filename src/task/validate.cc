#include "task/validate.h"

#include <algorithm>
#include <map>
#include <set>
#include <system_error>

#include "task/build_options.h"
#include "task/definition.h"
#include "task/solution.h"
#include "task/task_pack.h"
#include "task/trace.h"
#include "task/workload.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kda::task {

namespace stdfs = std::filesystem;

namespace {

bool has_dataset_dirs(const stdfs::path& dir) {
  std::error_code ec;
  for (const char* sub : {"definitions", "workloads", "solutions", "traces"})
    if (stdfs::is_directory(dir / sub, ec)) return true;
  return false;
}

// Files under `dir` with extension `ext`, sorted (deterministic output).
std::vector<stdfs::path> files_under(const stdfs::path& dir, const std::string& ext) {
  std::vector<stdfs::path> out;
  std::error_code ec;
  if (!stdfs::is_directory(dir, ec)) return out;
  stdfs::recursive_directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec) && it->path().extension() == ext) out.push_back(it->path());
  std::sort(out.begin(), out.end());
  return out;
}

int count_blobs(const Workload& w) {
  return static_cast<int>(std::count_if(w.inputs.begin(), w.inputs.end(), [](const auto& kv) {
    return kv.second.kind == InputSpec::Kind::kSafetensors;
  }));
}

// The definitions (by name) and blob root that a file is checked against.
struct Context {
  std::map<std::string, Definition> definitions;
  std::set<std::string> solutions;  // solution names, when known
  std::optional<stdfs::path> root;  // dataset root or pack directory
  bool known = false;               // false: no enclosing pack/dataset; cross-checks are skipped
};

// Checks workload / trace lines against the definitions of `ctx`.
void check_lines(const std::vector<NumberedTrace>& lines, const std::string& file, const Context& ctx, bool check_blobs,
                 ValidationReport& report) {
  std::set<std::pair<std::string, std::string>> seen;  // (definition, uuid) for workload files
  std::optional<BlobCheck> blobs;
  if (check_blobs && ctx.root) blobs = BlobCheck{*ctx.root};
  for (const auto& [line, t] : lines) {
    if (t.is_workload_only()) {
      ++report.counts.workloads;
      if (!seen.insert({t.definition, t.workload.uuid}).second)
        report.problems.add(file, line, "/workload/uuid", "duplicate workload uuid " + t.workload.uuid);
    } else {
      ++report.counts.traces;
    }
    if (!ctx.known) continue;
    auto it = ctx.definitions.find(t.definition);
    if (it == ctx.definitions.end()) {
      report.problems.add(file, line, "/definition", "unknown definition '" + t.definition + "'");
      continue;
    }
    if (t.solution && !ctx.solutions.empty() && !ctx.solutions.contains(*t.solution))
      report.problems.add(file, line, "/solution", "unknown solution '" + *t.solution + "'");
    if (blobs) report.counts.blobs += count_blobs(t.workload);
    check_workload(it->second, t.workload, file, line, "/workload", report.problems, blobs ? &*blobs : nullptr);
  }
}

void check_solution_context(const Solution& s, const std::string& file, const Context& ctx, ValidationReport& report) {
  if (ctx.known && !ctx.definitions.contains(s.definition))
    report.problems.add(file, 0, "/definition", "unknown definition '" + s.definition + "'");
  if (auto why = not_evaluable_reason(s))
    report.warnings.add(file, 0, "/spec", "valid FlashInfer-Bench, but kda eval cannot evaluate it: " + *why);
  const bool built = s.spec.language == "cpp" || s.spec.language == "cuda";
  // binding "torch": the sources export the entry themselves (FlashInfer-Bench generates no binding).
  if (built && s.spec.binding == "torch" && std::none_of(s.sources.begin(), s.sources.end(), [](const SourceFile& f) {
        return f.content.find("PYBIND11_MODULE") != std::string::npos;
      }))
    report.problems.add(
        file, 0, "/sources",
        "binding \"torch\" needs PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"<entry>\", ...); } "
        "in a source: no source defines it, so neither kda nor FlashInfer-Bench can call the entry point");
  if (const SourceFile* opts = built ? s.source(kBuildOptionsFile) : nullptr) {
    std::vector<std::string> paths;
    for (const auto& src : s.sources) paths.push_back(src.path);
    if (auto parsed = parse_build_options(opts->content, s.spec.language, paths); !parsed.ok())
      report.problems.add(file, 0, "/sources", "kda eval would not build it: " + parsed.status().message());
  }
}

// A solution file as written (the directory form leaves each source's content out) against
// FlashInfer-Bench's own schema: a warning, since kda loads it either way.
void warn_unless_fib_loads(const stdfs::path& path, const std::string& file, ValidationReport& report) {
  std::error_code ec;
  const stdfs::path json_file = stdfs::is_directory(path, ec) ? path / "solution.json" : path;
  auto text = fs::read_file(json_file);
  if (!text.ok()) return;
  const auto j = nlohmann::json::parse(*text, nullptr, false);
  const auto errors = fib_solution_errors(j);
  if (errors.empty()) return;
  const std::string more = errors.size() > 1 ? " (and " + std::to_string(errors.size() - 1) + " more)" : "";
  report.warnings.add(file, 0, "",
                      "FlashInfer-Bench would not load this file as it is: " + errors.front() + more +
                          "; `kda solution export " + path.string() + "` writes the Solution JSON it loads");
}

void validate_dataset(const stdfs::path& root, const ValidationOptions& options, ValidationReport& report) {
  Context ctx;
  ctx.root = root;
  ctx.known = true;
  std::map<std::string, std::string> def_files;
  for (const auto& p : files_under(root / "definitions", ".json")) {
    auto def = load_definition(p, report.problems);
    if (!def) continue;
    ++report.counts.definitions;
    if (auto [it, inserted] = def_files.emplace(def->name, p.string()); !inserted) {
      report.problems.add(p.string(), 0, "/name", "definition name '" + def->name + "' is also used by " + it->second);
      continue;
    }
    ctx.definitions.emplace(def->name, std::move(*def));
  }
  std::map<std::string, std::string> sol_files;
  for (const auto& p : files_under(root / "solutions", ".json")) {
    auto s = load_solution(p, report.problems);
    if (!s) continue;
    ++report.counts.solutions;
    if (auto [it, inserted] = sol_files.emplace(s->name, p.string()); !inserted)
      report.problems.add(p.string(), 0, "/name", "solution name '" + s->name + "' is also used by " + it->second);
    ctx.solutions.insert(s->name);
    check_solution_context(*s, p.string(), ctx, report);
  }
  for (const auto& p : files_under(root / "workloads", ".jsonl"))
    check_lines(load_trace_lines(p, report.problems, /*workloads_only=*/true), p.string(), ctx, !options.schema_only,
                report);
  for (const auto& p : files_under(root / "traces", ".jsonl"))
    check_lines(load_trace_lines(p, report.problems), p.string(), ctx, false, report);
}

void validate_pack(const stdfs::path& dir, const ValidationOptions& options, ValidationReport& report) {
  ++report.counts.packs;
  auto pack = load_task_pack(dir, report.problems);
  if (!pack) return;
  if (const auto& g = pack->settings.inputs_generator; !g.empty() && options.generator_stresses) {
    const std::string file = (dir / "task.toml").string();
    const auto stresses = options.generator_stresses(g);
    if (!stresses)
      report.problems.add(file, 0, "/inputs/generator", "inputs.generator: no generator '" + g + "' in this kda");
    for (const auto& s : pack->settings.stress)
      if (stresses && std::find(stresses->begin(), stresses->end(), s) == stresses->end())
        report.problems.add(file, 0, "/inputs/stress",
                            "inputs.stress: '" + s + "' is not a stress of generator '" + g + "' (known: " +
                                (stresses->empty() ? std::string("none") : util::join(*stresses, ", ")) + ")");
  }
  ++report.counts.definitions;
  report.counts.workloads += static_cast<int>(pack->workloads.size() + pack->holdout.size());
  report.counts.solutions += 1 + static_cast<int>(pack->baselines.size()) + (pack->cpu_reference ? 1 : 0);
  for (const auto* list : {&pack->workloads, &pack->holdout})
    for (const auto& w : *list) report.counts.blobs += count_blobs(w);
  std::error_code ec;
  if (stdfs::exists(dir / "task.toml", ec)) ++report.counts.settings;
}

// A pack's definition, or every definition of a dataset, into `ctx`, loaded quietly: their own problems
// are reported only when they are validated themselves.
void add_pack_definition(const stdfs::path& pack, Context& ctx) {
  Diagnostics quiet;
  if (auto def = load_definition(pack / "definition.json", quiet)) ctx.definitions.emplace(def->name, std::move(*def));
}

void add_dataset_definitions(const stdfs::path& root, Context& ctx) {
  Diagnostics quiet;
  for (const auto& p : files_under(root / "definitions", ".json"))
    if (auto def = load_definition(p, quiet)) ctx.definitions.emplace(def->name, std::move(*def));
}

// The pack or dataset a single file sits in.
Context context_of(const stdfs::path& file) {
  Context ctx;
  std::error_code ec;
  stdfs::path dir = stdfs::absolute(file, ec).parent_path();
  for (int depth = 0; depth < 8 && !dir.empty(); ++depth) {
    if (is_task_pack(dir)) {
      add_pack_definition(dir, ctx);
      ctx.root = dir;
      ctx.known = !ctx.definitions.empty();
      return ctx;
    }
    // Only a dataset with definitions is a context: a repository with a solutions/ folder of its own (kda's
    // solutions/<pack>/<name>/) is not one, and would make every solution's definition unknown.
    if (std::error_code dec; has_dataset_dirs(dir) && stdfs::is_directory(dir / "definitions", dec)) {
      add_dataset_definitions(dir, ctx);
      ctx.root = dir;
      ctx.known = true;
      return ctx;
    }
    if (dir == dir.root_path()) break;
    dir = dir.parent_path();
  }
  return ctx;
}

PathKind kind_of_json(const stdfs::path& path) {
  auto text = fs::read_file(path);
  if (!text.ok()) return PathKind::kUnknown;
  Diagnostics quiet;
  auto j = parse_json_text(*text, path.string(), 0, quiet);
  if (!j || !j->is_object()) return PathKind::kUnknown;
  if (j->contains("spec") || j->contains("sources")) return PathKind::kSolution;
  if (j->contains("axes") || j->contains("reference") || j->contains("op_type")) return PathKind::kDefinition;
  return PathKind::kUnknown;
}

PathKind kind_of_jsonl(const stdfs::path& path) {
  std::string name = path.filename().string();
  if (name == "workloads.jsonl" || name == "holdout.jsonl") return PathKind::kWorkloads;
  for (const auto& part : path.parent_path()) {
    if (part == "workloads") return PathKind::kWorkloads;
    if (part == "traces") return PathKind::kTraces;
  }
  auto text = fs::read_file(path);
  if (!text.ok()) return PathKind::kTraces;
  auto lines = split_jsonl(*text);
  if (lines.empty()) return PathKind::kWorkloads;
  Diagnostics quiet;
  auto j = parse_json_text(lines[0].text, path.string(), 1, quiet);
  if (j && j->is_object() && j->contains("evaluation") && !(*j)["evaluation"].is_null()) return PathKind::kTraces;
  return PathKind::kWorkloads;
}

}  // namespace

std::string_view path_kind_name(PathKind k) {
  switch (k) {
    case PathKind::kDataset: return "dataset";
    case PathKind::kTaskPack: return "task pack";
    case PathKind::kSolutionDir: return "solution directory";
    case PathKind::kDefinition: return "definition";
    case PathKind::kSolution: return "solution";
    case PathKind::kWorkloads: return "workloads";
    case PathKind::kTraces: return "traces";
    case PathKind::kSettings: return "task settings";
    case PathKind::kUnknown: return "unknown";
  }
  return "unknown";
}

PathKind detect_path_kind(const stdfs::path& path) {
  std::error_code ec;
  if (stdfs::is_directory(path, ec)) {
    if (is_task_pack(path)) return PathKind::kTaskPack;
    if (stdfs::is_regular_file(path / "solution.json", ec)) return PathKind::kSolutionDir;
    if (has_dataset_dirs(path)) return PathKind::kDataset;
    return PathKind::kUnknown;
  }
  if (!stdfs::is_regular_file(path, ec)) return PathKind::kUnknown;
  std::string ext = path.extension().string();
  if (ext == ".toml") return PathKind::kSettings;
  if (ext == ".jsonl") return kind_of_jsonl(path);
  if (ext == ".json") return kind_of_json(path);
  return PathKind::kUnknown;
}

nlohmann::json ValidationCounts::to_json() const {
  return {{"definitions", definitions}, {"workloads", workloads}, {"solutions", solutions},
          {"traces", traces},           {"packs", packs},         {"blobs", blobs},
          {"settings", settings}};
}

nlohmann::json ValidationReport::to_json() const {
  auto list = [](const Diagnostics& d) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& item : d.items()) a.push_back(item.to_json());
    return a;
  };
  return {{"valid", valid()}, {"problems", list(problems)}, {"warnings", list(warnings)}, {"counts", counts.to_json()}};
}

namespace {

// The definitions of the task packs and datasets named among `paths`: the context of a solution or workload
// file given beside them that sits in no pack or dataset of its own.
Context context_of_arguments(const std::vector<stdfs::path>& paths) {
  Context ctx;
  for (const auto& path : paths) {
    const PathKind kind = detect_path_kind(path);
    if (kind == PathKind::kTaskPack) add_pack_definition(path, ctx);
    if (kind == PathKind::kDataset) add_dataset_definitions(path, ctx);
  }
  ctx.known = !ctx.definitions.empty();
  return ctx;
}

// context_of(path), or the arguments' packs and datasets where the path has no context of its own.
Context context_for(const stdfs::path& path, const Context& arguments) {
  Context ctx = context_of(path);
  return ctx.known ? ctx : arguments;
}

}  // namespace

ValidationReport validate_paths(const std::vector<stdfs::path>& paths, const ValidationOptions& options) {
  ValidationReport report;
  const Context arguments = context_of_arguments(paths);
  for (const auto& path : paths) {
    std::error_code ec;
    if (!stdfs::exists(path, ec)) {
      report.problems.add(path.string(), 0, "", "no such file or directory");
      continue;
    }
    std::string file = path.string();
    switch (detect_path_kind(path)) {
      case PathKind::kDataset: validate_dataset(path, options, report); break;
      case PathKind::kTaskPack: validate_pack(path, options, report); break;
      case PathKind::kSolutionDir:
      case PathKind::kSolution: {
        auto s = load_solution(path, report.problems);
        if (!s) break;
        ++report.counts.solutions;
        check_solution_context(*s, file, context_for(path, arguments), report);
        for (const auto& name : unlisted_option_files(*s, path))
          report.warnings.add(file, 0, "/sources", unlisted_option_warning(name));
        warn_unless_fib_loads(path, file, report);
        break;
      }
      case PathKind::kDefinition:
        if (load_definition(path, report.problems)) ++report.counts.definitions;
        break;
      case PathKind::kWorkloads:
        check_lines(load_trace_lines(path, report.problems, /*workloads_only=*/true), file,
                    context_for(path, arguments), !options.schema_only, report);
        break;
      case PathKind::kTraces:
        check_lines(load_trace_lines(path, report.problems), file, context_for(path, arguments), false, report);
        break;
      case PathKind::kSettings:
        if (load_settings(path, report.problems)) ++report.counts.settings;
        break;
      case PathKind::kUnknown:
        report.problems.add(file, 0, "",
                            "cannot tell what this is: expected a FlashInfer-Bench dataset or file, a task pack, a "
                            "solution directory or task.toml");
        break;
    }
  }
  return report;
}

}  // namespace kda::task
