// `kda solution init`: scaffold a solution directory for a task pack (src/task/scaffold.h,
// docs/solutions.md); `kda solution export`: the FlashInfer-Bench Solution JSON of one.
#include <filesystem>
#include <ostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "task/scaffold.h"
#include "task/task_pack.h"
#include "util/fs.h"

namespace kda::cli {

namespace {

using nlohmann::json;
namespace stdfs = std::filesystem;

// The directory form of a solution: solution.json names the sources, the sources sit beside it.
Status write_solution_dir(const task::Solution& s, const stdfs::path& out) {
  std::error_code ec;
  if (stdfs::exists(out, ec) && !(stdfs::is_directory(out, ec) && stdfs::is_empty(out, ec)))
    return Status::bad_input(out.string() + ": exists and is not an empty directory; nothing written");
  // Everything goes to a staging directory first and appears at once: nothing half-written.
  const stdfs::path parent = out.parent_path().empty() ? stdfs::path(".") : out.parent_path();
  KDA_RETURN_IF_ERROR(fs::ensure_dir(parent));
  KDA_ASSIGN_OR_RETURN(stdfs::path stage, fs::make_temp_dir(parent, "." + out.filename().string() + ".init"));
  json j = s.to_json();
  for (auto& src : j["sources"]) src.erase("content");
  Status st = fs::write_file_atomic(stage / "solution.json", j.dump(2) + "\n");
  for (const auto& f : s.sources)
    if (st.ok()) st = fs::write_file_atomic(stage / f.path, f.content);
  if (st.ok() && stdfs::exists(out, ec)) stdfs::remove(out, ec);  // the empty directory
  if (st.ok()) {
    stdfs::rename(stage, out, ec);
    if (ec) st = Status::io(fmt::format("{}: {}", out.string(), ec.message()));
  }
  if (!st.ok()) stdfs::remove_all(stage, ec);
  return st;
}

int run_init(const Args& args, Io& io) {
  auto pack = task::load_task_pack(args.positional("pack"));
  if (!pack.ok()) return fail(io, "kda solution init", pack.status());
  task::ScaffoldOptions o;
  o.language = args.value_or("language", "");
  o.name = args.value_or("name", "");
  o.author = args.value_or("author", "you");
  auto sol = task::scaffold_solution(*pack, o);
  if (!sol.ok()) return fail(io, "kda solution init", sol.status());
  const stdfs::path out = args.value_or("out", sol->name);
  if (Status st = write_solution_dir(*sol, out); !st.ok()) return fail(io, "kda solution init", st);
  if (args.flag("json")) {
    json files = json::array({"solution.json"});
    for (const auto& f : sol->sources) files.push_back(f.path);
    io.out << json{{"solution", out.string()},
                   {"name", sol->name},
                   {"definition", sol->definition},
                   {"language", sol->spec.language},
                   {"entry_point", sol->spec.entry_point},
                   {"files", files}}
                  .dump(2)
           << "\n";
  } else {
    io.out << fmt::format(
        "{}: {} solution of {} ({} and solution.json)\nnext: write the computation in {}, then\n  kda eval {} --task "
        "{}\n",
        out.string(), sol->spec.language, sol->definition, sol->sources.front().path,
        (out / sol->sources.front().path).string(), out.string(), pack->root.string());
  }
  return kExitOk;
}

// `kda solution export`: the solution as FlashInfer-Bench loads it, every source's content inline,
// checked against FIB's schema before a byte is written.
int run_export(const Args& args, Io& io) {
  const stdfs::path in = args.positional("solution");
  auto sol = task::load_solution(in);
  if (!sol.ok()) {
    return fail(io, "kda solution export", sol.status());
  }
  const json j = sol->to_json();
  if (const auto errors = task::fib_solution_errors(j); !errors.empty()) {
    io.err << "kda solution export: " << in.string() << " would still not load in FlashInfer-Bench:\n";
    for (const auto& e : errors) io.err << "  " << e << "\n";
    return kExitBadInput;
  }
  const std::string text = j.dump(2) + "\n";
  const std::string out = args.value_or("out", "");
  if (out.empty() || out == "-") {
    io.out << text;
    return kExitOk;
  }
  if (Status st = fs::write_file_atomic(out, text); !st.ok()) {
    return fail(io, "kda solution export", st);
  }
  io.err << fmt::format("{}: {} ({} source(s) inline)\n", out, sol->name, sol->sources.size());
  return kExitOk;
}

}  // namespace

std::vector<CommandSpec> solution_commands() {
  return {
      {
          .name = "solution export",
          .summary = "Write a solution as the single FlashInfer-Bench Solution JSON (every source's content inline)",
          .description =
              "Reads a solution directory (solution.json + the sources beside it) or a Solution JSON file and writes "
              "the\n"
              "Solution JSON that FlashInfer-Bench loads: every source's content inline, as FIB's schema requires "
              "(kda's\n"
              "directory form leaves it out). The result is checked against FIB's Solution schema first (language,\n"
              "target_hardware, entry_point among the sources, relative paths); nothing is written when it fails.\n"
              "`kda task validate` warns when a file would not load in FIB as it is.",
          .positionals = {{.name = "solution", .help = "solution directory or Solution JSON file"}},
          .options = {{.name = "out",
                       .short_name = 'o',
                       .metavar = "FILE",
                       .help = "where to write it (default: standard output)"}},
          .run = run_export,
      },
      {
          .name = "solution init",
          .summary = "Scaffold a solution directory for a task pack (the ABI, argument checks, typed pointers)",
          .description =
              "Writes <out>/solution.json and one source file (kernel.cc for a host pack, kernel.cu for a CUDA pack) "
              "with\n"
              "kda's C entry point for the pack's definition: every input and output in the definition's order with "
              "its\n"
              "dtype, shape and device checked, the variable axes read from the shapes (constant ones checked), typed\n"
              "pointers with byte_offset applied, and the place to compute the outputs. It builds and loads as it is; "
              "until\n"
              "the computation is written it returns 100 (kda eval: RUNTIME_ERROR, \"entry point returned 100\").\n"
              "Refuses a non-empty <out>; nothing is half-written. See docs/solutions.md for the ABI.",
          .positionals = {{.name = "pack", .help = "task pack directory"}},
          .options =
              {{.name = "out",
                .short_name = 'o',
                .metavar = "DIR",
                .help = "solution directory to create (default: ./<name>)"},
               {.name = "language",
                .metavar = "L",
                .help =
                    "cpp or python (host packs); cuda, python (torch) or triton (CUDA packs); default: cpp or cuda"},
               {.name = "name", .metavar = "NAME", .help = "solution name (default: <definition>_<language>_draft)"},
               {.name = "author", .metavar = "WHO", .help = "solution author", .default_value = "you"},
               json_option()},
          .run = run_init,
      }};
}

}  // namespace kda::cli
