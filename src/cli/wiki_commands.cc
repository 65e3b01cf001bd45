// `kda wiki ...`: KernelWiki ingest, search, show, grep, stats and eval (see docs/wiki.md).
#ifdef KDA_HAVE_WIKI

#include <algorithm>
#include <ostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "util/fs.h"
#include "wiki/eval.h"
#include "wiki/query_gen.h"
#include "wiki/wiki.h"

namespace kda::cli {

namespace {

using nlohmann::json;
namespace stdfs = std::filesystem;

OptionSpec db_option() {
  return {.name = "db",
          .metavar = "PATH",
          .help = "index database (default: $KDA_WIKI_DIR/wiki.db, else $XDG_DATA_HOME/kda/wiki.db)"};
}

std::vector<OptionSpec> filter_options() {
  return {
      {.name = "arch", .metavar = "ARCH", .help = "only chunks for this architecture (sm90, H200, hopper, sm100, ...)"},
      {.name = "op", .metavar = "OP", .help = "only this operation (gemm, attention, moe, topk, gdn, dsa, ...)"},
      {.name = "technique", .metavar = "T", .help = "only this technique (tma, wgmma, split-k, persistent, ...)"},
      {.name = "kind", .metavar = "KIND", .help = "only this kind: page, doc, code, pr, ncu, lesson"},
      {.name = "repo", .metavar = "REPO", .help = "only this repository (as given to ingest --repo)"},
      {.name = "language", .metavar = "LANG", .help = "only this language: cuda, cpp, python, markdown, json, diff"}};
}

// The kinds of wiki entries; "" is no filter (search) or each file's own kind (ingest).
const std::vector<std::string> kKinds = {"", "page", "doc", "code", "pr", "ncu", "lesson"};

Status check_kind(const std::string& kind) {
  if (std::find(kKinds.begin(), kKinds.end(), kind) != kKinds.end()) return {};
  return Status::bad_input("--kind: expected page, doc, code, pr, ncu or lesson, got '" + kind + "'");
}

Result<wiki::Filters> filters_of(const Args& a) {
  wiki::Filters f;
  f.arch = a.value_or("arch", "");
  f.op = a.value_or("op", "");
  f.technique = a.value_or("technique", "");
  f.kind = a.value_or("kind", "");
  f.repo = a.value_or("repo", "");
  f.language = a.value_or("language", "");
  KDA_RETURN_IF_ERROR(check_kind(f.kind));
  return f;
}

Result<std::unique_ptr<wiki::Index>> open_from(const Args& a, Io& io) {
  return wiki::open_index(stdfs::path(a.value_or("db", "")), &io.err);
}

json hit_json(const wiki::SearchHit& h) {
  return {{"id", h.id},
          {"title", h.title},
          {"kind", h.kind},
          {"language", h.language},
          {"unit", h.unit},
          {"repo", h.repo},
          {"commit", h.commit},
          {"license", h.license},
          {"path", h.path},
          {"start_line", h.start_line},
          {"end_line", h.end_line},
          {"tags", h.tags},
          {"matched_terms", h.matched_terms},
          {"location", h.location},
          {"snippet", h.snippet},
          {"open_command", h.open_command},
          {"score", h.score},
          {"file_hits", h.file_hits}};
}

// ---- ingest -------------------------------------------------------------------------------------

int run_ingest(const Args& a, Io& io) {
  auto index = open_from(a, io);
  if (!index.ok()) return fail(io, "kda wiki", index.status());
  wiki::IngestOptions opt;
  opt.repo = a.value_or("repo", "");
  opt.kind = a.value_or("kind", "");
  if (Status st = check_kind(opt.kind); !st.ok()) return fail(io, "kda wiki", st);
  std::vector<stdfs::path> paths;
  for (const auto& p : a.positionals("path")) paths.emplace_back(p);
  auto st = (*index)->ingest(paths, opt, &io.err);
  if (!st.ok()) return fail(io, "kda wiki", st.status());
  if (a.flag("json")) {
    io.out << json{{"files_seen", st->files_seen},
                   {"files_indexed", st->files_indexed},
                   {"files_unchanged", st->files_unchanged},
                   {"files_removed", st->files_removed},
                   {"files_failed", st->files_failed},
                   {"chunks_added", st->chunks_added},
                   {"chunks_removed", st->chunks_removed},
                   {"bytes_read", st->bytes_read},
                   {"seconds", st->seconds}}
                  .dump(2)
           << "\n";
  } else {
    io.out << fmt::format(
        "{} files ({} indexed, {} unchanged, {} removed, {} skipped as malformed), {} chunks added, {} removed, {:.1f} "
        "MB in {:.1f} s\n",
        st->files_seen, st->files_indexed, st->files_unchanged, st->files_removed, st->files_failed, st->chunks_added,
        st->chunks_removed, st->bytes_read / 1e6, st->seconds);
  }
  return kExitOk;
}

// ---- search -------------------------------------------------------------------------------------

int run_search(const Args& a, Io& io) {
  auto limit = a.integer("limit");
  if (!limit.ok()) return fail(io, "kda wiki", limit.status());
  wiki::SearchRequest req;
  for (const auto& w : a.positionals("query")) req.query += (req.query.empty() ? "" : " ") + w;
  req.limit = static_cast<int>(limit->value_or(10));
  auto filters = filters_of(a);
  if (!filters.ok()) return fail(io, "kda wiki", filters.status());
  req.filters = *filters;
  auto index = open_from(a, io);
  if (!index.ok()) return fail(io, "kda wiki", index.status());
  auto hits = (*index)->search(req);
  if (!hits.ok()) return fail(io, "kda wiki", hits.status());
  if (a.flag("json")) {
    json arr = json::array();
    for (const auto& h : *hits) arr.push_back(hit_json(h));
    io.out << json{{"query", req.query}, {"results", arr}}.dump(2) << "\n";
    return kExitOk;
  }
  if (hits->empty()) io.err << "kda wiki: no results for '" << req.query << "'\n";
  int n = 0;
  for (const auto& h : *hits) {
    io.out << fmt::format("{}. {}  [{}{}]\n", ++n, h.title.empty() ? h.path : h.title, h.kind,
                          h.unit.empty() || h.unit == h.kind ? "" : "/" + h.unit);
    io.out << "   " << h.location;
    if (h.file_hits > 1) io.out << fmt::format("  ({} matching chunks in this file)", h.file_hits);
    io.out << "\n";
    if (!h.tags.empty()) {
      std::string t;
      for (const auto& x : h.tags) t += (t.empty() ? "" : ", ") + x;
      io.out << "   tags: " << t << "\n";
    }
    std::string m;
    for (const auto& x : h.matched_terms) m += (m.empty() ? "" : ", ") + x;
    io.out << "   matched: " << m << "\n";
    size_t pos = 0;
    while (pos < h.snippet.size()) {
      size_t nl = h.snippet.find('\n', pos);
      if (nl == std::string::npos) nl = h.snippet.size();
      io.out << "   " << std::string_view(h.snippet).substr(pos, nl - pos) << "\n";
      pos = nl + 1;
    }
    io.out << "   open: " << h.open_command << "\n\n";
  }
  return kExitOk;
}

// ---- show ---------------------------------------------------------------------------------------

int run_show(const Args& a, Io& io) {
  auto index = open_from(a, io);
  if (!index.ok()) return fail(io, "kda wiki", index.status());
  auto r = (*index)->show(a.positional("id"));
  if (!r.ok()) return fail(io, "kda wiki", r.status());
  if (a.flag("json")) {
    io.out << json{{"id", r->id},
                   {"title", r->title},
                   {"kind", r->kind},
                   {"language", r->language},
                   {"unit", r->unit},
                   {"repo", r->repo},
                   {"commit", r->commit},
                   {"license", r->license},
                   {"path", r->path},
                   {"start_line", r->start_line},
                   {"end_line", r->end_line},
                   {"symbols", r->symbols},
                   {"headings", r->headings},
                   {"tags", r->tags},
                   {"related", r->related},
                   {"sources", r->sources},
                   {"arch", r->arch},
                   {"op", r->op},
                   {"technique", r->technique},
                   {"body", r->body}}
                  .dump(2)
           << "\n";
    return kExitOk;
  }
  io.out << fmt::format("# {}\n{}@{}:{}:{}-{}  [{}]{}\n", r->title.empty() ? r->id : r->title, r->repo,
                        r->commit.empty() ? "worktree" : r->commit.substr(0, 12), r->path, r->start_line, r->end_line,
                        r->kind, r->license.empty() ? "" : "  licence: " + r->license);
  auto list = [&](const char* name, const std::vector<std::string>& v) {
    if (v.empty()) return;
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    io.out << name << ": " << s << "\n";
  };
  list("tags", r->tags);
  list("related", r->related);
  list("sources", r->sources);
  io.out << "\n" << r->body;
  if (!r->body.empty() && r->body.back() != '\n') io.out << "\n";
  return kExitOk;
}

// ---- grep ---------------------------------------------------------------------------------------

int run_grep(const Args& a, Io& io) {
  auto limit = a.integer("limit");
  if (!limit.ok()) return fail(io, "kda wiki", limit.status());
  auto filters = filters_of(a);
  if (!filters.ok()) return fail(io, "kda wiki", filters.status());
  auto index = open_from(a, io);
  if (!index.ok()) return fail(io, "kda wiki", index.status());
  auto hits = (*index)->grep(a.positional("regex"), *filters, static_cast<int>(limit->value_or(100)));
  if (!hits.ok()) return fail(io, "kda wiki", hits.status());
  if (a.flag("json")) {
    json arr = json::array();
    for (const auto& h : *hits)
      arr.push_back({{"id", h.id}, {"repo", h.repo}, {"path", h.path}, {"line", h.line}, {"text", h.text}});
    io.out << json{{"regex", a.positional("regex")}, {"matches", arr}}.dump(2) << "\n";
  } else {
    for (const auto& h : *hits) io.out << fmt::format("{}:{}:{}: {}\n", h.repo, h.path, h.line, h.text);
  }
  return hits->empty() ? kExitFailed : kExitOk;
}

// ---- stats --------------------------------------------------------------------------------------

int run_stats(const Args& a, Io& io) {
  auto index = open_from(a, io);
  if (!index.ok()) return fail(io, "kda wiki", index.status());
  auto s = (*index)->stats();
  if (!s.ok()) return fail(io, "kda wiki", s.status());
  if (a.flag("json")) {
    io.out << json{{"files", s->files},
                   {"chunks", s->chunks},
                   {"db_bytes", s->db_bytes},
                   {"chunks_by_kind", s->chunks_by_kind},
                   {"chunks_by_repo", s->chunks_by_repo},
                   {"repo_commits", s->repo_commits}}
                  .dump(2)
           << "\n";
    return kExitOk;
  }
  io.out << fmt::format("{} files, {} chunks, {:.1f} MB\n", s->files, s->chunks, s->db_bytes / 1e6);
  for (const auto& [k, n] : s->chunks_by_kind) io.out << fmt::format("  kind {:<10} {:>9} chunks\n", k, n);
  for (const auto& [r, n] : s->chunks_by_repo) {
    auto c = s->repo_commits[r];
    io.out << fmt::format("  repo {:<28} {:>9} chunks  {}\n", r, n, c.empty() ? "" : "@" + c.substr(0, 12));
  }
  return kExitOk;
}

// ---- eval ---------------------------------------------------------------------------------------

int run_eval(const Args& a, Io& io) {
  auto k = a.integer("k");
  if (!k.ok()) return fail(io, "kda wiki", k.status());
  auto repeat = a.integer("repeat");
  if (!repeat.ok()) return fail(io, "kda wiki", repeat.status());
  auto min_rate = a.number("min-hit-rate");
  if (!min_rate.ok()) return fail(io, "kda wiki", min_rate.status());
  // Every file first, so a bad one fails before any search.
  std::vector<std::pair<std::string, std::vector<wiki::EvalQuery>>> sets;
  for (const std::string& file : a.positionals("queries")) {
    auto text = fs::read_file(file);
    if (!text.ok()) return fail(io, "kda wiki", text.status());
    auto queries = wiki::parse_eval_queries(*text, file, static_cast<int>(k->value_or(5)));
    if (!queries.ok()) return fail(io, "kda wiki", queries.status());
    sets.emplace_back(file, std::move(*queries));
  }
  auto index = open_from(a, io);
  if (!index.ok()) return fail(io, "kda wiki", index.status());
  auto ranks = [](const wiki::RankStats& s) {
    return json{{"n", s.n}, {"hit1", s.hit1}, {"hit5", s.hit5}, {"hit10", s.hit10}, {"mrr", s.mrr}};
  };
  json out = json::array();
  bool below = false;
  for (const auto& [file, queries] : sets) {
    auto r = wiki::evaluate(**index, queries, static_cast<int>(repeat->value_or(3)));
    if (!r.ok()) return fail(io, "kda wiki", r.status());
    below = below || (*min_rate && r->hit_rate < **min_rate);
    if (a.flag("json")) {
      json per = json::array();
      for (const auto& q : r->per_query)
        per.push_back({{"query", q.query}, {"rank", q.rank}, {"top", q.top}, {"ms", q.ms}, {"cpu_ms", q.cpu_ms}});
      json kinds = json::object();
      for (const auto& [kind, ks] : r->by_kind) kinds[kind] = ranks(ks);
      out.push_back(
          {{"file", file},
           {"queries", queries.size()},
           {"k", k->value_or(5)},
           {"hits", r->hits},
           {"hit_rate", r->hit_rate},
           {"ranks", ranks(r->all)},
           {"by_kind", kinds},
           {"latency_ms", {{"p50", r->p50_ms}, {"p95", r->p95_ms}, {"max", r->max_ms}, {"samples", r->samples}}},
           {"cpu_ms", {{"p50", r->cpu_p50_ms}, {"p95", r->cpu_p95_ms}}},
           {"per_query", per}});
      continue;
    }
    if (!a.flag("quiet-misses"))
      for (size_t i = 0; i < r->per_query.size(); ++i) {
        const auto& q = r->per_query[i];
        if (q.rank >= 1 && q.rank <= queries[i].k) continue;
        io.out << "miss: " << q.query << "\n";
        for (const auto& id : q.top) io.out << "      " << id << "\n";
      }
    io.out << fmt::format(
        "{}: hit@{}: {}/{} = {:.3f}; latency p50 {:.2f} ms, p95 {:.2f} ms, max {:.2f} ms ({} searches)\n", file,
        k->value_or(5), r->hits, queries.size(), r->hit_rate, r->p50_ms, r->p95_ms, r->max_ms, r->samples);
    for (const auto& [kind, ks] : r->by_kind)
      io.out << fmt::format("  {:<20} {:>4} queries  hit@1 {:.3f}  hit@5 {:.3f}  hit@10 {:.3f}  MRR {:.3f}\n", kind,
                            ks.n, ks.hit1, ks.hit5, ks.hit10, ks.mrr);
  }
  if (a.flag("json")) io.out << (out.size() == 1 ? out[0] : out).dump(2) << "\n";
  return below ? kExitFailed : kExitOk;
}

// ---- queries ------------------------------------------------------------------------------------

int run_queries(const Args& a, Io& io) {
  wiki::QueryGenOptions o;
  const std::filesystem::path root = a.positional("dir");
  o.repo = a.value_or("repo", std::filesystem::absolute(root).lexically_normal().filename().string());
  auto count = a.integer("count");
  if (!count.ok()) return fail(io, "kda wiki", count.status());
  auto seed = a.integer("seed");
  if (!seed.ok()) return fail(io, "kda wiki", seed.status());
  if (*count) o.max_queries = static_cast<size_t>(std::max<long long>(0, **count));
  if (*seed) o.seed = static_cast<uint64_t>(**seed);
  auto qs = wiki::generate_queries(root, o);
  if (!qs.ok()) return fail(io, "kda wiki", qs.status());
  std::string lines;
  for (const auto& q : *qs) lines += wiki::query_jsonl(q) + "\n";
  if (auto file = a.value("output")) {
    if (Status st = fs::write_file_atomic(*file, lines); !st.ok()) return fail(io, "kda wiki", st);
    io.err << fmt::format("wiki queries: {} queries from {} (repo {}) written to {}\n", qs->size(), root.string(),
                          o.repo, *file);
  } else {
    io.out << lines;
  }
  return qs->empty() ? kExitFailed : kExitOk;
}

}  // namespace

std::vector<CommandSpec> wiki_commands() {
  std::vector<CommandSpec> v;
  v.push_back(
      {.name = "wiki ingest",
       .summary = "index pages, source trees, git checkouts, PR records and kda artifacts",
       .description =
           "Adds files and directories to the KernelWiki index. Directories are walked for .cu .cuh .h .hpp .cc "
           ".cpp .py .md files (hidden and build* directories skipped); code is chunked by kernel, function and "
           "type, markdown by section, pages with YAML front matter (id, type, tags, related, sources) are one "
           "chunk each. A git checkout's commit (git rev-parse HEAD) and LICENSE are recorded. A .jsonl file is "
           "read as PR records (repo, number, title, body, merge_commit, changed_files, diff); a .json file as an "
           "ncu analysis. Re-ingest is incremental: unchanged files are skipped by content hash and files gone "
           "from an ingested directory are removed. Progress goes to stderr.",
       .positionals = {{.name = "path", .help = "files or directories to ingest", .variadic = true}},
       .options = {json_option(),
                   db_option(),
                   {.name = "repo", .metavar = "NAME", .help = "repository name (default: the directory's name)"},
                   {.name = "kind", .metavar = "KIND", .help = "override the kind: page, doc, code, pr, ncu, lesson"}},
       .run = run_ingest});
  std::vector<OptionSpec> search_opts = {
      json_option(),
      db_option(),
      {.name = "limit", .short_name = 'n', .metavar = "N", .help = "results to show", .default_value = "10"}};
  for (auto& f : filter_options()) search_opts.push_back(f);
  v.push_back({.name = "wiki search",
               .summary = "search kernels, docs and authored knowledge (BM25, identifier-aware)",
               .description =
                   "Searches the index: identifiers match whole and by parts (`warp specialized` finds "
                   "KernelTmaWarpSpecializedPingpong), aliases from knowledge/aliases.txt expand (H200 = sm90, TMA = "
                   "cp.async.bulk, ...). All words must match; when that finds too little, any word may. Several hits "
                   "in one file collapse into one result. The first search builds the index from knowledge/ "
                   "($KDA_KNOWLEDGE_DIR, else <exe>/../knowledge, else ./knowledge) when it has no authored pages.",
               .positionals = {{.name = "query", .help = "search words", .variadic = true}},
               .options = search_opts,
               .run = run_search});
  v.push_back({.name = "wiki show",
               .summary = "print one chunk or page by id",
               .description = "Prints a chunk by the id a search result gives (a page id such as technique/tma, or "
                              "repo:path:line), with its location, tags, related pages and sources.",
               .positionals = {{.name = "id", .help = "chunk id"}},
               .options = {json_option(), db_option()},
               .run = run_show});
  std::vector<OptionSpec> grep_opts = {
      json_option(),
      db_option(),
      {.name = "limit", .short_name = 'n', .metavar = "N", .help = "maximum matching lines", .default_value = "100"}};
  for (auto& f : filter_options()) grep_opts.push_back(f);
  v.push_back({.name = "wiki grep",
               .summary = "regular-expression search over indexed text",
               .description = "Matches a POSIX extended regular expression line by line over every indexed chunk "
                              "(filters apply). Exit code 1 when nothing matches.",
               .positionals = {{.name = "regex", .help = "POSIX extended regular expression"}},
               .options = grep_opts,
               .run = run_grep});
  v.push_back({.name = "wiki stats",
               .summary = "what the index holds",
               .description = "Files, chunks by kind and repository, recorded commits, and the database size.",
               .options = {json_option(), db_option()},
               .run = run_stats});
  v.push_back(
      {.name = "wiki eval",
       .summary = "hit@k and latency of a query set",
       .description = "Runs each query of a JSONL file ({\"query\": ..., \"expect\": [page ids or repo/path suffixes], "
                      "\"filters\": {...}}) and reports the fraction whose top k contains an expected item, and search "
                      "latency percentiles. Exit code 1 when --min-hit-rate is given and not reached.",
       .positionals = {{.name = "queries",
                        .help = "JSONL query files (bench/wiki_queries.jsonl, kda wiki queries)",
                        .variadic = true}},
       .options = {json_option(),
                   db_option(),
                   {.name = "k", .metavar = "K", .help = "results considered per query", .default_value = "5"},
                   {.name = "repeat", .metavar = "N", .help = "timed runs per query", .default_value = "3"},
                   {.name = "min-hit-rate", .metavar = "R", .help = "fail (exit 1) when a file is below this hit rate"},
                   {.name = "quiet-misses", .help = "do not list the missed queries"}},
       .run = run_eval});
  v.push_back(
      {.name = "wiki queries",
       .summary = "generate a query set from a source tree (queries nobody tuned the ranking to)",
       .description =
           "Walks DIR as wiki ingest does and, for every definition (kernel, function, type) with a comment "
           "right above it or at the top of its body and every file that opens with one (licence headers "
           "skipped), makes a query of the comment's words (stop words and the definition's own name "
           "dropped, then about a third of the rest, the order shuffled, all from --seed) whose answer is "
           "the file, as <repo>/<path>. Writes JSONL lines {query, expect, kind, source} for `kda wiki eval`, "
           "which reports them per kind (definition_comment, file_comment). Ingest DIR under the same --repo. "
           "Exit 1 when the tree gives no query.",
       .positionals = {{.name = "dir", .help = "source tree"}},
       .options =
           {{.name = "repo", .metavar = "NAME", .help = "repository name (default: the directory's name)"},
            {.name = "count", .metavar = "N", .help = "at most N queries (a seeded sample)", .default_value = "200"},
            {.name = "seed", .metavar = "S", .help = "sampling and paraphrasing seed", .default_value = "1"},
            {.name = "output", .short_name = 'o', .metavar = "FILE", .help = "write the JSONL to FILE"}},
       .run = run_queries});
  return v;
}

}  // namespace kda::cli

#endif  // KDA_HAVE_WIKI
