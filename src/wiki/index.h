// The KernelWiki index: an SQLite database with an FTS5 table over chunks of pages, code, PRs and kda's
// own artifacts, ranked by BM25 with per-field weights and queried with identifier-aware terms.
//
// Schema (one file, wiki.db): files (one row per ingested file or record, with content hash, repo,
// commit, licence), chunks (text and facets), chunks_fts (external-content FTS5 over chunks with the
// `kda` tokenizer of tokenizer.h). Field weights: title 10, symbols 8, headings 4, body 1, path 3, tags 4.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "util/status.h"
#include "wiki/aliases.h"

namespace kda::wiki {

struct QueryPlan;  // query.h

// Search filters; empty fields do not filter. arch/op/technique values go through the alias table
// ("H200" -> "sm90").
struct Filters {
  std::string arch, op, technique, kind, repo, language;
  bool empty() const {
    return arch.empty() && op.empty() && technique.empty() && kind.empty() && repo.empty() && language.empty();
  }
};

struct SearchRequest {
  std::string query;
  int limit = 10;
  Filters filters;
};

struct SearchHit {
  std::string id;  // chunk id for `kda wiki show`: a page id, or repo:path:line
  std::string title, kind, language, unit, repo, commit, license, path;
  int start_line = 0, end_line = 0;
  std::vector<std::string> tags;
  std::vector<std::string> matched_terms;  // query words (or alias members) found in the chunk
  std::string location;                    // repo@commit:path:start-end
  std::string snippet;                     // the best-matching lines, "NNN: text" each
  std::string open_command;                // kda wiki show <id>
  double score = 0;                        // higher is better (negated BM25)
  int file_hits = 1;                       // matching chunks of the same file (collapsed into this hit)
};

struct ChunkRecord {
  std::string id, title, kind, language, unit, repo, commit, license, path;
  std::string symbols, headings, body;
  int start_line = 0, end_line = 0;
  std::vector<std::string> tags, related, sources;
  std::string arch, op, technique;
};

struct IngestOptions {
  std::string repo;  // repository name; default: the directory's name ("knowledge" for knowledge/)
  std::string kind;  // override: page | doc | code | pr | ncu | lesson (default: from the file)
  bool quiet = false;
};

struct IngestStats {
  int64_t files_seen = 0, files_indexed = 0, files_unchanged = 0, files_removed = 0, files_failed = 0;
  int64_t chunks_added = 0, chunks_removed = 0, bytes_read = 0;
  double seconds = 0;
};

struct GrepHit {
  std::string id, repo, path;
  int line = 0;
  std::string text;
};

struct IndexStats {
  int64_t files = 0, chunks = 0, db_bytes = 0;
  std::map<std::string, int64_t> chunks_by_kind, chunks_by_repo;
  std::map<std::string, std::string> repo_commits;
};

// Directories ingest (and the query generator) do not walk: hidden ones, build*, node_modules, __pycache__.
bool skipped_directory(const std::string& name);

class Index {
 public:
  // Opens (creating if needed) the database at `db_file`, creating its directory.
  static Result<std::unique_ptr<Index>> open(const std::filesystem::path& db_file);
  ~Index();
  Index(const Index&) = delete;
  Index& operator=(const Index&) = delete;

  void set_aliases(AliasTable aliases) { aliases_ = std::move(aliases); }
  const AliasTable& aliases() const { return aliases_; }

  // Ingests files and directories; unchanged files (same content hash) are skipped, files gone from an
  // ingested directory are removed. Progress lines go to `progress` (may be null).
  Result<IngestStats> ingest(const std::vector<std::filesystem::path>& paths, const IngestOptions& options,
                             std::ostream* progress);
  Result<std::vector<SearchHit>> search(const SearchRequest& request);
  // By chunk id (page id, repo:path:line) or by numeric row id; a page split in sections is joined.
  Result<ChunkRecord> show(const std::string& id);
  // POSIX extended regex, line by line, over chunk bodies.
  Result<std::vector<GrepHit>> grep(const std::string& regex, const Filters& filters, int limit);
  Result<IndexStats> stats();
  // Number of files ingested under `repo` ("" = all).
  Result<int64_t> file_count(const std::string& repo = "");

  struct Impl;

 private:
  // The any-word expression of a plan without its very common words (see kCommonWordFraction).
  Result<std::string> loose_expression(const QueryPlan& plan);
  explicit Index(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  AliasTable aliases_ = AliasTable::builtin();
};

}  // namespace kda::wiki
