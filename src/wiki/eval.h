// Retrieval quality and latency of a query set: hit@k (a query hits when one of its expected pages or
// files is among the top k results) and search latency percentiles. Used by `kda wiki eval` and
// bench/wiki_eval.cc.
#pragma once

#include <string>
#include <vector>

#include "util/status.h"
#include "wiki/index.h"

namespace kda::wiki {

struct EvalQuery {
  SearchRequest request;
  std::vector<std::string> expect;  // page ids, or path suffixes (repo/path or path)
};

struct EvalResult {
  struct PerQuery {
    std::string query;
    int rank = 0;  // 1-based rank of the first expected result, 0 = miss
    std::vector<std::string> top;  // result ids
    double ms = 0, cpu_ms = 0;     // median wall-clock and process CPU time of its searches
  };
  std::vector<PerQuery> per_query;
  int hits = 0;
  double hit_rate = 0;
  double p50_ms = 0, p95_ms = 0, max_ms = 0;  // wall clock, all searches
  // Process CPU time per search: on a shared, overloaded machine this tracks the work done, where wall
  // clock also counts time waiting for a core.
  double cpu_p50_ms = 0, cpu_p95_ms = 0;
  size_t samples = 0;
};

// Parses JSONL lines {"query": str, "expect": [str...], "filters": {arch, op, technique, kind, repo, language}}.
Result<std::vector<EvalQuery>> parse_eval_queries(const std::string& text, const std::string& origin, int k);

// True when hit `h` is expected item `e` (a page id, or a path suffix on a '/' boundary).
bool hit_matches(const SearchHit& h, const std::string& e);

// Runs every query `repeat` times (latency samples), ranks from the last run.
Result<EvalResult> evaluate(Index& index, const std::vector<EvalQuery>& queries, int repeat);

}  // namespace kda::wiki
