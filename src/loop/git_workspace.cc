#include "loop/git_workspace.h"

#include "proc/subprocess.h"

namespace kda::loop {

Result<std::string> GitWorkspace::git(const std::vector<std::string>& args) {
  proc::RunOptions o;
  o.argv = {"git",
            "--git-dir=" + git_dir_.string(),
            "--work-tree=" + dir_.string(),
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.excludesFile=/dev/null",
            "-c",
            "core.fsmonitor=false",
            "-c",
            "user.name=kda",
            "-c",
            "user.email=kda@localhost",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "core.autocrlf=false",
            "-c",
            "gc.auto=0"};  // no gc under writer lanes committing at once, none pruning a lane's commits
  o.cwd = dir_;
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  // A fixed environment: no user/system git config, stable dates are not needed (commits are
  // named by hash and recorded in the ledger).
  std::vector<std::string> env;
  for (const auto& kv : proc::current_environment()) {
    if (kv.rfind("GIT_", 0) == 0) continue;
    env.push_back(kv);
  }
  env.push_back("GIT_CONFIG_NOSYSTEM=1");
  env.push_back("GIT_CONFIG_GLOBAL=/dev/null");
  env.push_back("GIT_TERMINAL_PROMPT=0");
  o.env = env;
  o.timeout_seconds = 120;
  auto r = proc::run(o);
  if (!r.ok()) return r.status().with_context("git");
  if (!r->exit.success())
    return Status::io("git " + (args.empty() ? std::string() : args[0]) + " in " + dir_.string() + ": " +
                      r->exit.describe() + ": " + r->stderr_text.substr(0, 2000));
  return r->stdout_text;
}

namespace {
std::string chomp(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}
}  // namespace

Status GitWorkspace::init() {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return Status::io("creating " + dir_.string() + ": " + ec.message());
  auto r = git({"init", "-q", "-b", "main", git_dir_.string()});
  return r.ok() ? Status() : r.status();
}

void GitWorkspace::recover() {
  std::error_code ec;
  for (const char* lock : {"index.lock", "HEAD.lock", "config.lock", "packed-refs.lock"})
    std::filesystem::remove(git_dir_ / lock, ec);
  // refs/heads/main.lock, a lane's refs/kda/... lock, and the lanes' own work trees' index and HEAD.
  for (const char* under : {"refs", "worktrees"}) {
    std::vector<std::filesystem::path> locks;
    for (auto it = std::filesystem::recursive_directory_iterator(git_dir_ / under, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
      if (it->path().extension() == ".lock") locks.push_back(it->path());
    for (const auto& l : locks) std::filesystem::remove(l, ec);
    ec.clear();
  }
}

Result<std::string> GitWorkspace::commit_all(const std::string& message) {
  KDA_RETURN_IF_ERROR(git({"add", "-A", "--force"}).status());
  KDA_RETURN_IF_ERROR(git({"commit", "-q", "--allow-empty", "--no-verify", "-m", message}).status());
  return head();
}

Result<std::string> GitWorkspace::head() {
  KDA_ASSIGN_OR_RETURN(std::string out, git({"rev-parse", "HEAD"}));
  return chomp(out);
}

Status GitWorkspace::reset_to(const std::string& commit) {
  KDA_RETURN_IF_ERROR(git({"reset", "-q", "--hard", commit}).status());
  return git({"clean", "-q", "-fdx"}).status();
}

Result<std::vector<std::string>> GitWorkspace::changed_paths(const std::string& from, const std::string& to) {
  KDA_ASSIGN_OR_RETURN(std::string out, git({"diff", "--name-only", "--no-renames", "-z", from, to}));
  std::vector<std::string> paths;
  size_t pos = 0;
  while (pos < out.size()) {
    size_t end = out.find('\0', pos);
    if (end == std::string::npos) end = out.size();
    if (end > pos) paths.push_back(out.substr(pos, end - pos));
    pos = end + 1;
  }
  return paths;
}

Result<std::string> GitWorkspace::diff(const std::string& from, const std::string& to, size_t cap) {
  KDA_ASSIGN_OR_RETURN(std::string out, git({"diff", "--no-renames", from, to}));
  if (out.size() > cap)
    out = out.substr(0, cap) + "\n[diff truncated: " + std::to_string(out.size() - cap) + " bytes]\n";
  return out;
}

Status GitWorkspace::prune_worktrees() { return git({"worktree", "prune"}).status(); }

Result<GitWorkspace> GitWorkspace::add_worktree(const std::filesystem::path& work_tree, const std::string& commit) {
  std::error_code ec;
  std::filesystem::remove_all(work_tree, ec);
  if (ec) return Status::io("removing " + work_tree.string() + ": " + ec.message());
  std::filesystem::create_directories(work_tree.parent_path(), ec);
  if (ec) return Status::io("creating " + work_tree.parent_path().string() + ": " + ec.message());
  const std::filesystem::path admin = git_dir_ / "worktrees" / work_tree.filename();
  std::filesystem::remove_all(admin, ec);  // a record prune kept (its directory was there) is replaced
  KDA_RETURN_IF_ERROR(git({"worktree", "add", "-q", "--detach", work_tree.string(), commit}).status());
  if (!std::filesystem::is_directory(admin, ec))
    return Status::internal("git worktree add " + work_tree.string() + ": no record at " + admin.string());
  std::filesystem::remove(work_tree / ".git", ec);
  if (ec) return Status::io("removing " + (work_tree / ".git").string() + ": " + ec.message());
  return GitWorkspace(work_tree, admin);
}

Status GitWorkspace::keep(const std::string& name, const std::string& commit) {
  return git({"update-ref", "refs/" + name, commit}).status();
}

}  // namespace kda::loop
