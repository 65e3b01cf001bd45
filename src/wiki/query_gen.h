// Query sets nobody tuned the ranking to (issue 23), built from a source tree itself: for every
// definition (kernel, function, type) with a comment right above it or at the top of its body, and for
// every file that opens with a comment (licence headers skipped), the comment's words are the query
// and the file is the answer; and for a third of the set, a definition's name in words
// ("KernelTmaWarpSpecialized" -> "kernel tma warp specialized", three parts at least, defined in one
// file only), whose callers use the same words, so the definition must outrank its uses. Stop words and the definition's own name are dropped, then about a
// third of the rest, and the order is shuffled, all from a seed: a paraphrase of what the code says
// it does, which is how a kernel engineer asks. `kda wiki queries` writes them as `kda wiki eval`
// reads them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "util/status.h"

namespace kda::wiki {

struct GeneratedQuery {
  std::string query;
  std::string expect;  // <repo>/<path relative to the tree>
  std::string kind;    // "definition_comment" | "file_comment" | "definition_name"
  std::string source;  // <path>:<line> of the comment
};

struct QueryGenOptions {
  std::string repo;          // the name the tree was ingested under (kda wiki ingest --repo)
  size_t max_queries = 200;  // a seeded sample when the tree offers more
  uint64_t seed = 1;
  size_t min_words = 4;  // comments with fewer usable words give no query
  size_t max_words = 8;
};

// Sources as `kda wiki ingest` walks them (.cu .cuh .h .hpp .cc .cpp .py; hidden and build* directories
// skipped). Errors: the root is not a directory; an empty repo name.
Result<std::vector<GeneratedQuery>> generate_queries(const std::filesystem::path& root, const QueryGenOptions& options);

// One JSONL line in `kda wiki eval`'s format: {"query", "expect": [...], "kind", "source"}.
std::string query_jsonl(const GeneratedQuery& q);

}  // namespace kda::wiki
