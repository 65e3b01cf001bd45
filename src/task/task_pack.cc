#include "task/task_pack.h"

#include <algorithm>
#include <set>
#include <system_error>

#include <fmt/format.h>

#include "task/trace.h"

namespace kda::task {

namespace stdfs = std::filesystem;

namespace {

// Workload lines of one file, checked against the definition; uuids must be unique across `seen`.
std::vector<Workload> load_pack_workloads(const stdfs::path& file, const Definition& def, const stdfs::path& root,
                                          std::set<std::string>& seen, Diagnostics& diags) {
  std::vector<Workload> out;
  BlobCheck blobs{root};
  std::string name = file.string();
  for (auto& [line, t] : load_trace_lines(file, diags, /*workloads_only=*/true)) {
    if (t.definition != def.name)
      diags.add(name, line, "/definition",
                "workload " + t.workload.uuid + " is for definition '" + t.definition + "', not '" + def.name + "'");
    if (!seen.insert(t.workload.uuid).second)
      diags.add(name, line, "/workload/uuid", "duplicate workload uuid " + t.workload.uuid);
    check_workload(def, t.workload, name, line, "/workload", diags, &blobs);
    out.push_back(std::move(t.workload));
  }
  return out;
}

std::optional<Solution> load_pack_solution(const stdfs::path& root, const std::string& dir, const Definition& def,
                                           const std::string& what, Diagnostics& diags) {
  if (!is_safe_relative_path(dir)) {
    diags.add((root / "task.toml").string(), 0, "", what + " directory \"" + dir + "\" must be relative, without '..'");
    return std::nullopt;
  }
  stdfs::path path = root / dir;
  std::error_code ec;
  if (!stdfs::is_directory(path, ec)) {
    diags.add(path.string(), 0, "", what + " solution directory is missing");
    return std::nullopt;
  }
  auto s = load_solution(path, diags);
  if (s && s->definition != def.name) {
    diags.add((path / "solution.json").string(), 0, "/definition",
              what + " is for definition '" + s->definition + "', not '" + def.name + "'");
    return std::nullopt;
  }
  return s;
}

// The [roofline] formulas name axes of the definition and evaluate on every workload.
void check_roofline(const TaskPack& pack, const std::string& toml_file, Diagnostics& diags) {
  for (const auto& [key, expr] :
       {std::pair{"bytes", &pack.settings.roofline_bytes}, std::pair{"flops", &pack.settings.roofline_flops}}) {
    if (!*expr) continue;
    std::string ptr = std::string("/roofline/") + key;
    bool names_ok = true;
    for (const auto& id : (*expr)->identifiers()) {
      if (pack.definition.axis(id) == nullptr) {
        diags.add(toml_file, 0, ptr,
                  std::string("roofline.") + key + ": '" + id + "' is not an axis of the definition");
        names_ok = false;
      }
    }
    if (!names_ok) continue;
    for (const auto* list : {&pack.workloads, &pack.holdout}) {
      for (const auto& w : *list) {
        auto axes = workload_axes(pack.definition, w);
        if (!axes.ok()) continue;
        auto v = (*expr)->evaluate(*axes);
        if (!v.ok()) {
          diags.add(toml_file, 0, ptr,
                    std::string("roofline.") + key + " for workload " + w.uuid + ": " + v.status().message());
          break;
        }
      }
    }
  }
}

}  // namespace

const Workload* TaskPack::workload(const std::string& uuid) const {
  for (const auto* list : {&workloads, &holdout})
    for (const auto& w : *list)
      if (w.uuid == uuid) return &w;
  return nullptr;
}

Result<const Workload*> TaskPack::visible_workload(const std::string& id) const {
  std::vector<const Workload*> starts;
  for (const auto& w : workloads) {
    if (w.uuid == id) return &w;
    if (!id.empty() && w.uuid.starts_with(id)) starts.push_back(&w);
  }
  if (starts.empty()) return Status::bad_input(fmt::format("no workload '{}' in {}", id, root.string()));
  if (starts.size() > 1) {
    std::string names;
    for (size_t i = 0; i < starts.size() && i < 4; ++i) names += (i ? ", " : "") + starts[i]->uuid;
    return Status::bad_input(fmt::format("'{}' is the start of {} workloads of {} ({}{}); give more of it", id,
                                         starts.size(), root.string(), names, starts.size() > 4 ? ", ..." : ""));
  }
  return starts.front();
}

const Solution* TaskPack::baseline() const {
  auto it = baselines.find(baseline_name);
  return it == baselines.end() ? nullptr : &it->second;
}

std::map<std::string, stdfs::path> fib_definition_files(const stdfs::path& dataset_root) {
  std::map<std::string, stdfs::path> out;
  std::error_code ec;
  for (auto it = stdfs::recursive_directory_iterator(dataset_root / "definitions", ec);
       !ec && it != stdfs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec) || it->path().extension() != ".json") continue;
    Diagnostics quiet;
    if (auto def = load_definition(it->path(), quiet)) out.emplace(def->name, it->path());
  }
  return out;
}

Result<TaskPack> load_fib_definition(const stdfs::path& dataset_root, const std::string& name, Backend backend) {
  std::error_code ec;
  if (!stdfs::is_directory(dataset_root / "definitions", ec))
    return Status::not_found(dataset_root.string() + ": not a FlashInfer-Bench dataset (no definitions/ directory)");
  const auto defs = fib_definition_files(dataset_root);
  const auto found = defs.find(name);
  if (found == defs.end()) {
    std::string names;
    for (const auto& [n, f] : defs) names += (names.empty() ? "" : ", ") + n;
    return Status::not_found(dataset_root.string() + ": no definition '" + name +
                             "' (definitions: " + (names.empty() ? "none" : names) + ")");
  }
  Diagnostics diags;
  TaskPack pack;
  pack.root = dataset_root;
  pack.definition_file = found->second;
  pack.python_reference_only = true;
  pack.backend = backend;
  auto def = load_definition(found->second, diags);
  if (!def) return diagnostics_status(diags);
  pack.definition = std::move(*def);
  if (pack.definition.reference.empty())
    return Status::bad_input(found->second.string() +
                             ": /reference: the definition has no Python reference to judge by");
  std::set<std::string> uuids;
  for (auto it = stdfs::recursive_directory_iterator(dataset_root / "workloads", ec);
       !ec && it != stdfs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec) || it->path().filename() != name + ".jsonl") continue;
    auto ws = load_pack_workloads(it->path(), pack.definition, dataset_root, uuids, diags);
    pack.workloads.insert(pack.workloads.end(), ws.begin(), ws.end());
  }
  if (!diags.empty()) return diagnostics_status(diags);
  if (pack.workloads.empty())
    return Status::bad_input(dataset_root.string() + ": no workloads for '" + name + "' (workloads/**/" + name +
                             ".jsonl)");
  pack.dev_uuids = default_dev_uuids(pack.workloads);
  return pack;
}

bool is_task_pack(const stdfs::path& dir) {
  std::error_code ec;
  return stdfs::is_regular_file(dir / "definition.json", ec);
}

std::vector<std::string> default_dev_uuids(const std::vector<Workload>& workloads, size_t count) {
  std::vector<std::string> out;
  size_t n = workloads.size();
  if (n <= count) {
    for (const auto& w : workloads) out.push_back(w.uuid);
    return out;
  }
  for (size_t i = 0; i < count; ++i) {
    size_t idx = count == 1 ? 0 : i * (n - 1) / (count - 1);
    if (out.empty() || out.back() != workloads[idx].uuid) out.push_back(workloads[idx].uuid);
  }
  return out;
}

std::optional<TaskPack> load_task_pack(const stdfs::path& dir, Diagnostics& diags) {
  size_t before = diags.size();
  std::error_code ec;
  if (!stdfs::is_directory(dir, ec)) {
    diags.add(dir.string(), 0, "", "task pack directory does not exist");
    return std::nullopt;
  }
  TaskPack pack;
  pack.root = dir;
  pack.definition_file = dir / "definition.json";
  std::string toml_file = (dir / "task.toml").string();

  // Phase 1: definition and settings.
  auto def = load_definition(dir / "definition.json", diags);
  if (!def) return std::nullopt;
  pack.definition = std::move(*def);
  if (stdfs::exists(dir / "task.toml", ec)) {
    auto s = load_settings(dir / "task.toml", diags);
    if (s) pack.settings = std::move(*s);
  }
  const TaskSettings& st = pack.settings;

  // Phase 2: workloads (public and holdout), checked against the definition and blobs.
  std::set<std::string> uuids;
  if (!stdfs::exists(dir / "workloads.jsonl", ec)) {
    diags.add((dir / "workloads.jsonl").string(), 0, "", "workloads.jsonl is missing");
  } else {
    pack.workloads = load_pack_workloads(dir / "workloads.jsonl", pack.definition, dir, uuids, diags);
    if (pack.workloads.empty() && diags.size() == before)
      diags.add((dir / "workloads.jsonl").string(), 0, "", "no workloads");
  }
  if (stdfs::exists(dir / "holdout.jsonl", ec))
    pack.holdout = load_pack_workloads(dir / "holdout.jsonl", pack.definition, dir, uuids, diags);

  // Phase 3: reference, CPU reference and baselines.
  if (auto ref = load_pack_solution(dir, st.reference_dir, pack.definition, "reference", diags))
    pack.reference = std::move(*ref);
  if (st.cpu_reference_dir)
    pack.cpu_reference = load_pack_solution(dir, *st.cpu_reference_dir, pack.definition, "CPU reference", diags);
  if (stdfs::is_directory(dir / "baselines", ec)) {
    std::vector<std::string> names;
    for (const auto& e : stdfs::directory_iterator(dir / "baselines", ec))
      if (e.is_directory(ec)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    for (const auto& n : names)
      if (auto b = load_pack_solution(dir, "baselines/" + n, pack.definition, "baseline '" + n + "'", diags))
        pack.baselines[n] = std::move(*b);
    if (!st.baseline_name.empty())
      pack.baseline_name = st.baseline_name;
    else if (names.size() == 1)
      pack.baseline_name = names[0];
    else if (std::find(names.begin(), names.end(), "naive") != names.end())
      pack.baseline_name = "naive";
    else if (!names.empty())
      diags.add(toml_file, 0, "/baseline/name", "several baselines; name one in [baseline] name");
    if (!pack.baseline_name.empty() && std::find(names.begin(), names.end(), pack.baseline_name) == names.end())
      diags.add(toml_file, 0, "/baseline/name",
                "baseline '" + pack.baseline_name + "' is not a directory under baselines/");
  } else if (!st.baseline_name.empty()) {
    diags.add(toml_file, 0, "/baseline/name", "baseline '" + st.baseline_name + "' named but baselines/ is missing");
  }

  // Phase 4: settings that refer to the rest of the pack.
  if (st.backend) {
    pack.backend = *st.backend;
  } else if (pack.reference.spec.language == "cpp") {
    pack.backend = Backend::kHost;
  } else if (pack.reference.spec.language == "cuda") {
    pack.backend = Backend::kCuda;
  } else if (!pack.reference.spec.language.empty()) {
    diags.add(toml_file, 0, "/evaluation/backend",
              "cannot imply the backend from reference language '" + pack.reference.spec.language +
                  "'; set evaluation.backend");
  }
  for (const auto& [input, list] : st.probes) {
    const TensorSpec* spec = nullptr;
    for (const auto& in : pack.definition.inputs)
      if (in.name == input) spec = &in;
    if (spec == nullptr)
      diags.add(toml_file, 0, "/probes/" + input, "'" + input + "' is not an input of '" + pack.definition.name + "'");
    else if (spec->is_scalar() || !tensor::is_float(spec->dtype))
      diags.add(toml_file, 0, "/probes/" + input,
                "probes apply to floating-point tensor inputs; '" + input + "' is " +
                    (spec->is_scalar() ? "a scalar" : "not floating-point"));
  }
  for (const auto& o : st.compare_outputs)
    if (pack.definition.output(o) == nullptr)
      diags.add(toml_file, 0, "/evaluation/compare_outputs",
                "'" + o + "' is not an output of '" + pack.definition.name + "'");
  if (!st.dev_workloads.empty()) {
    for (const auto& u : st.dev_workloads) {
      bool found =
          std::any_of(pack.workloads.begin(), pack.workloads.end(), [&](const Workload& w) { return w.uuid == u; });
      if (!found)
        diags.add(toml_file, 0, "/evaluation/dev_workloads", "dev workload " + u + " is not in workloads.jsonl");
    }
    pack.dev_uuids = st.dev_workloads;
  } else {
    pack.dev_uuids = default_dev_uuids(pack.workloads);
  }
  check_roofline(pack, toml_file, diags);
  if (diags.size() > before) return std::nullopt;
  return pack;
}

Result<TaskPack> load_task_pack(const stdfs::path& dir) {
  std::error_code ec;
  if (!stdfs::is_directory(dir, ec)) return Status::not_found(dir.string() + ": task pack directory does not exist");
  Diagnostics diags;
  auto pack = load_task_pack(dir, diags);
  if (!pack) return diagnostics_status(diags);
  return std::move(*pack);
}

std::vector<stdfs::path> find_task_packs(const stdfs::path& dir) {
  std::vector<stdfs::path> out;
  std::error_code ec;
  if (is_task_pack(dir)) return {dir};
  stdfs::recursive_directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    if (!it->is_directory(ec)) continue;
    if (is_task_pack(it->path())) {
      out.push_back(it->path());
      it.disable_recursion_pending();
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace kda::task
