// Turns one ingested file (or one PR record) into chunks with their metadata: markdown pages with front
// matter (KernelWiki layout), markdown documents, C/C++/CUDA and Python code, PR records (JSON lines),
// kda's ncu analyses (JSON) and run lessons (markdown).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"
#include "wiki/chunker.h"

namespace kda::wiki {

struct DocChunk {
  Chunk chunk;
  std::string page_id;  // front-matter id ("" for other documents)
};

struct Document {
  std::string path;      // relative path (or pr/<number> for PR records)
  std::string repo;      // set for PR records (their own repo field)
  std::string commit;    // set for PR records (merge commit)
  std::string kind;      // page | doc | code | pr | ncu | lesson
  std::string language;  // cuda | cpp | python | markdown | json | diff
  std::vector<std::string> tags, related, sources;
  std::vector<DocChunk> chunks;
};

// The language of a file by extension; "" when directory walks skip it.
std::string language_of(std::string_view path);

// Parses a file's content. `kind` overrides the kind detected from the file ("" = detect).
Result<Document> parse_document(const std::string& rel_path, std::string_view content, const std::string& kind);

// PR records, one JSON object per line: repo, number, title, body, merge_commit, changed_files, diff.
Result<std::vector<Document>> parse_pr_records(std::string_view jsonl, const std::string& origin);

}  // namespace kda::wiki
