// The advisers as agent tools: KernelWiki search and show, and the Nsight Compute skill's analysis
// and diff of reports. A plain agent::ToolHost, every tool read-only (reviewers get them too), so
// the native API agent calls it in-process, `kda run` puts it behind its tool socket for CLI agents,
// and `kda mcp --workspace` serves it next to the workspace file tools.
//
//   wiki_search {query, limit?, arch?, op?, technique?, kind?, repo?, language?}
//   wiki_show   {id, max_chars?}
//   ncu_analyze {report, extra_pages?, kernel?, max_priorities?}
//   ncu_diff    {before, after}
//
// The wiki index is opened on the first wiki call (wiki::open_index, which indexes knowledge/ when it
// holds no authored pages yet) and kept. Report paths are relative to the first root unless
// absolute; after resolving `..` and symlinks they must lie inside one of the roots, and they are
// read with O_NOFOLLOW|O_NONBLOCK as regular files only (a FIFO or a symlink swapped in after the
// check is refused). Every failure (no index, unknown id, a path outside the roots, a file that is
// not a report) is an is_error outcome saying why; nothing throws. Texts are bounded and valid UTF-8.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/tool.h"
#include "util/status.h"

namespace kda::loop {

struct KnowledgeToolsOptions {
  std::filesystem::path wiki_db;                // empty: wiki::default_db_path() ($KDA_WIKI_DIR, else XDG)
  std::vector<std::filesystem::path> roots;     // where ncu reports may be read; relative reports start at roots[0]
  size_t max_hits = 8;                          // wiki_search results at most
  size_t max_snippet_chars = 600;               // per search hit
  size_t max_output_chars = 12000;              // wiki_search text in all; wiki_show's default max_chars
  size_t max_report_output_chars = 24000;       // ncu_analyze / ncu_diff text
  size_t max_report_bytes = size_t{512} << 20;  // larger report files are refused
};

class KnowledgeTools final : public agent::ToolHost {
 public:
  explicit KnowledgeTools(KnowledgeToolsOptions options);
  ~KnowledgeTools() override;
  KnowledgeTools(const KnowledgeTools&) = delete;
  KnowledgeTools& operator=(const KnowledgeTools&) = delete;

  // True when kda was built with the KernelWiki (SQLite found); without it only the ncu tools exist.
  static bool wiki_built();

  // wiki_search and wiki_show (when built), ncu_analyze and ncu_diff; all read_only.
  std::vector<agent::ToolSpec> tools() const override;
  agent::ToolOutcome call(const std::string& name, const nlohmann::json& arguments) override;

  // The report path rule, for tests and other hosts: the canonical path of an existing file inside
  // a root, or kBadInput / kNotFound with a message fit for the model.
  Result<std::filesystem::path> resolve_report(const std::string& path) const;

 private:
  struct Wiki;  // the open index (wiki::Index), when built with the KernelWiki

  agent::ToolOutcome wiki_search(const nlohmann::json& args);
  agent::ToolOutcome wiki_show(const nlohmann::json& args);
  agent::ToolOutcome ncu_analyze(const nlohmann::json& args);
  agent::ToolOutcome ncu_diff(const nlohmann::json& args);
  Result<std::string> read_report_bytes(const std::string& path, std::filesystem::path* resolved) const;
  std::string display_path(const std::filesystem::path& resolved) const;

  KnowledgeToolsOptions options_;
  std::vector<std::filesystem::path> roots_;  // canonical
  std::mutex mu_;                             // one call at a time (the tool socket may call from its thread)
  std::unique_ptr<Wiki> wiki_;
};

}  // namespace kda::loop
