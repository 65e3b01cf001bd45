// `kda audit verify`: check a run's hash-chained audit log for edits, deletions, truncation and
// reordering.
#include <filesystem>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "audit/audit_log.h"
#include "cli/commands.h"
#include "util/fs.h"

namespace kda::cli {

namespace {

using nlohmann::json;
namespace stdfs = std::filesystem;

bool is_hex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

int run_verify(const Args& args, Io& io) {
  const stdfs::path target = args.positional("path");
  std::error_code ec;
  stdfs::path log_path = target;
  std::string head = args.value_or("head", "");
  std::string head_source = head.empty() ? "" : "--head";
  if (stdfs::is_directory(target, ec)) {
    log_path = target / "audit.jsonl";
    const stdfs::path state_path = target / "state.json";
    if (head.empty() && stdfs::exists(state_path, ec)) {
      auto text = fs::read_file(state_path);
      if (!text.ok()) {
        io.err << "kda audit verify: " << text.status().message() << "\n";
        return kExitBadInput;
      }
      json state = json::parse(*text, nullptr, /*allow_exceptions=*/false);
      if (state.is_discarded() || !state.is_object()) {
        io.err << "kda audit verify: " << state_path.string() << ": not a JSON object\n";
        return kExitBadInput;
      }
      if (state.contains("audit_head")) {
        if (!state["audit_head"].is_string()) {
          io.err << "kda audit verify: " << state_path.string() << ": /audit_head: expected a string\n";
          return kExitBadInput;
        }
        head = state["audit_head"].get<std::string>();
        head_source = state_path.string() + " audit_head";
      }
    }
  }
  if (!head.empty() && !is_hex64(head)) {
    io.err << "kda audit verify: " << (head_source.empty() ? "--head" : head_source)
           << ": expected 64 lowercase hex digits, got '" << head << "'\n";
    return kExitBadInput;
  }
  auto result = audit::verify(log_path, head);
  if (!result.ok()) {
    io.err << "kda audit verify: " << result.status().message() << "\n";
    return kExitBadInput;
  }
  const audit::VerifyResult& r = *result;
  for (const auto& p : r.problems) io.err << log_path.string() << ":" << p.line << ": " << p.message << "\n";
  if (args.flag("json")) {
    json problems = json::array();
    for (const auto& p : r.problems) problems.push_back({{"line", p.line}, {"message", p.message}});
    json out = {{"log", log_path.string()},
                {"intact", r.ok()},
                {"records", r.records},
                {"head", r.head},
                {"expected_head", head.empty() ? json(nullptr) : json(head)},
                {"expected_head_line", r.head_line == 0 ? json(nullptr) : json(r.head_line)},
                {"problems", problems}};
    io.out << out.dump(2) << "\n";
  } else if (r.ok()) {
    io.out << log_path.string() << ": intact, " << r.records << " records, head " << r.head;
    if (!head.empty()) io.out << " (expected head at line " << r.head_line << ")";
    io.out << "\n";
  } else {
    io.out << log_path.string() << ": TAMPERED, " << r.problems.size() << " problem(s) in " << r.records
           << " records\n";
  }
  return r.ok() ? kExitOk : kExitFailed;
}

}  // namespace

std::vector<CommandSpec> audit_commands() {
  std::vector<CommandSpec> v;
  v.push_back({
      .name = "audit verify",
      .summary = "Check a run's hash-chained audit log for edits, deletions, truncation and reordering",
      .description =
          "PATH is a run directory (its audit.jsonl is checked, and the expected head is read from state.json's "
          "\"audit_head\" when present) or an audit log file. Every record must hash to its \"hash\" (canonical "
          "JSON without \"hash\"), chain to the previous record's hash through \"prev\" (64 zeros for the first) "
          "and carry the next seq. With an expected head (--head HEX overrides state.json) the log must still "
          "contain that record, which catches truncation. Each problem is printed on stderr as file:line: "
          "message. Exit 0 intact, 1 tampered, 2 unreadable input or a bad --head. --json prints {log, intact, "
          "records, head, expected_head, expected_head_line, problems:[{line,message}]}.",
      .positionals = {{.name = "path", .help = "run directory or audit.jsonl"}},
      .options = {json_option(),
                  {.name = "head", .metavar = "HEX", .help = "expected head hash (overrides state.json audit_head)"}},
      .run = run_verify,
  });
  return v;
}

}  // namespace kda::cli
