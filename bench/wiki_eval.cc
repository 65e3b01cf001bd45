// KernelWiki benchmark: ingest rate, index size, search latency p50/p95 and hit@k of a query set.
//
//   wiki_eval --db /tmp/wiki-bench.db [--ingest NAME=DIR]... [--knowledge DIR] [--k 5] [--repeat 5]
//             [--json] bench/wiki_queries.jsonl
//
// Each --ingest adds a source tree under repository NAME (timed); --knowledge adds authored pages as repo
// "knowledge". The query set is bench/wiki_queries.jsonl (see src/wiki/eval.h for the format).
// Built by the `wiki_eval` target (not part of `all`): cmake --build <build> --target wiki_eval
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/fs.h"
#include "wiki/eval.h"
#include "wiki/wiki.h"

namespace {

int usage() {
  std::cerr << "usage: wiki_eval --db PATH [--ingest NAME=DIR]... [--knowledge DIR] [--k K] [--repeat N] [--json] "
               "QUERIES.jsonl\n";
  return 2;
}

// The human-readable report: ingest rates, index size, misses with what was found instead, hit@k and latency.
void print_text(const nlohmann::json& report, const auto& stats, const auto& r, size_t n_queries, int k) {
  for (const auto& i : report["ingest"])
    std::cout << fmt::format(
        "ingest {}: {} files ({} indexed), {} chunks, {:.1f} MB in {:.1f} s ({:.0f} files/s, {:.2f} MB/s)\n",
        i["repo"].get<std::string>(), i["files"].get<int64_t>(), i["files_indexed"].get<int64_t>(),
        i["chunks"].get<int64_t>(), i["mb"].get<double>(), i["seconds"].get<double>(), i["files_per_s"].get<double>(),
        i["mb_per_s"].get<double>());
  std::cout << fmt::format("index: {} files, {} chunks, {:.1f} MB\n", stats.files, stats.chunks, stats.db_bytes / 1e6);
  for (const auto& q : r.per_query)
    if (!q.rank) {
      std::cout << "miss: " << q.query << "\n";
      for (const auto& id : q.top) std::cout << "      " << id << "\n";
    }
  std::cout << fmt::format(
      "hit@{}: {}/{} = {:.3f}; search latency p50 {:.2f} ms, p95 {:.2f} ms, max {:.2f} ms; "
      "CPU per search p50 {:.2f} ms, p95 {:.2f} ms ({} searches)\n",
      k, r.hits, n_queries, r.hit_rate, r.p50_ms, r.p95_ms, r.max_ms, r.cpu_p50_ms, r.cpu_p95_ms, r.samples);
}

}  // namespace

int main(int argc, char** argv) {
  std::string db, knowledge, queries_file;
  std::vector<std::pair<std::string, std::string>> ingests;
  int k = 5, repeat = 5;
  bool as_json = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--db")
      db = next();
    else if (a == "--knowledge")
      knowledge = next();
    else if (a == "--k")
      k = std::atoi(next().c_str());
    else if (a == "--repeat")
      repeat = std::atoi(next().c_str());
    else if (a == "--json")
      as_json = true;
    else if (a == "--ingest") {
      std::string v = next();
      auto eq = v.find('=');
      if (eq == std::string::npos) return usage();
      ingests.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    } else if (!a.empty() && a[0] != '-')
      queries_file = a;
    else
      return usage();
  }
  if (db.empty() || queries_file.empty() || k <= 0) return usage();

  auto index = kda::wiki::Index::open(db);
  if (!index.ok()) {
    std::cerr << index.status().message() << "\n";
    return 3;
  }
  std::optional<std::filesystem::path> kdir;
  if (!knowledge.empty()) kdir = knowledge;
  auto aliases = kda::wiki::load_aliases(kdir);
  if (!aliases.ok()) {
    std::cerr << aliases.status().message() << "\n";
    return 2;
  }
  (*index)->set_aliases(*aliases);

  nlohmann::json report;
  report["ingest"] = nlohmann::json::array();
  if (!knowledge.empty()) ingests.insert(ingests.begin(), {kda::wiki::kKnowledgeRepo, knowledge});
  for (const auto& [name, dir] : ingests) {
    kda::wiki::IngestOptions opt;
    opt.repo = name;
    auto st = (*index)->ingest({dir}, opt, &std::cerr);
    if (!st.ok()) {
      std::cerr << st.status().message() << "\n";
      return 3;
    }
    report["ingest"].push_back({{"repo", name},
                                {"files", st->files_seen},
                                {"files_indexed", st->files_indexed},
                                {"files_unchanged", st->files_unchanged},
                                {"files_failed", st->files_failed},
                                {"chunks", st->chunks_added},
                                {"mb", st->bytes_read / 1e6},
                                {"seconds", st->seconds},
                                {"files_per_s", st->seconds > 0 ? st->files_seen / st->seconds : 0},
                                {"mb_per_s", st->seconds > 0 ? st->bytes_read / 1e6 / st->seconds : 0}});
  }
  auto stats = (*index)->stats();
  if (!stats.ok()) {
    std::cerr << stats.status().message() << "\n";
    return 3;
  }
  report["index"] = {{"files", stats->files},
                     {"chunks", stats->chunks},
                     {"db_mb", stats->db_bytes / 1e6},
                     {"chunks_by_repo", stats->chunks_by_repo},
                     {"repo_commits", stats->repo_commits}};

  auto text = kda::fs::read_file(queries_file);
  if (!text.ok()) {
    std::cerr << text.status().message() << "\n";
    return 2;
  }
  auto queries = kda::wiki::parse_eval_queries(*text, queries_file, k);
  if (!queries.ok()) {
    std::cerr << queries.status().message() << "\n";
    return 2;
  }
  auto r = kda::wiki::evaluate(**index, *queries, repeat);
  if (!r.ok()) {
    std::cerr << r.status().message() << "\n";
    return 3;
  }
  nlohmann::json per = nlohmann::json::array();
  for (const auto& q : r->per_query)
    per.push_back({{"query", q.query}, {"rank", q.rank}, {"top", q.top}, {"ms", q.ms}, {"cpu_ms", q.cpu_ms}});
  report["eval"] = {{"queries", queries->size()},
                    {"k", k},
                    {"hits", r->hits},
                    {"hit_rate", r->hit_rate},
                    {"p50_ms", r->p50_ms},
                    {"p95_ms", r->p95_ms},
                    {"max_ms", r->max_ms},
                    {"samples", r->samples},
                    {"cpu_p50_ms", r->cpu_p50_ms},
                    {"cpu_p95_ms", r->cpu_p95_ms},
                    {"per_query", per}};
  if (as_json) {
    std::cout << report.dump(2) << "\n";
    return 0;
  }
  print_text(report, *stats, *r, queries->size(), k);
  return 0;
}
