#include "loop/knowledge_tools.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <regex>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "agent/tool_args.h"
#include "ncu/analyze.h"
#include "ncu/csv_pages.h"
#include "ncu/diff.h"
#include "ncu/report_reader.h"
#include "util/fs.h"
#include "util/strings.h"

#ifdef KDA_HAVE_WIKI
#include "wiki/wiki.h"
#endif

namespace kda::loop {

namespace stdfs = std::filesystem;
using agent::ToolOutcome;
using agent::ToolSpec;
using nlohmann::json;

struct KnowledgeTools::Wiki {
#ifdef KDA_HAVE_WIKI
  std::unique_ptr<wiki::Index> index;
#endif
};

namespace {

constexpr int kMaxPriorities = 5;
constexpr size_t kMaxShowChars = 60000;
constexpr size_t kMaxExtraPages = 4;
constexpr const char* kOutsideRoots = "outside the directories open to this tool";

// ---- text ---------------------------------------------------------------------------------------

using util::utf8_cut;
using util::valid_utf8;

// At most `n` bytes of `s` (cut at a character boundary), with a note saying what was left out.
std::string bounded(std::string s, size_t n, std::string_view hint) {
  s = valid_utf8(s);
  if (s.size() <= n) return s;
  size_t total = s.size();
  s.resize(utf8_cut(s, n));
  s += fmt::format("\n[truncated: {} of {} characters shown{}{}]", s.size(), total, hint.empty() ? "" : "; ", hint);
  return s;
}

// ---- arguments ----------------------------------------------------------------------------------

ToolOutcome error(std::string text, std::string code) { return {valid_utf8(text), true, {{"error", std::move(code)}}}; }

// A call's arguments read against the tool's declarations (agent/tool_args.h): unknown keys are
// refused (a misspelt filter would otherwise be ignored silently), types and ranges are checked.
struct ToolCall {
  ToolCall(const char* tool, const std::vector<agent::ArgSpec>& specs, const json& args) : tool(tool), a(specs, args) {}
  bool failed() const { return a.error().has_value(); }
  ToolOutcome outcome() const {  // the texts here are always valid UTF-8 (a bad enum value is echoed)
    ToolOutcome o = *a.refusal(tool);
    o.text = valid_utf8(o.text);
    return o;
  }
  const char* tool;
  agent::ArgValues a;
};

// The tools' arguments, one declaration each (the schema and the reader come from them).
std::vector<agent::ArgSpec> wiki_search_args(size_t max_hits) {
  using namespace agent;
  return {string_arg("query", "search words, e.g. \"wgmma pipelining mbarrier\"").required().non_empty(),
          integer_arg("limit", fmt::format("results, 1..{} (default 5)", max_hits))
              .in_range(1, static_cast<long long>(max_hits)),
          string_arg("arch", "only chunks for this architecture (sm90, H200, hopper, sm100, ...)"),
          string_arg("op", "only this operation (gemm, attention, moe, topk, gdn, dsa, ...)"),
          string_arg("technique", "only this technique (tma, wgmma, split-k, persistent, ...)"),
          enum_arg("kind", "only this kind of chunk", {"page", "doc", "code", "pr", "ncu", "lesson"}),
          string_arg("repo", "only this repository (\"knowledge\" for the authored pages)"),
          string_arg("language", "only this language: cuda, cpp, python, markdown, json, diff")};
}

std::vector<agent::ArgSpec> wiki_show_args(size_t max_output_chars) {
  using namespace agent;
  return {string_arg("id", "the id from a wiki_search hit").required().non_empty(),
          integer_arg("max_chars", fmt::format("text to return at most (default {})", max_output_chars))
              .in_range(200, static_cast<long long>(kMaxShowChars))};
}

const std::vector<agent::ArgSpec>& ncu_analyze_args() {
  using namespace agent;
  static const std::vector<ArgSpec> specs = {
      string_arg("report", "path of the .ncu-rep file (or one CSV page)").required().non_empty(),
      string_list_arg("extra_pages",
                      "more CSV pages of the same report to merge (e.g. the source page), same path rule",
                      kMaxExtraPages),
      string_arg("kernel", "only kernels whose demangled name matches this regular expression"),
      integer_arg("max_priorities", "priorities per kernel, 1..5 (default 5)").in_range(1, kMaxPriorities)};
  return specs;
}

const std::vector<agent::ArgSpec>& ncu_diff_args() {
  using namespace agent;
  static const std::vector<ArgSpec> specs = {
      string_arg("before", "the baseline report (.ncu-rep or CSV page)").required().non_empty(),
      string_arg("after", "the new report").required().non_empty()};
  return specs;
}

// ---- rendering ----------------------------------------------------------------------------------

#ifdef KDA_HAVE_WIKI
std::string citation(const std::string& repo, const std::string& commit, const std::string& path, int start, int end) {
  return fmt::format("{}@{}:{}:{}-{}", repo, commit.empty() ? "worktree" : commit.substr(0, 12), path, start, end);
}
#endif

json priorities_data(const ncu::Analysis& a) {
  json ks = json::array();
  for (const auto& k : a.kernels) {
    json ids = json::array();
    for (const auto& p : k.priorities) ids.push_back(p.id);
    ks.push_back({{"id", k.id}, {"name", valid_utf8(k.name)}, {"priorities", ids}});
  }
  return ks;
}

}  // namespace

// ---- host ---------------------------------------------------------------------------------------

KnowledgeTools::KnowledgeTools(KnowledgeToolsOptions options)
    : options_(std::move(options)), wiki_(std::make_unique<Wiki>()) {
  std::error_code ec;
  const stdfs::path cwd = stdfs::current_path(ec);
  for (const auto& r : options_.roots) {
    if (r.empty()) continue;
    stdfs::path full = r.is_absolute() ? r : cwd / r;
    stdfs::path c = stdfs::weakly_canonical(full, ec);
    roots_.push_back(fs::lexically_clean(ec ? full : c));
  }
  options_.max_hits = std::max<size_t>(1, options_.max_hits);
}

KnowledgeTools::~KnowledgeTools() = default;

bool KnowledgeTools::wiki_built() {
#ifdef KDA_HAVE_WIKI
  return true;
#else
  return false;
#endif
}

std::vector<ToolSpec> KnowledgeTools::tools() const {
  std::vector<ToolSpec> t;
  if (wiki_built()) {
    t.push_back(
        {"wiki_search",
         "Search KernelWiki: kda's authored pages on Hopper features (TMA, wgmma, mbarrier, clusters, FP8), "
         "techniques (warp specialisation, pipelining, split-K, swizzling, persistent kernels, top-k, paged KV), "
         "diagnosis patterns (symptom -> metrics -> techniques) and the contest kernels, plus any ingested source "
         "code of production kernel libraries and PRs. BM25 over identifier-aware words: `warp specialized` finds "
         "KernelTmaWarpSpecializedPingpong; aliases expand (H200 = sm90, TMA = cp.async.bulk). Each hit gives "
         "an id for wiki_show, its citation repo@commit:path:lines, tags and the best-matching lines.",
         agent::args_schema(wiki_search_args(options_.max_hits)), true});
    t.push_back({"wiki_show",
                 "Read one KernelWiki chunk or page in full by the id a wiki_search hit gives (a page id such as "
                 "hopper/tma, or repo:path:line), with its citation line, tags, related pages and sources.",
                 agent::args_schema(wiki_show_args(options_.max_output_chars)), true});
  }
  t.push_back(
      {"ncu_analyze",
       "Analyse an Nsight Compute report (.ncu-rep, read natively; or ncu's CSV pages raw/details/source) and get "
       "at most five ranked priorities per kernel, each with its evidence (metric values, hot source lines), "
       "expected gain, effort and related KernelWiki pages; plus the headline (duration, SM/memory/DRAM throughput "
       "vs peak, roofline), occupancy limiter, warp stalls and memory efficiency. The report must lie in the "
       "workspace or the run directory (paths are relative to the workspace).",
       agent::args_schema(ncu_analyze_args()), true});
  t.push_back({"ncu_diff",
               "Compare two Nsight Compute reports of the same program (before and after a change): per matched "
               "kernel, what moved and by how much (duration, throughputs, occupancy, stalls, cache hit rates, bank "
               "conflicts, sectors per request, spills) and the ranked priorities before and after. Same path rule "
               "as ncu_analyze.",
               agent::args_schema(ncu_diff_args()), true});
  return t;
}

ToolOutcome KnowledgeTools::call(const std::string& name, const json& arguments) {
  std::lock_guard<std::mutex> lock(mu_);
  if (wiki_built() && name == "wiki_search") return wiki_search(arguments);
  if (wiki_built() && name == "wiki_show") return wiki_show(arguments);
  if (name == "ncu_analyze") return ncu_analyze(arguments);
  if (name == "ncu_diff") return ncu_diff(arguments);
  return error("unknown tool: " + name, "unknown_tool");
}

// ---- wiki ---------------------------------------------------------------------------------------

#ifdef KDA_HAVE_WIKI

namespace {

// The index, opened on first use (which may index knowledge/); an empty index is an error with a hint.
Result<wiki::Index*> open_wiki(std::unique_ptr<wiki::Index>& slot, const stdfs::path& db) {
  if (!slot) {
    auto index = wiki::open_index(db);
    if (!index.ok()) {
      return Status(index.status().kind(), "the KernelWiki index could not be opened: " + index.status().message());
    }
    slot = std::move(*index);
  }
  auto files = slot->file_count("");
  if (!files.ok()) return files.status();
  if (*files == 0) {
    slot.reset();  // look again next time: someone may ingest meanwhile
    return Status::not_found(
        "the KernelWiki index is empty: no knowledge/ directory was found to index (set KDA_KNOWLEDGE_DIR) and "
        "nothing was ingested (kda wiki ingest <path>)");
  }
  return slot.get();
}

}  // namespace

ToolOutcome KnowledgeTools::wiki_search(const json& args) {
  ToolCall c("wiki_search", wiki_search_args(options_.max_hits), args);
  if (c.failed()) return c.outcome();
  wiki::SearchRequest req;
  req.query = *c.a.string("query");
  req.limit = static_cast<int>(
      c.a.integer("limit").value_or(std::min<long long>(5, static_cast<long long>(options_.max_hits))));
  req.filters.arch = c.a.string("arch").value_or("");
  req.filters.op = c.a.string("op").value_or("");
  req.filters.technique = c.a.string("technique").value_or("");
  req.filters.kind = c.a.string("kind").value_or("");
  req.filters.repo = c.a.string("repo").value_or("");
  req.filters.language = c.a.string("language").value_or("");

  auto index = open_wiki(wiki_->index, options_.wiki_db);
  if (!index.ok()) return error("wiki_search: " + index.status().message(), "no_index");
  auto hits = (*index)->search(req);
  if (!hits.ok()) return error("wiki_search: " + hits.status().message(), "search_failed");

  json filters = json::object();
  const std::pair<const char*, const std::string*> named[] = {
      {"arch", &req.filters.arch}, {"op", &req.filters.op},     {"technique", &req.filters.technique},
      {"kind", &req.filters.kind}, {"repo", &req.filters.repo}, {"language", &req.filters.language}};
  for (const auto& [k, v] : named)
    if (!v->empty()) filters[k] = valid_utf8(*v);
  json data = {{"query", valid_utf8(req.query)}, {"filters", filters}, {"results", json::array()}};
  if (hits->empty()) {
    return {valid_utf8(fmt::format("No results for '{}'{}. Try fewer or other words{}.", req.query,
                                   filters.empty() ? "" : " with filters " + filters.dump(),
                                   filters.empty() ? "" : ", or drop a filter")),
            false, data};
  }
  // Phase: render each hit, then fit the whole under the output bound (whole hits only).
  std::string text = fmt::format("{} result{} for '{}':\n\n", hits->size(), hits->size() == 1 ? "" : "s", req.query);
  size_t shown = 0;
  for (const auto& h : *hits) {
    std::string one =
        fmt::format("{}. {}  [{}{}]\n   id: {}\n   cite: {}", shown + 1, h.title.empty() ? h.path : h.title, h.kind,
                    h.unit.empty() || h.unit == h.kind ? "" : "/" + h.unit, h.id,
                    citation(h.repo, h.commit, h.path, h.start_line, h.end_line));
    if (h.file_hits > 1) one += fmt::format("  ({} matching chunks in this file)", h.file_hits);
    one += "\n";
    if (!h.tags.empty()) one += "   tags: " + util::join(h.tags, ", ") + "\n";
    if (!h.matched_terms.empty()) one += "   matched: " + util::join(h.matched_terms, ", ") + "\n";
    std::string snippet = bounded(h.snippet, options_.max_snippet_chars, "");
    size_t pos = 0;
    while (pos < snippet.size()) {
      size_t nl = snippet.find('\n', pos);
      if (nl == std::string::npos) nl = snippet.size();
      one += "   | " + snippet.substr(pos, nl - pos) + "\n";
      pos = nl + 1;
    }
    one += fmt::format("   read it: wiki_show {{\"id\": {}}}\n\n", json(valid_utf8(h.id)).dump());
    one = valid_utf8(one);
    if (text.size() + one.size() > options_.max_output_chars && shown > 0) {
      text += fmt::format("[{} more result(s) left out to keep this short; narrow the query or use a filter]\n",
                          hits->size() - shown);
      break;
    }
    text += bounded(one, options_.max_output_chars, "");
    data["results"].push_back({{"id", valid_utf8(h.id)},
                               {"title", valid_utf8(h.title)},
                               {"kind", h.kind},
                               {"location", valid_utf8(h.location)},
                               {"score", h.score}});
    ++shown;
  }
  return {std::move(text), false, std::move(data)};
}

ToolOutcome KnowledgeTools::wiki_show(const json& args) {
  ToolCall c("wiki_show", wiki_show_args(options_.max_output_chars), args);
  if (c.failed()) return c.outcome();
  const std::string id = *c.a.string("id");
  auto max_chars = c.a.integer("max_chars");
  auto index = open_wiki(wiki_->index, options_.wiki_db);
  if (!index.ok()) return error("wiki_show: " + index.status().message(), "no_index");
  auto r = (*index)->show(id);
  if (!r.ok()) {
    if (r.status().kind() == ErrorKind::kNotFound)
      return error(fmt::format("wiki_show: no chunk with id '{}' (use an id from a wiki_search result)", id),
                   "not_found");
    return error("wiki_show: " + r.status().message(), "show_failed");
  }
  std::string cite = citation(r->repo, r->commit, r->path, r->start_line, r->end_line);
  std::string text = fmt::format("# {}\ncite: {}  [{}]{}\n", r->title.empty() ? r->id : r->title, cite, r->kind,
                                 r->license.empty() ? "" : "  licence: " + r->license);
  if (!r->tags.empty()) text += "tags: " + util::join(r->tags, ", ") + "\n";
  if (!r->related.empty()) text += "related (wiki_show ids): " + util::join(r->related, ", ") + "\n";
  if (!r->sources.empty()) text += "sources: " + util::join(r->sources, "; ") + "\n";
  text += "\n" + r->body;
  if (!text.empty() && text.back() != '\n') text += "\n";
  size_t limit = max_chars ? static_cast<size_t>(*max_chars) : options_.max_output_chars;
  json data = {{"id", valid_utf8(r->id)}, {"location", valid_utf8(cite)}, {"chars", r->body.size()}};
  return {bounded(std::move(text), limit, "pass a larger max_chars to read more"), false, std::move(data)};
}

#else

ToolOutcome KnowledgeTools::wiki_search(const json&) {
  return error("wiki_search: kda was built without the KernelWiki (no SQLite)", "unavailable");
}
ToolOutcome KnowledgeTools::wiki_show(const json&) {
  return error("wiki_show: kda was built without the KernelWiki (no SQLite)", "unavailable");
}

#endif  // KDA_HAVE_WIKI

// ---- ncu ----------------------------------------------------------------------------------------

Result<stdfs::path> KnowledgeTools::resolve_report(const std::string& path) const {
  if (path.empty()) return Status::bad_input("empty report path");
  if (path.find('\0') != std::string::npos) return Status::bad_input("the report path contains a NUL byte");
  if (roots_.empty()) return Status::bad_input("no directory is open to this tool (no roots were given)");
  stdfs::path p(path);
  stdfs::path full = p.is_absolute() ? p : roots_.front() / p;
  std::error_code ec;
  // weakly_canonical resolves `..` and every symlink of the existing prefix: the check is on where the
  // file really is, before anything about it is said.
  stdfs::path canon = stdfs::weakly_canonical(full, ec);
  if (ec) return Status::bad_input(fmt::format("{}: cannot resolve the path ({})", path, ec.message()));
  canon = fs::lexically_clean(canon);
  bool inside =
      std::any_of(roots_.begin(), roots_.end(), [&](const stdfs::path& r) { return fs::is_within(canon, r); });
  if (!inside) {
    std::vector<std::string> rs;
    for (const auto& r : roots_) rs.push_back(r.string());
    return Status::bad_input(
        fmt::format("{} resolves to {}, which is {} ({})", path, canon.string(), kOutsideRoots, util::join(rs, ", ")));
  }
  if (!stdfs::exists(canon, ec)) return Status::not_found(fmt::format("{}: no such file", path));
  if (!stdfs::is_regular_file(canon, ec)) return Status::bad_input(fmt::format("{}: not a regular file", path));
  return canon;
}

std::string KnowledgeTools::display_path(const stdfs::path& resolved) const {
  if (!roots_.empty() && fs::is_within(resolved, roots_.front())) {
    auto rel = resolved.lexically_relative(roots_.front());
    if (!rel.empty() && rel != ".") return rel.string();
  }
  return resolved.string();
}

Result<std::string> KnowledgeTools::read_report_bytes(const std::string& path, stdfs::path* resolved) const {
  KDA_ASSIGN_OR_RETURN(stdfs::path canon, resolve_report(path));
  if (resolved) *resolved = canon;
  // O_NOFOLLOW: a symlink swapped in after the check is refused; O_NONBLOCK: a FIFO cannot hang kda
  // (and fstat refuses it anyway).
  int fd = ::open(canon.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return Status::bad_input(fmt::format("{}: cannot open ({})", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::bad_input(fmt::format("{}: not a regular file", path));
  }
  if (static_cast<uint64_t>(st.st_size) > options_.max_report_bytes) {
    ::close(fd);
    return Status::bad_input(fmt::format("{}: {} bytes is larger than the {} bytes this tool reads", path,
                                         static_cast<uint64_t>(st.st_size), options_.max_report_bytes));
  }
  std::string bytes;
  bytes.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  bytes.resize(got);
  return bytes;
}

namespace {

// The same reading as ncu::load_report (sniff the .ncu-rep magic, else a CSV page; pages merged),
// on bytes read through the path rule.
Result<ncu::Report> parse_report(const std::string& bytes, const std::string& shown) {
  Result<ncu::Report> r = ncu::looks_like_ncu_rep(bytes) ? ncu::parse_ncu_rep(bytes) : ncu::parse_csv_page(bytes);
  if (!r.ok()) return r.status().with_context(shown);
  return r;
}

}  // namespace

ToolOutcome KnowledgeTools::ncu_analyze(const json& args) {
  ToolCall c("ncu_analyze", ncu_analyze_args(), args);
  if (c.failed()) return c.outcome();
  const std::string report = *c.a.string("report");
  const std::vector<std::string> extra = c.a.strings("extra_pages");
  ncu::AnalyzeOptions opt;
  opt.kernel_regex = c.a.string("kernel").value_or("");
  if (auto m = c.a.integer("max_priorities")) opt.max_priorities = static_cast<size_t>(*m);

  // Phase: read every page through the path rule and merge them into one report.
  std::optional<ncu::Report> merged;
  std::vector<std::string> shown;
  std::vector<std::string> inputs = {report};
  inputs.insert(inputs.end(), extra.begin(), extra.end());
  for (const auto& in : inputs) {
    stdfs::path resolved;
    auto bytes = read_report_bytes(in, &resolved);
    if (!bytes.ok()) {
      bool outside = bytes.status().message().find(kOutsideRoots) != std::string::npos;
      return error("ncu_analyze: " + bytes.status().message(), outside ? "outside_roots" : "bad_report");
    }
    shown.push_back(display_path(resolved));
    auto one = parse_report(*bytes, shown.back());
    if (!one.ok()) return error("ncu_analyze: " + one.status().message(), "bad_report");
    if (!merged)
      merged = std::move(*one);
    else
      ncu::merge_report(*merged, std::move(*one));
  }
  // Phase: analyse and render (REPORT.md's text), bounded.
  auto analysis = ncu::analyze(*merged, opt);
  if (!analysis.ok()) return error("ncu_analyze: " + analysis.status().message(), "analyze_failed");
  std::string md = ncu::to_markdown(*analysis);
  json data = {{"report", util::join(shown, ", ")}, {"kernels", priorities_data(*analysis)}};
  return {bounded(std::move(md), options_.max_report_output_chars, "pass kernel (a regex) to analyse fewer kernels"),
          false, std::move(data)};
}

ToolOutcome KnowledgeTools::ncu_diff(const json& args) {
  ToolCall c("ncu_diff", ncu_diff_args(), args);
  if (c.failed()) return c.outcome();
  const std::string before_path = *c.a.string("before");
  const std::string after_path = *c.a.string("after");
  std::optional<ncu::Report> reports[2];
  std::string shown[2];
  const std::string* paths[2] = {&before_path, &after_path};
  for (int i = 0; i < 2; ++i) {
    stdfs::path resolved;
    auto bytes = read_report_bytes(*paths[i], &resolved);
    if (!bytes.ok()) {
      bool outside = bytes.status().message().find(kOutsideRoots) != std::string::npos;
      return error(fmt::format("ncu_diff: {}: {}", i == 0 ? "before" : "after", bytes.status().message()),
                   outside ? "outside_roots" : "bad_report");
    }
    shown[i] = display_path(resolved);
    auto r = parse_report(*bytes, shown[i]);
    if (!r.ok())
      return error(fmt::format("ncu_diff: {}: {}", i == 0 ? "before" : "after", r.status().message()), "bad_report");
    reports[i] = std::move(*r);
  }
  ncu::ReportDiff d = ncu::diff_reports(*reports[0], *reports[1]);
  std::string md = fmt::format("Diff of {} (before) and {} (after)\n\n", shown[0], shown[1]) + ncu::to_markdown(d, 1.0);
  json verdicts = json::array();
  for (const auto& k : d.kernels) verdicts.push_back({{"kernel", valid_utf8(k.name)}, {"verdict", k.verdict}});
  json data = {{"before", shown[0]},
               {"after", shown[1]},
               {"kernels", verdicts},
               {"only_before", d.only_before.size()},
               {"only_after", d.only_after.size()}};
  return {bounded(std::move(md), options_.max_report_output_chars, ""), false, std::move(data)};
}

}  // namespace kda::loop
