// kda mcp: kda's tools for Claude Code / Codex over MCP (stdio), and kda mcp guard, the
// PreToolUse hook kda installs in Claude Code sessions.
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <iterator>
#include <ostream>

#include "backends/cli_guard.h"
#include "agent/workspace_tools.h"
#include "cli/commands.h"
#include "eval/tool_run.h"
#include "loop/kda_tools.h"
#include "loop/knowledge_tools.h"
#include "loop/workspace_session.h"
#include "mcp/mcp_server.h"
#include "mcp/tool_socket.h"

namespace kda::cli {

namespace {

// --profiles DIR, --max-profiles N and --ncu PATH of a standalone session with --task.
Status read_profile_options(const Args& args, loop::WorkspaceSessionOptions& so) {
  auto profiles = args.value("profiles");
  if (!profiles) {
    if (args.given("max-profiles") || args.given("ncu"))
      return Status::bad_input(
          "--max-profiles and --ncu need --profiles DIR (where the profile tool keeps its reports)");
    return {};
  }
  so.profiles_dir = std::filesystem::absolute(*profiles);
  so.ncu = args.value_or("ncu", "");
  auto max_profiles = args.integer("max-profiles");
  if (!max_profiles.ok()) return max_profiles.status();
  if (*max_profiles) so.max_profiles = static_cast<int>(std::clamp<long long>(**max_profiles, -1, 1000));
  return {};
}

int run_mcp(const Args& args, Io& io) {
  const std::string role = args.value_or("role", "writer");
  if (role != "writer" && role != "reviewer") {
    io.err << "kda mcp: --role must be writer or reviewer, not '" << role << "'\n";
    return kExitBadInput;
  }
  auto socket = args.value("connect");
  auto workspace = args.value("workspace");
  if (socket.has_value() == workspace.has_value()) {
    io.err << "kda mcp: give exactly one of --connect SOCKET (a kda run's agent session) or --workspace DIR "
              "(standalone workspace tools)\n";
    return kExitBadInput;
  }
  if (args.value("task") && !workspace) {
    io.err << "kda mcp: --task needs --workspace DIR (the solution it evaluates)\n";
    return kExitBadInput;
  }
  if (args.value("profiles") && !args.value("task")) {
    io.err << "kda mcp: --profiles needs --task PACK (the pack whose workloads it profiles)\n";
    return kExitBadInput;
  }
  std::unique_ptr<agent::ToolHost> host;
  // Standalone: the workspace file tools in front of the knowledge tools (KernelWiki, Nsight Compute),
  // and with --task kda's evaluate and ledger tools, run here, outside the agent's sandbox.
  std::unique_ptr<agent::ToolHost> files;
  std::unique_ptr<loop::KnowledgeTools> knowledge;
  std::unique_ptr<loop::WorkspaceSession> session;
  std::unique_ptr<loop::KdaToolHost> kda_tools;
  std::filesystem::path profiles_root;  // --profiles: ncu_analyze and ncu_diff read its reports
  if (socket) {
    auto remote = mcp::SocketToolHost::connect(*socket);
    if (!remote.ok()) {
      return fail(io, "kda mcp", remote.status());
    }
    host = std::move(*remote);
  } else {
    std::error_code ec;
    if (!std::filesystem::is_directory(*workspace, ec)) {
      io.err << "kda mcp: --workspace " << *workspace << " is not a directory\n";
      return kExitBadInput;
    }
    agent::WorkspaceToolsOptions wo;
    wo.workspace = std::filesystem::absolute(*workspace);
    for (const auto& w : args.values("writable")) wo.writable.emplace_back(w);
    if (auto task = args.value("task")) {
      // The pack must not be writable from the session (its manifest is sealed here too).
      const auto pack = std::filesystem::weakly_canonical(std::filesystem::absolute(*task), ec);
      for (const auto& w : wo.writable) {
        const auto wp = std::filesystem::weakly_canonical(w.is_absolute() ? w : wo.workspace / w, ec);
        const auto rel = pack.lexically_relative(wp);
        if (!rel.empty() && *rel.begin() != "..") {
          io.err << "kda mcp: --writable " << w.string() << " contains the task pack " << pack.string()
                 << ": the session could change what it is judged by\n";
          return kExitBadInput;
        }
      }
      loop::WorkspaceSessionOptions so;
      so.workspace = wo.workspace;
      so.pack = pack;
      so.runner_binary = eval::default_runner_binary();
      so.workloads = args.value_or("eval-workloads", "dev");
      so.log = args.value_or("log", "");
      so.cuda_arch = args.value_or("arch", "90a");
      auto max_evals = args.integer("max-evals");
      if (!max_evals.ok()) {
        io.err << "kda mcp: " << max_evals.status().message() << "\n";
        return kExitBadInput;
      }
      if (*max_evals) so.max_evals = static_cast<int>(std::clamp<long long>(**max_evals, -1, 1000000));
      if (Status st = read_profile_options(args, so); !st.ok()) {
        io.err << "kda mcp: " << st.message() << "\n";
        return kExitBadInput;
      }
      profiles_root = so.profiles_dir;
      auto opened = loop::WorkspaceSession::open(std::move(so));
      if (!opened.ok()) {
        return fail(io, "kda mcp", opened.status());
      }
      session = std::move(*opened);
      kda_tools = std::make_unique<loop::KdaToolHost>(session->hooks());
      if (role == "writer") kda_tools->begin_round(session->max_evals());
    }
    for (const auto& r : args.values("readable")) wo.readable.emplace_back(r);
    wo.read_only = role == "reviewer";
    loop::KnowledgeToolsOptions ko;
    ko.wiki_db = args.value_or("wiki-db", "");
    ko.roots.push_back(wo.workspace);
    for (const auto& r : wo.readable) ko.roots.push_back(r.is_absolute() ? r : wo.workspace / r);
    if (!profiles_root.empty()) ko.roots.push_back(profiles_root);
    files = std::make_unique<agent::WorkspaceTools>(std::move(wo));
    knowledge = std::make_unique<loop::KnowledgeTools>(std::move(ko));
    auto composite = std::make_unique<agent::CompositeToolHost>();
    if (kda_tools) composite->add(kda_tools.get());
    composite->add(files.get());
    composite->add(knowledge.get());
    host = std::move(composite);
  }
  mcp::ServerOptions options;
  options.read_only_tools = role == "reviewer";
  // What the session offers, from the tools themselves (a standalone session without --task has no
  // evaluation to advertise).
  std::string offered;
  for (const auto& t : host->tools()) offered += (offered.empty() ? "" : ", ") + t.name;
  options.instructions = "kda's tools for this " + role + " session: " + offered + ".";
  if (kda_tools && role == "writer")
    options.instructions +=
        " evaluate runs kda's official evaluator (fresh secret seeds, the task's baseline interleaved) on "
        "the workspace's solution.json and sources as they are when you call it.";
  mcp::McpServer server(host.get(), options);
  io.out.flush();
  Status s = server.serve(STDIN_FILENO, STDOUT_FILENO);
  if (!s.ok()) {
    return fail(io, "kda mcp", s);
  }
  return kExitOk;
}

int run_guard(const Args& args, Io& io) {
  std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  auto hook = nlohmann::json::parse(input, nullptr, false);
  std::vector<std::filesystem::path> allowed;
  for (const auto& a : args.values("allow")) allowed.emplace_back(a);
  if (auto reason = agent::guard_denial(hook.is_discarded() ? nlohmann::json() : hook, allowed)) {
    // Exit 2 with the reason on stderr: Claude Code blocks the call and shows the reason to the model.
    io.err << *reason << "\n";
    return 2;
  }
  return kExitOk;
}

}  // namespace

std::vector<CommandSpec> mcp_commands() {
  std::vector<CommandSpec> v;
  v.push_back({
      .name = "mcp",
      .summary = "MCP server (stdio) exposing a kda session's tools to Claude Code and Codex",
      .description =
          "Speaks the Model Context Protocol over stdin/stdout (newline-delimited JSON-RPC 2.0): initialize, "
          "ping, tools/list, tools/call. The tools live in the kda process that runs the session; this server "
          "connects to its tool socket (--connect) and proxies. kda's Claude Code and Codex backends start it "
          "automatically inside the agent's sandbox. With --role reviewer only read-only tools are listed and "
          "callable (the socket enforces the same on kda's side). Standalone, --workspace DIR serves kda's "
          "workspace tools (list_files, read_file, grep; for writers also write_file, edit_file and a sandboxed "
          "run_command) on DIR, writing only the --writable paths, and kda's knowledge tools (wiki_search, "
          "wiki_show over the KernelWiki index; ncu_analyze, ncu_diff of Nsight Compute reports inside DIR or a "
          "--readable root), for use from your own Claude Code or Codex setup. With --task PACK it also offers "
          "evaluate (kda's official evaluator on the workspace's solution, run by this process, outside the "
          "agent's sandbox, on the pack as sealed at start, fresh secret seeds, at most --max-evals calls) and "
          "ledger (this session's evaluations, the best fully passing one as the incumbent); with --profiles DIR "
          "also profile (the workspace's solution on one dev workload under ncu, the report kept in DIR, its ranked "
          "advice returned; at most --max-profiles calls; the profiled runner is not sandboxed, since ncu must "
          "attach to it). A --writable path that contains the pack is refused. Claude Code: claude mcp add kda -- kda "
          "mcp --workspace DIR "
          "--writable solution.json --writable kernel.cu --task PACK; Codex: [mcp_servers.kda] command = \"kda\", "
          "args = [\"mcp\", \"--workspace\", \"DIR\", \"--task\", \"PACK\", ...] and default_tools_approval_mode = "
          "\"approve\" (codex exec cannot ask for approval) in ~/.codex/config.toml.",
      .options =
          {{.name = "connect", .metavar = "SOCKET", .help = "unix socket of the session's tool server"},
           {.name = "role", .metavar = "ROLE", .help = "writer or reviewer", .default_value = "writer"},
           {.name = "workspace", .metavar = "DIR", .help = "standalone: serve workspace tools on DIR"},
           {.name = "writable",
            .metavar = "PATH",
            .help = "standalone: a path the tools may write (relative to DIR)",
            .repeatable = true},
           {.name = "readable", .metavar = "PATH", .help = "standalone: an extra read-only root", .repeatable = true},
           {.name = "task",
            .metavar = "PACK",
            .help = "standalone: offer evaluate and ledger, judging the workspace's solution by this task pack"},
           {.name = "max-evals",
            .metavar = "N",
            .help = "standalone with --task: evaluate calls in the session",
            .default_value = "20"},
           {.name = "eval-workloads",
            .metavar = "SEL",
            .help = "standalone with --task: dev, all or uuids",
            .default_value = "dev"},
           {.name = "arch",
            .metavar = "SM",
            .help = "standalone with --task: CUDA architecture",
            .default_value = "90a"},
           {.name = "log", .metavar = "FILE", .help = "standalone with --task: append each evaluation as a JSON line"},
           {.name = "profiles",
            .metavar = "DIR",
            .help = "standalone with --task: offer profile, keeping its Nsight Compute reports in DIR"},
           {.name = "max-profiles",
            .metavar = "N",
            .help = "standalone with --profiles: profile calls in the session",
            .default_value = "5"},
           {.name = "ncu",
            .metavar = "PATH",
            .help = "standalone with --profiles: ncu (default: ncu on PATH, else /usr/local/cuda/bin/ncu)"},
           {.name = "wiki-db",
            .metavar = "PATH",
            .help = "standalone: KernelWiki index (default: $KDA_WIKI_DIR/wiki.db, else $XDG_DATA_HOME/kda/wiki.db)"}},
      .run = run_mcp,
  });
  v.push_back({
      .name = "mcp guard",
      .summary = "Claude Code PreToolUse hook: deny file writes outside the allowed paths",
      .description =
          "Reads the hook's JSON from stdin. A Write, Edit, MultiEdit or NotebookEdit whose target (after "
          "resolving symlinks and '..') is not under one of the --allow paths is denied: exit 2 with the reason "
          "on stderr, which Claude Code shows to the model. Other tools pass (exit 0). Defence in depth: the "
          "Landlock sandbox around the agent enforces the same limits on every process.",
      .options = {{.name = "allow",
                   .metavar = "PATH",
                   .help = "a directory or file the session may write",
                   .repeatable = true}},
      .run = run_guard,
  });
  return v;
}

}  // namespace kda::cli
