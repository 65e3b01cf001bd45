// `kda task validate|list|show`: check FlashInfer-Bench datasets and kda task packs, list packs, describe one.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <ostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "eval/inputs.h"
#include "task/manifest.h"
#include "task/task_pack.h"
#include "task/validate.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kda::cli {

namespace {

using nlohmann::json;
namespace stdfs = std::filesystem;

void print_problems(const Diagnostics& d, std::ostream& err) {
  for (const auto& p : d.items()) err << p.to_string() << "\n";
}

// The built-in packs: $KDA_TASKS_DIR, else <exe dir>/../tasks, else ./tasks.
stdfs::path default_tasks_dir() {
  if (const char* env = std::getenv("KDA_TASKS_DIR"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  stdfs::path exe = stdfs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    stdfs::path candidate = exe.parent_path().parent_path() / "tasks";
    if (stdfs::is_directory(candidate, ec)) return candidate;
  }
  return "tasks";
}

std::string shape_text(const task::TensorSpec& t) {
  if (!t.shape) return "scalar";
  std::string s = "[";
  for (size_t i = 0; i < t.shape->size(); ++i) s += (i ? ", " : "") + (*t.shape)[i];
  return s + "]";
}

std::vector<std::string> baseline_names(const task::TaskPack& p) {
  std::vector<std::string> v;
  for (const auto& [name, s] : p.baselines) v.push_back(name == p.baseline_name ? name + "*" : name);
  return v;
}

std::string axes_text(const std::map<std::string, int64_t>& axes) {
  std::string s;
  for (const auto& [k, v] : axes) s += (s.empty() ? "" : " ") + k + "=" + std::to_string(v);
  return s;
}

std::string input_kind_text(const task::InputSpec& in) {
  switch (in.kind) {
    case task::InputSpec::Kind::kRandom: return "random";
    case task::InputSpec::Kind::kScalar: return "scalar " + in.value.dump();
    case task::InputSpec::Kind::kSafetensors: return "safetensors " + in.path + ":" + in.tensor_key;
  }
  return "?";
}

json tensor_json(const task::TensorSpec& t) {
  return {{"name", t.name},
          {"shape", t.shape ? json(*t.shape) : json(nullptr)},
          {"dtype", tensor::dtype_name(t.dtype)},
          {"description", t.description}};
}

// ---- validate ---------------------------------------------------------------------------------------------

int run_validate(const Args& args, Io& io) {
  std::vector<stdfs::path> paths;
  for (const auto& p : args.positionals("path")) paths.emplace_back(p);
  task::ValidationReport report = task::validate_paths(
      paths, {.schema_only = args.flag("schema-only"), .generator_stresses = eval::generator_stresses});
  print_problems(report.problems, io.err);
  for (const auto& w : report.warnings.items()) io.err << "warning: " << w.to_string() << "\n";
  if (args.flag("json")) {
    io.out << json_text(report.to_json()) << "\n";
  } else {
    const auto& c = report.counts;
    io.out << fmt::format("{}: {} definitions, {} workloads, {} solutions, {} traces, {} packs, {} blobs, {} settings",
                          report.valid() ? "valid" : "invalid", c.definitions, c.workloads, c.solutions, c.traces,
                          c.packs, c.blobs, c.settings);
    if (!report.valid()) io.out << fmt::format("; {} problems (listed on stderr)", report.problems.size());
    if (!report.warnings.empty()) io.out << fmt::format("; {} warnings (listed on stderr)", report.warnings.size());
    io.out << "\n";
  }
  return report.valid() ? kExitOk : kExitBadInput;
}

// ---- list -------------------------------------------------------------------------------------------------

int run_list(const Args& args, Io& io) {
  stdfs::path dir = args.positional("dir").empty() ? default_tasks_dir() : stdfs::path(args.positional("dir"));
  std::error_code ec;
  if (!stdfs::is_directory(dir, ec)) {
    io.err << "kda task list: " << dir.string() << ": no such directory\n";
    return kExitBadInput;
  }
  json packs = json::array();
  bool all_ok = true;
  std::vector<std::array<std::string, 7>> rows;
  for (const auto& path : task::find_task_packs(dir)) {
    Diagnostics d;
    auto pack = task::load_task_pack(path, d);
    std::string rel = path.lexically_relative(dir).generic_string();
    if (rel.empty() || rel == ".") rel = path.filename().string();
    if (!pack) {
      all_ok = false;
      print_problems(d, io.err);
      packs.push_back({{"path", path.string()}, {"valid", false}, {"problems", d.size()}});
      rows.push_back({rel, "(invalid)", "", "", "", "", fmt::format("{} problems", d.size())});
      continue;
    }
    std::string backend(task::backend_name(pack->backend));
    packs.push_back({{"path", path.string()},
                     {"valid", true},
                     {"name", pack->definition.name},
                     {"op_type", pack->definition.op_type},
                     {"backend", backend},
                     {"workloads", pack->workloads.size()},
                     {"holdout", pack->holdout.size()},
                     {"dev", pack->dev_uuids.size()},
                     {"baseline", pack->baseline_name},
                     {"baselines", baseline_names(*pack)}});
    rows.push_back({rel, pack->definition.op_type, backend, std::to_string(pack->workloads.size()),
                    std::to_string(pack->dev_uuids.size()), util::join(baseline_names(*pack), ","),
                    pack->definition.name});
  }
  if (args.flag("json")) {
    io.out << json_text({{"tasks_dir", dir.string()}, {"packs", std::move(packs)}}) << "\n";
  } else {
    size_t w = 4;
    for (const auto& r : rows) w = std::max(w, r[0].size());
    io.out << fmt::format("{:<{}}  {:<12} {:<7} {:>9} {:>4}  {}\n", "pack", w, "op_type", "backend", "workloads", "dev",
                          "baselines (* = scored against)");
    for (const auto& r : rows)
      io.out << fmt::format("{:<{}}  {:<12} {:<7} {:>9} {:>4}  {}\n", r[0], w, r[1], r[2], r[3], r[4], r[5]);
    if (rows.empty()) io.out << "(no task packs under " << dir.string() << ")\n";
  }
  return all_ok ? kExitOk : kExitBadInput;
}

// ---- show -------------------------------------------------------------------------------------------------

int show_workload(const task::TaskPack& pack, const std::string& uuid, bool as_json, Io& io) {
  const task::Workload* w = nullptr;
  for (const auto& x : pack.workloads)  // holdout workloads are never shown
    if (x.uuid == uuid) w = &x;
  if (w == nullptr) {
    io.err << "kda task show: " << (pack.root / "workloads.jsonl").string() << ": no workload " << uuid << "\n";
    return kExitBadInput;
  }
  const task::Definition& def = pack.definition;
  auto axes = task::workload_axes(def, *w);
  json j{{"uuid", w->uuid}, {"axes", axes.ok() ? json(*axes) : json(w->axes)}, {"dev", false}};
  j["dev"] = std::find(pack.dev_uuids.begin(), pack.dev_uuids.end(), uuid) != pack.dev_uuids.end();
  json tensors = json::array();
  auto add = [&](const task::TensorSpec& t, const char* role) {
    json e = tensor_json(t);
    e["role"] = role;
    if (axes.ok()) {
      if (auto s = task::resolve_shape(def, t, *axes); s.ok()) e["resolved_shape"] = *s;
    }
    if (std::string(role) == "input") e["input"] = w->input(t.name).to_json();
    tensors.push_back(std::move(e));
  };
  for (const auto& t : def.inputs) add(t, "input");
  for (const auto& t : def.outputs) add(t, "output");
  j["tensors"] = tensors;
  for (const auto& [key, expr] :
       {std::pair{"bytes", &pack.settings.roofline_bytes}, std::pair{"flops", &pack.settings.roofline_flops}}) {
    if (*expr && axes.ok()) {
      if (auto v = (*expr)->evaluate(*axes); v.ok()) j["roofline"][key] = *v;
    }
  }
  if (as_json) {
    io.out << json_text(j) << "\n";
    return kExitOk;
  }
  io.out << "workload " << w->uuid << (j["dev"].get<bool>() ? " (dev)" : "") << "\n";
  io.out << "  axes: " << axes_text(axes.ok() ? *axes : w->axes) << "\n";
  for (const auto& t : tensors) {
    std::string shape = t.contains("resolved_shape") ? t["resolved_shape"].dump() : "?";
    std::string src = t.contains("input") ? input_kind_text(w->input(t["name"].get<std::string>())) : "";
    io.out << fmt::format("  {:<6} {:<20} {:<14} {:<24} {}\n", t["role"].get<std::string>(),
                          t["name"].get<std::string>(), t["dtype"].get<std::string>(), shape, src);
  }
  if (j.contains("roofline"))
    for (const auto& [k, v] : j["roofline"].items()) io.out << "  roofline " << k << ": " << v.dump() << "\n";
  return kExitOk;
}

int run_show(const Args& args, Io& io) {
  stdfs::path dir = args.positional("pack");
  Diagnostics d;
  auto pack = task::load_task_pack(dir, d);
  if (!pack) {
    print_problems(d, io.err);
    return kExitBadInput;
  }
  bool as_json = args.flag("json");
  if (auto uuid = args.value("workload")) return show_workload(*pack, *uuid, as_json, io);
  const task::Definition& def = pack->definition;
  if (as_json) {
    json axes = json::array(), inputs = json::array(), outputs = json::array(), workloads = json::array();
    for (const auto& a : def.axes)
      axes.push_back({{"name", a.name},
                      {"type", a.kind == task::AxisSpec::Kind::kConst ? "const" : "var"},
                      {"value", a.kind == task::AxisSpec::Kind::kConst ? json(a.value) : json(nullptr)}});
    for (const auto& t : def.inputs) inputs.push_back(tensor_json(t));
    for (const auto& t : def.outputs) outputs.push_back(tensor_json(t));
    for (const auto& w : pack->workloads) {
      json e = w.to_json();
      e["dev"] = std::find(pack->dev_uuids.begin(), pack->dev_uuids.end(), w.uuid) != pack->dev_uuids.end();
      workloads.push_back(std::move(e));
    }
    json j{{"path", dir.string()},
           {"name", def.name},
           {"op_type", def.op_type},
           {"description", def.description},
           {"tags", def.tags},
           {"constraints", def.constraints},
           {"axes", axes},
           {"inputs", inputs},
           {"outputs", outputs},
           {"backend", task::backend_name(pack->backend)},
           {"settings", pack->settings.to_json()},
           {"reference", pack->reference.name},
           {"cpu_reference", pack->cpu_reference ? json(pack->cpu_reference->name) : json(nullptr)},
           {"baseline", pack->baseline_name},
           {"baselines", baseline_names(*pack)},
           {"dev_workloads", pack->dev_uuids},
           {"holdout_count", pack->holdout.size()},
           {"workloads", workloads}};
    io.out << json_text(j) << "\n";
    return kExitOk;
  }
  std::ostream& o = io.out;
  o << def.name << "  (" << def.op_type << ", backend " << task::backend_name(pack->backend) << ")\n";
  if (!def.description.empty()) o << "  " << def.description << "\n";
  if (!def.tags.empty()) o << "  tags: " << util::join(def.tags, ", ") << "\n";
  o << "axes:\n";
  for (const auto& a : def.axes)
    o << fmt::format("  {:<22} {}\n", a.name,
                     a.kind == task::AxisSpec::Kind::kConst ? "const " + std::to_string(a.value) : std::string("var"));
  o << "inputs (call order):\n";
  for (const auto& t : def.inputs)
    o << fmt::format("  {:<22} {:<14} {}\n", t.name, tensor::dtype_name(t.dtype), shape_text(t));
  o << "outputs:\n";
  for (const auto& t : def.outputs)
    o << fmt::format("  {:<22} {:<14} {}\n", t.name, tensor::dtype_name(t.dtype), shape_text(t));
  const task::TaskSettings& s = pack->settings;
  o << "settings:\n";
  o << fmt::format("  checker {}  atol {}  rtol {}  matched_ratio {}  compare {}\n", task::checker_name(s.checker),
                   s.atol, s.rtol, s.matched_ratio,
                   s.compare_outputs.empty() ? "all outputs" : util::join(s.compare_outputs, ","));
  o << fmt::format("  timing warmup {} iterations {} trials {}  call timeout {} s  workload timeout {} s\n", s.warmup,
                   s.iterations, s.trials, s.call_timeout_s, s.workload_timeout_s);
  o << fmt::format("  policy libraries [{}] cuda_graphs {} streams {} threads {} persistent_state {} determinism {}\n",
                   util::join(s.libraries, ","), s.cuda_graphs, s.streams, s.threads,
                   task::persistent_state_name(s.persistent_state), task::determinism_name(s.determinism));
  if (s.roofline_bytes) o << "  roofline bytes = " << s.roofline_bytes->text() << "\n";
  if (s.roofline_flops) o << "  roofline flops = " << s.roofline_flops->text() << "\n";
  if (!s.inputs_generator.empty()) o << "  inputs generator " << s.inputs_generator << "\n";
  o << "  reference " << s.reference_dir << "/ (" << pack->reference.spec.language << ")";
  if (pack->cpu_reference) o << ", CPU reference " << *s.cpu_reference_dir << "/";
  o << "\n  baselines: " << (pack->baselines.empty() ? "(none)" : util::join(baseline_names(*pack), ", ")) << "\n";
  o << fmt::format("workloads: {} ({} dev, * below; {} holdout, not shown)\n", pack->workloads.size(),
                   pack->dev_uuids.size(), pack->holdout.size());
  for (const auto& w : pack->workloads) {
    bool dev = std::find(pack->dev_uuids.begin(), pack->dev_uuids.end(), w.uuid) != pack->dev_uuids.end();
    std::string fixed;
    for (const auto& [name, in] : w.inputs)
      if (in.kind != task::InputSpec::Kind::kRandom)
        fixed += (fixed.empty() ? "" : " ") + name + "=" + input_kind_text(in);
    o << fmt::format("  {}{:<36}  {:<28} {}\n", dev ? "*" : " ", w.uuid, axes_text(w.axes), fixed);
  }
  return kExitOk;
}

int run_seal(const Args& args, Io& io) {
  const std::string pack = args.positional("pack");
  auto loaded = task::load_task_pack(pack);
  if (!loaded.ok()) {
    return fail(io, "kda task seal", loaded.status());
  }
  auto m = task::pack_manifest(pack);
  if (!m.ok()) {
    return fail(io, "kda task seal", m.status());
  }
  const std::string text = m->to_json().dump(2) + "\n";
  if (auto out = args.value("output")) {
    if (Status st = fs::write_file_atomic(*out, text); !st.ok()) {
      return fail(io, "kda task seal", st);
    }
    io.err << "sealed " << pack << ": " << m->files.size() << " files, digest " << m->digest() << "\n";
    return kExitOk;
  }
  io.out << text;
  return kExitOk;
}

}  // namespace

std::vector<CommandSpec> task_commands() {
  std::vector<CommandSpec> v;
  v.push_back({
      .name = "task validate",
      .summary = "Check FlashInfer-Bench datasets, task packs, solutions, workload/trace files and task.toml",
      .description =
          "Each PATH is a FlashInfer-Bench dataset directory (definitions/**/*.json, workloads/**/*.jsonl, "
          "solutions/**/*.json, traces/**/*.jsonl, blob/), a kda task pack, a solution directory, or a single "
          "file (kind detected from its location and content). A solution or workload file is checked against "
          "the pack or dataset (with definitions/) it sits in, else against the packs and datasets named in the "
          "same call (kda task validate tasks/contest/P solutions/P/NAME). Every problem is listed on stderr as "
          "file:line: /json/pointer: message (line only for JSONL). Safetensors inputs must exist relative to the "
          "dataset root / pack and hold the tensor key with the exact shape and dtype. Exit 0 when everything is "
          "valid, 2 otherwise. A solution that is valid FlashInfer-Bench but that kda eval cannot evaluate (its "
          "language or binding) is a warning, which does not make the result invalid. --json prints {valid, "
          "problems:[{file,line,pointer,message}], warnings:[...], counts}.",
      .positionals = {{.name = "path", .help = "dataset, pack, solution directory or file", .variadic = true}},
      .options = {{.name = "schema-only",
                   .help = "schemas and cross-references only: do not open safetensors inputs (a dataset without "
                           "its blobs)"},
                  json_option()},
      .run = run_validate,
  });
  v.push_back({
      .name = "task list",
      .summary = "List the task packs under a directory (default: the built-in tasks/)",
      .description =
          "Searches DIR recursively for task packs (directories with definition.json) and loads each. Without DIR: "
          "$KDA_TASKS_DIR, else <kda binary dir>/../tasks, else ./tasks. Columns: pack path, op_type, backend, "
          "#workloads, #dev workloads, baselines (* marks the one speedups are measured against). Packs that fail "
          "to load are listed as invalid, their problems go to stderr, and the exit code is 2.",
      .positionals = {{.name = "dir", .help = "directory to search", .required = false}},
      .options = {json_option()},
      .run = run_list,
  });
  v.push_back({
      .name = "task show",
      .summary = "Describe a task pack: axes, inputs/outputs, settings, workloads",
      .description =
          "Prints the definition (axes, inputs in call order and outputs with shapes and dtypes), the task.toml "
          "settings with defaults filled in, the reference and baselines, and the workloads (dev ones marked). "
          "Holdout workloads are counted, never shown. --workload UUID shows one workload with resolved shapes, "
          "input sources and roofline bytes/flops.",
      .positionals = {{.name = "pack", .help = "task pack directory"}},
      .options = {json_option(), {.name = "workload", .metavar = "UUID", .help = "show one workload in detail"}},
      .run = run_show,
  });
  v.push_back({
      .name = "task seal",
      .summary = "Record a pack's manifest (sha256 of every file) so later evaluations can refuse a changed pack",
      .description =
          "Loads the pack (it must be valid), hashes every file under it and prints the manifest JSON "
          "{digest, files: {path: sha256}} or writes it with -o. `kda eval --sealed FILE` then fails loudly if any "
          "definition, tolerance, workload, reference or baseline file changed, appeared or disappeared.",
      .positionals = {{.name = "pack", .help = "task pack directory"}},
      .options = {{.name = "output", .short_name = 'o', .metavar = "FILE", .help = "write the manifest to FILE"}},
      .run = run_seal,
  });
  return v;
}

}  // namespace kda::cli
