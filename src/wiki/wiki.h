// KernelWiki's public API for other modules (agent tools, MCP, the CLI): where the index and the authored
// knowledge live, and search/show that build the index from knowledge/ on first use.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "util/status.h"
#include "wiki/index.h"

namespace kda::wiki {

// Environment variables (contract): KDA_WIKI_DIR overrides the index directory (default
// $XDG_DATA_HOME/kda, file wiki.db); KDA_KNOWLEDGE_DIR overrides where authored pages are found.
inline constexpr const char* kWikiDirEnv = "KDA_WIKI_DIR";
inline constexpr const char* kKnowledgeDirEnv = "KDA_KNOWLEDGE_DIR";
inline constexpr const char* kKnowledgeRepo = "knowledge";

// fs::user_data_dir("KDA_WIKI_DIR") / "wiki.db".
std::filesystem::path default_db_path();

// $KDA_KNOWLEDGE_DIR, else <dir of the running executable>/../knowledge, else ./knowledge; nullopt if
// none exists.
std::optional<std::filesystem::path> find_knowledge_dir();

// The alias table: <knowledge>/aliases.txt when present, else the built-in one.
Result<AliasTable> load_aliases(const std::optional<std::filesystem::path>& knowledge_dir);

// Opens the index (db_path empty = default_db_path()) with aliases loaded. When no authored pages have
// been indexed yet and a knowledge directory exists, ingests it first (progress to `progress`).
Result<std::unique_ptr<Index>> open_index(const std::filesystem::path& db_path = {}, std::ostream* progress = nullptr);

// One-call helpers for agent tools.
Result<std::vector<SearchHit>> search(const SearchRequest& request, const std::filesystem::path& db_path = {});
Result<ChunkRecord> show(const std::string& id, const std::filesystem::path& db_path = {});

}  // namespace kda::wiki
