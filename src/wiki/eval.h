// Retrieval quality and latency of a query set: hit@k (a query hits when one of its expected pages or
// files is among the top k results), hit@1/5/10 and the mean reciprocal rank over the top 10 (also per
// kind of query: hand-written, or generated from a definition's or a file's comment), and search
// latency percentiles. Used by `kda wiki eval` and bench/wiki_eval.cc.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "util/status.h"
#include "wiki/index.h"

namespace kda::wiki {

struct EvalQuery {
  SearchRequest request;            // limit: max(k, 10), so hit@10 and the MRR can be read
  std::vector<std::string> expect;  // page ids, or path suffixes (repo/path or path)
  int k = 5;                        // a hit is an expected item in the top k
  std::string kind = "hand";        // "hand", or what generated it (query_gen.h)
};

// hit@1/5/10 and MRR (1/rank of the first expected item within the top 10, 0 beyond) of some queries.
struct RankStats {
  int n = 0;
  double hit1 = 0, hit5 = 0, hit10 = 0, mrr = 0;
};

struct EvalResult {
  struct PerQuery {
    std::string query;
    int rank = 0;                  // 1-based rank of the first expected result, 0 = miss
    std::vector<std::string> top;  // result ids
    double ms = 0, cpu_ms = 0;     // median wall-clock and process CPU time of its searches
  };
  std::vector<PerQuery> per_query;
  int hits = 0;  // queries with an expected item in their top k
  double hit_rate = 0;
  RankStats all;
  std::map<std::string, RankStats> by_kind;
  double p50_ms = 0, p95_ms = 0, max_ms = 0;  // wall clock, all searches
  // Process CPU time per search: on a shared, overloaded machine this tracks the work done, where wall
  // clock also counts time waiting for a core.
  double cpu_p50_ms = 0, cpu_p95_ms = 0;
  size_t samples = 0;
};

// Parses JSONL lines {"query": str, "expect": [str...], "filters": {arch, op, technique, kind, repo, language},
// "kind": str (optional, default "hand")}.
Result<std::vector<EvalQuery>> parse_eval_queries(const std::string& text, const std::string& origin, int k);

// True when hit `h` is expected item `e` (a page id, or a path suffix on a '/' boundary).
bool hit_matches(const SearchHit& h, const std::string& e);

// Runs every query `repeat` times (latency samples), ranks from the last run.
Result<EvalResult> evaluate(Index& index, const std::vector<EvalQuery>& queries, int repeat);

}  // namespace kda::wiki
