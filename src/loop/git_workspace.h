// The run's workspace: a work tree the writer edits, versioned by a git repository whose git
// directory lives outside it (<run>/git, kda-owned), driven by `git` argv subprocesses. kda commits
// each round's result so the ledger can name it, and resets to the incumbent's commit after a
// rejected or interrupted round. The writer cannot reach the git directory, hooks are off, user
// and system config are ignored and ignore files are overridden (add --force), so nothing the
// writer plants in the work tree changes what kda commits or runs.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "util/status.h"

namespace kda::loop {

class GitWorkspace {
 public:
  GitWorkspace(std::filesystem::path work_tree, std::filesystem::path git_dir)
      : dir_(std::move(work_tree)), git_dir_(std::move(git_dir)) {}
  const std::filesystem::path& dir() const { return dir_; }

  Status init();  // git init (idempotent)
  // After a kill -9 mid-command: removes git's stale lock files (the caller holds the run lock,
  // so no other git runs here).
  void recover();
  // Stages everything and commits (an empty commit when nothing changed); returns HEAD.
  Result<std::string> commit_all(const std::string& message);
  Result<std::string> head();
  // Working tree and index exactly at `commit`: reset --hard and clean -fdx.
  Status reset_to(const std::string& commit);
  // Paths changed between two commits (added, modified, deleted, renamed both sides).
  Result<std::vector<std::string>> changed_paths(const std::string& from, const std::string& to);
  Result<std::string> diff(const std::string& from, const std::string& to, size_t cap = 200000);

  // Writer lanes that work at the same time (docs/run.md "Lanes"): each gets a work tree of its own
  // (git worktree, detached at `commit`), with its own index and HEAD and the objects shared, so its
  // commits are this repository's. Its record is <git>/worktrees/<the path's last component>; the
  // .git file git leaves in the work tree is removed (kda names the git directory itself, and a
  // lane's files are the solution's alone). Call prune_worktrees() first: it forgets work trees
  // whose directory is gone, which every work tree of an earlier round is (and, with its .git file
  // removed, every one added since, so prune only before adding).
  Status prune_worktrees();
  Result<GitWorkspace> add_worktree(const std::filesystem::path& work_tree, const std::string& commit);
  // refs/<name> at `commit`: a lane's commit stays reachable after its work tree is gone.
  Status keep(const std::string& name, const std::string& commit);

 private:
  Result<std::string> git(const std::vector<std::string>& args);
  std::filesystem::path dir_;
  std::filesystem::path git_dir_;
};

}  // namespace kda::loop
