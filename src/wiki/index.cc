#include "wiki/index.h"

#include <regex.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "util/fs.h"
#include "util/sha256.h"
#include "util/strings.h"
#include "wiki/document.h"
#include "wiki/facets.h"
#include "wiki/query.h"
#include "wiki/source_info.h"
#include "sqlite/database.h"
#include "wiki/tokenizer.h"

namespace kda::wiki {

namespace stdfs = std::filesystem;
using sqlite::Database;
using sqlite::Statement;

namespace {

constexpr int kSchemaVersion = 2;
// BM25 field weights: title, symbols, headings, body, path, tags.
constexpr const char* kRank = "bm25(10.0, 8.0, 4.0, 1.0, 3.0, 4.0)";
// Authored pages are short and curated; a small boost keeps them above long code chunks that merely
// mention the same words.
constexpr double kPageBoost = 1.5;
constexpr int kCommitEvery = 400;  // files per transaction
constexpr int64_t kOptimizeAfterChunks = 5000;
// In the loose (any word) pass, words found in more than this fraction of chunks are dropped when rarer
// words remain: ranking tens of thousands of chunks that merely contain "load" costs time and adds noise.
constexpr double kCommonWordFraction = 0.08;
// A file named for what the query asks (named_barrier.hpp for "named barrier ids", heuristics/sm90.hpp for
// "sm90 heuristics") is where it is defined, not one more place that uses the words: its chunks' scores
// are multiplied by 1 + kStemBonus * (share of the file name's parts among the query's words) +
// kDirBonus * (the same for its two nearest directories). Set on DeepGEMM's and flash-attention's
// generated queries, the hand-written set and three questions of issue 23; FlashMLA, ThunderKittens and
// mamba held out (bench/results/wiki.md).
constexpr double kStemBonus = 1.0;
constexpr double kDirBonus = 0.25;
// A chunk that defines what the query names (a symbol of two or more identifier parts, most of them
// query words) is the definition, not one more use: its score is multiplied by 1 + kDefBonus x the
// best such share among its symbols. Set on the same tuning sets as the file-name bonus, at 108k
// chunks; FlashMLA, ThunderKittens and mamba held out (bench/results/wiki.md).
constexpr double kDefBonus = 0.5;
constexpr size_t kDefMinParts = 2;

// ---- FTS5 tokenizer "kda": identifier-aware terms for documents, whitespace split for queries -------

struct KdaTokenizer {};

int tok_create(void*, const char**, int, Fts5Tokenizer** out) {
  *out = reinterpret_cast<Fts5Tokenizer*>(new KdaTokenizer());
  return SQLITE_OK;
}

void tok_delete(Fts5Tokenizer* t) { delete reinterpret_cast<KdaTokenizer*>(t); }

int tok_tokenize(Fts5Tokenizer*, void* ctx, int flags, const char* text, int n,
                 int (*token)(void*, int, const char*, int, int, int)) {
  std::string_view s(text, static_cast<size_t>(n));
  if (flags & FTS5_TOKENIZE_QUERY) {
    // Queries are built by query.cc from terms already in index form: split on whitespace only.
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n')) ++i;
      size_t b = i;
      while (i < s.size() && !(s[i] == ' ' || s[i] == '\t' || s[i] == '\n')) ++i;
      if (i > b) {
        std::string low = ascii_lower(s.substr(b, i - b));
        int rc = token(ctx, 0, low.data(), static_cast<int>(low.size()), static_cast<int>(b), static_cast<int>(i));
        if (rc != SQLITE_OK) return rc;
      }
    }
    return SQLITE_OK;
  }
  int rc = SQLITE_OK;
  for_each_term(s, [&](const Term& t) {
    if (t.text.size() > 64) return true;  // hashes, base64 blobs: not worth indexing
    rc = token(ctx, t.colocated ? FTS5_TOKEN_COLOCATED : 0, t.text.data(), static_cast<int>(t.text.size()),
               static_cast<int>(t.begin), static_cast<int>(t.end));
    return rc == SQLITE_OK;
  });
  return rc;
}

Status register_tokenizer(Database& db) {
  fts5_api* api = nullptr;
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v2(db.handle(), "SELECT fts5(?1)", -1, &raw, nullptr) != SQLITE_OK)
    return Status::internal("SQLite has no FTS5: " + db.error());
  sqlite3_bind_pointer(raw, 1, &api, "fts5_api_ptr", nullptr);
  sqlite3_step(raw);
  sqlite3_finalize(raw);
  if (api == nullptr || api->iVersion < 2) return Status::internal("SQLite has no FTS5 API");
  static fts5_tokenizer tokenizer = {tok_create, tok_delete, tok_tokenize};
  if (api->xCreateTokenizer(api, "kda", nullptr, &tokenizer, nullptr) != SQLITE_OK)
    return Status::internal("registering the FTS5 tokenizer: " + db.error());
  return {};
}

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS files(
  id INTEGER PRIMARY KEY, repo TEXT NOT NULL, path TEXT NOT NULL, root TEXT NOT NULL, hash TEXT NOT NULL,
  commit_sha TEXT, license TEXT, kind TEXT, language TEXT, ingested_at INTEGER, UNIQUE(repo, path));
CREATE INDEX IF NOT EXISTS files_root ON files(root);
CREATE TABLE IF NOT EXISTS chunks(
  id INTEGER PRIMARY KEY, file_id INTEGER NOT NULL, kind TEXT, language TEXT, repo TEXT, unit TEXT,
  start_line INTEGER, end_line INTEGER, arch TEXT, op TEXT, technique TEXT, key TEXT NOT NULL, path TEXT,
  tags TEXT, title TEXT, symbols TEXT, headings TEXT, related TEXT, sources TEXT, body TEXT);
CREATE INDEX IF NOT EXISTS chunks_file ON chunks(file_id);
CREATE INDEX IF NOT EXISTS chunks_key ON chunks(key);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
  title, symbols, headings, body, path, tags, content='chunks', content_rowid='id', tokenize='kda');
CREATE TRIGGER IF NOT EXISTS chunks_ai AFTER INSERT ON chunks BEGIN
  INSERT INTO chunks_fts(rowid, title, symbols, headings, body, path, tags)
  VALUES (new.id, new.title, new.symbols, new.headings, new.body, new.path, new.tags);
END;
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_vocab USING fts5vocab('chunks_fts', 'row');
CREATE TRIGGER IF NOT EXISTS chunks_ad AFTER DELETE ON chunks BEGIN
  INSERT INTO chunks_fts(chunks_fts, rowid, title, symbols, headings, body, path, tags)
  VALUES ('delete', old.id, old.title, old.symbols, old.headings, old.body, old.path, old.tags);
END;
)sql";

std::vector<std::string> split_lines(std::string_view s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t nl = s.find('\n', pos);
    if (nl == std::string_view::npos) nl = s.size();
    if (nl > pos) out.emplace_back(s.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

}  // namespace

bool skipped_directory(const std::string& name) {
  return name.starts_with(".") || name.starts_with("build") || name == "node_modules" || name == "__pycache__";
}

struct Index::Impl {
  std::unique_ptr<Database> db;
  stdfs::path file;
  Statement find_file, delete_chunks, delete_file, insert_file, insert_chunk;

  Status prepare_ingest();
  Status remove_file(int64_t file_id, IngestStats& st);
  Status ingest_pr_records(const std::string& content, const std::string& root, IngestStats& st);
  Status remove_gone(const std::string& root, const std::string& repo, const std::unordered_set<std::string>& seen,
                     IngestStats& st);
  Status store(const std::string& repo, const std::string& root, const std::string& hash, const std::string& commit,
               const std::string& license, Document& doc, IngestStats& st);
  // Filter clause over chunks aliased `c`, and its bind values (starting at parameter `first`).
  std::string filter_sql(const Filters& f, const AliasTable& aliases, std::vector<std::string>& binds);
};

Index::Index(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Index::~Index() = default;

Result<std::unique_ptr<Index>> Index::open(const stdfs::path& db_file) {
  if (db_file.has_parent_path()) KDA_RETURN_IF_ERROR(fs::ensure_dir(db_file.parent_path()));
  auto impl = std::make_unique<Impl>();
  impl->file = db_file;
  KDA_ASSIGN_OR_RETURN(impl->db, Database::open(db_file));
  KDA_RETURN_IF_ERROR(register_tokenizer(*impl->db));
  KDA_RETURN_IF_ERROR(impl->db->exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"));
  KDA_RETURN_IF_ERROR(impl->db->exec(kSchema).with_context(db_file.string()));
  KDA_RETURN_IF_ERROR(impl->db->exec(
      fmt::format("INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', '{}');", kSchemaVersion)));
  // The default rank of the FTS table is BM25 with the field weights, so `ORDER BY rank` uses them.
  KDA_RETURN_IF_ERROR(
      impl->db->exec(fmt::format("INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('rank', '{}');", kRank)));
  return std::unique_ptr<Index>(new Index(std::move(impl)));
}

Status Index::Impl::prepare_ingest() {
  KDA_ASSIGN_OR_RETURN(find_file, db->prepare("SELECT id, hash FROM files WHERE repo = ?1 AND path = ?2"));
  KDA_ASSIGN_OR_RETURN(delete_chunks, db->prepare("DELETE FROM chunks WHERE file_id = ?1"));
  KDA_ASSIGN_OR_RETURN(delete_file, db->prepare("DELETE FROM files WHERE id = ?1"));
  KDA_ASSIGN_OR_RETURN(
      insert_file,
      db->prepare("INSERT INTO files(repo, path, root, hash, commit_sha, license, kind, language, ingested_at) "
                  "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, strftime('%s','now'))"));
  KDA_ASSIGN_OR_RETURN(
      insert_chunk,
      db->prepare(
          "INSERT INTO chunks(file_id, key, title, symbols, headings, body, path, tags, start_line, end_line, unit, "
          "kind, language, repo, arch, op, technique, related, sources) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)"));
  return {};
}

Status Index::Impl::remove_file(int64_t file_id, IngestStats& st) {
  delete_chunks.bind(1, file_id);
  KDA_RETURN_IF_ERROR(delete_chunks.run());
  st.chunks_removed += sqlite3_changes(db->handle());
  delete_file.bind(1, file_id);
  return delete_file.run();
}

Status Index::Impl::store(const std::string& repo, const std::string& root, const std::string& hash,
                          const std::string& commit, const std::string& license, Document& doc, IngestStats& st) {
  insert_file.bind(1, repo).bind(2, doc.path).bind(3, root).bind(4, hash).bind(5, commit).bind(6, license);
  insert_file.bind(7, doc.kind).bind(8, doc.language);
  KDA_RETURN_IF_ERROR(insert_file.run());
  int64_t file_id = sqlite3_last_insert_rowid(db->handle());
  std::string tags = util::join(doc.tags, "\n"), related = util::join(doc.related, "\n"),
              sources = util::join(doc.sources, "\n");
  int section = 0;
  for (auto& dc : doc.chunks) {
    Chunk& c = dc.chunk;
    std::string key = !dc.page_id.empty() ? (section == 0 ? dc.page_id : fmt::format("{}#{}", dc.page_id, section))
                                          : fmt::format("{}:{}:{}", repo, doc.path, c.start_line);
    ++section;
    std::string symbols = util::join(c.symbols, "\n");
    Facets f = detect_facets(c.title + "\n" + symbols + "\n" + doc.path + "\n" + c.body, doc.tags);
    insert_chunk.bind(1, file_id).bind(2, key).bind(3, c.title).bind(4, symbols).bind(5, c.headings);
    insert_chunk.bind(6, c.body).bind(7, doc.path).bind(8, tags).bind_int(9, c.start_line).bind_int(10, c.end_line);
    insert_chunk.bind(11, c.unit).bind(12, doc.kind).bind(13, doc.language).bind(14, repo);
    insert_chunk.bind(15, Facets::joined(f.arch)).bind(16, Facets::joined(f.op)).bind(17, Facets::joined(f.technique));
    insert_chunk.bind(18, related).bind(19, sources);
    KDA_RETURN_IF_ERROR(insert_chunk.run());
    ++st.chunks_added;
  }
  ++st.files_indexed;
  return {};
}

namespace {

// The files of a source tree kda indexes, sorted: known languages only (only .json for ncu
// records), no build, VCS or vendored directories.
std::vector<stdfs::path> indexable_files(const stdfs::path& dir, const std::string& kind) {
  std::error_code ec;
  std::vector<stdfs::path> files;
  for (auto it = stdfs::recursive_directory_iterator(dir, stdfs::directory_options::skip_permission_denied, ec);
       !ec && it != stdfs::recursive_directory_iterator(); it.increment(ec)) {
    const auto& e = *it;
    std::string name = e.path().filename().string();
    if (e.is_directory(ec)) {
      if (skipped_directory(name)) it.disable_recursion_pending();
      continue;
    }
    if (!e.is_regular_file(ec) || language_of(name).empty()) continue;
    if (kind == "ncu" && !name.ends_with(".json")) continue;
    files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

// PR records: each record of a JSONL file is its own "file" (repo, pr/<number>), keyed to the
// JSONL as its root; an unchanged record (by the hash of its text) is skipped.
Status Index::Impl::ingest_pr_records(const std::string& content, const std::string& root, IngestStats& st) {
  auto recs = parse_pr_records(content, root);
  if (!recs.ok()) return recs.status();
  for (auto& d : *recs) {
    ++st.files_seen;
    std::string line_hash =
        sha256_hex(d.repo + "\n" + d.path + "\n" + d.commit + "\n" + (d.chunks.empty() ? "" : d.chunks[0].chunk.body) +
                   std::to_string(d.chunks.size()));
    for (const auto& c : d.chunks) line_hash = sha256_hex(line_hash + c.chunk.body);
    find_file.bind(1, d.repo).bind(2, d.path);
    auto found = find_file.step();
    if (!found.ok()) return found.status();
    bool same = *found && find_file.text_at(1) == line_hash;
    int64_t old_id = *found ? find_file.int_at(0) : 0;
    find_file.reset();
    if (same) {
      ++st.files_unchanged;
      continue;
    }
    if (old_id) KDA_RETURN_IF_ERROR(remove_file(old_id, st));
    KDA_RETURN_IF_ERROR(store(d.repo, root, line_hash, d.commit, "", d, st));
  }
  return {};
}

// Removes the files indexed under (root, repo) that the latest walk of the tree did not see.
Status Index::Impl::remove_gone(const std::string& root, const std::string& repo,
                                const std::unordered_set<std::string>& seen, IngestStats& st) {
  KDA_ASSIGN_OR_RETURN(Statement q, db->prepare("SELECT id, path FROM files WHERE root = ?1 AND repo = ?2"));
  q.bind(1, root).bind(2, repo);
  std::vector<int64_t> gone;
  while (true) {
    KDA_ASSIGN_OR_RETURN(bool row, q.step());
    if (!row) break;
    if (!seen.count(q.text_at(1))) gone.push_back(q.int_at(0));
  }
  for (int64_t id : gone) {
    KDA_RETURN_IF_ERROR(remove_file(id, st));
    ++st.files_removed;
  }
  return {};
}

Result<IngestStats> Index::ingest(const std::vector<stdfs::path>& paths, const IngestOptions& options,
                                  std::ostream* progress) {
  IngestStats st;
  Impl& im = *impl_;
  KDA_RETURN_IF_ERROR(im.prepare_ingest());
  auto t0 = std::chrono::steady_clock::now();
  auto last_report = t0;
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  auto report = [&](bool final, const std::string& what) {
    if (!progress || options.quiet) return;
    double s = elapsed();
    *progress << fmt::format(
        "wiki ingest: {}: {} files ({} new or changed, {} unchanged, {:.0f} files/s), {} chunks{}\n", what,
        st.files_seen, st.files_indexed, st.files_unchanged, s > 0 ? st.files_seen / s : 0.0, st.chunks_added,
        final ? fmt::format(", {:.1f} s", s) : "");
  };
  int pending = 0;
  KDA_RETURN_IF_ERROR(im.db->exec("BEGIN"));
  // Any early error return rolls the whole ingest back, leaving the index as it was.
  struct Transaction {
    Database* db;
    bool committed = false;
    ~Transaction() {
      if (!committed) (void)db->exec("ROLLBACK");
    }
  } tx{im.db.get()};
  auto maybe_commit = [&]() -> Status {
    if (++pending < kCommitEvery) return {};
    pending = 0;
    KDA_RETURN_IF_ERROR(im.db->exec("COMMIT"));
    return im.db->exec("BEGIN");
  };

  // Ingests one file's content under (repo, rel) unless its hash is unchanged.
  auto ingest_content = [&](const std::string& repo, const std::string& root, const std::string& rel,
                            const std::string& content, const std::string& commit, const std::string& license,
                            std::unordered_set<std::string>* seen) -> Status {
    ++st.files_seen;
    st.bytes_read += static_cast<int64_t>(content.size());
    if (seen) seen->insert(rel);
    std::string hash = sha256_hex(content);
    im.find_file.bind(1, repo).bind(2, rel);
    KDA_ASSIGN_OR_RETURN(bool found, im.find_file.step());
    int64_t old_id = found ? im.find_file.int_at(0) : 0;
    std::string old_hash = found ? im.find_file.text_at(1) : "";
    im.find_file.reset();
    if (found && old_hash == hash) {
      ++st.files_unchanged;
      return {};
    }
    if (found) KDA_RETURN_IF_ERROR(im.remove_file(old_id, st));
    auto doc = parse_document(rel, content, options.kind);
    if (!doc.ok()) {
      // One malformed file (bad front matter, invalid JSON) must not abort a large ingest: warn, skip.
      ++st.files_failed;
      if (progress)
        *progress << "wiki ingest: skipped " << (stdfs::path(root) / rel).string() << ": " << doc.status().message()
                  << "\n";
      return maybe_commit();
    }
    KDA_RETURN_IF_ERROR(im.store(repo, root, hash, commit, license, *doc, st));
    return maybe_commit();
  };

  for (const auto& p : paths) {
    std::error_code ec;
    stdfs::path abs = stdfs::weakly_canonical(p, ec);
    if (ec || !stdfs::exists(abs)) return Status::not_found(p.string() + ": no such file or directory");
    if (stdfs::is_regular_file(abs)) {
      std::string name = abs.filename().string();
      KDA_ASSIGN_OR_RETURN(std::string content, fs::read_file(abs));
      if (name.ends_with(".jsonl")) {
        KDA_RETURN_IF_ERROR(im.ingest_pr_records(content, abs.string(), st));
        continue;
      }
      std::string repo = options.repo.empty() ? "local" : options.repo;
      stdfs::path dir = abs.parent_path();
      KDA_RETURN_IF_ERROR(ingest_content(repo, abs.string(), name, content, git_head(dir), "", nullptr));
      continue;
    }
    // A directory: a source tree, a git checkout, or a KernelWiki / knowledge directory.
    std::string root = abs.string();
    std::string repo = options.repo.empty() ? abs.filename().string() : options.repo;
    std::string commit = git_head(abs);
    std::string license = license_of(abs);
    std::unordered_set<std::string> seen;
    const std::vector<stdfs::path> files = indexable_files(abs, options.kind);
    for (const auto& f : files) {
      std::string rel = stdfs::relative(f, abs, ec).generic_string();
      auto content = fs::read_file(f);
      if (!content.ok()) continue;                 // vanished or unreadable: skip, it is removed below if gone
      if (content->size() > (4u << 20)) continue;  // generated giants (>4 MiB) are not knowledge
      KDA_RETURN_IF_ERROR(ingest_content(repo, root, rel, *content, commit, license, &seen));
      auto now = std::chrono::steady_clock::now();
      if (now - last_report > std::chrono::seconds(2)) {
        report(false, repo);
        last_report = now;
      }
    }
    KDA_RETURN_IF_ERROR(im.remove_gone(root, repo, seen, st));  // files gone from this tree since the last ingest
    report(true, repo);
  }
  KDA_RETURN_IF_ERROR(im.db->exec("COMMIT"));
  tx.committed = true;
  // After a bulk load, merge the FTS segments: queries then read one b-tree per term instead of dozens.
  if (st.chunks_added + st.chunks_removed > kOptimizeAfterChunks) {
    if (progress && !options.quiet) *progress << "wiki ingest: optimizing the full-text index\n";
    KDA_RETURN_IF_ERROR(im.db->exec("INSERT INTO chunks_fts(chunks_fts) VALUES ('optimize')"));
  }
  st.seconds = elapsed();
  return st;
}

std::string Index::Impl::filter_sql(const Filters& f, const AliasTable& aliases, std::vector<std::string>& binds) {
  std::string sql;
  auto facet = [&](const char* col, const std::string& v) {
    if (v.empty()) return;
    binds.push_back("% " + aliases.canonical(v) + " %");
    sql += fmt::format(" AND c.{} LIKE ?{}", col, binds.size() + 2);
  };
  auto exact = [&](const char* col, const std::string& v, bool lower) {
    if (v.empty()) return;
    binds.push_back(lower ? ascii_lower(v) : v);
    sql += fmt::format(" AND c.{} = ?{}", col, binds.size() + 2);
  };
  facet("arch", f.arch);
  facet("op", f.op);
  facet("technique", f.technique);
  exact("kind", f.kind, true);
  exact("repo", f.repo, false);
  exact("language", f.language, true);
  return sql;
}

Result<std::string> Index::loose_expression(const QueryPlan& plan) {
  Impl& im = *impl_;
  KDA_ASSIGN_OR_RETURN(Statement n, im.db->prepare("SELECT max(id) FROM chunks"));
  KDA_ASSIGN_OR_RETURN(bool row, n.step());
  double total = row ? static_cast<double>(n.int_at(0)) : 0;
  KDA_ASSIGN_OR_RETURN(Statement df, im.db->prepare("SELECT doc FROM chunks_vocab WHERE term = ?1"));
  auto doc_count = [&](const std::string& term) -> Result<int64_t> {
    df.bind(1, term);
    KDA_ASSIGN_OR_RETURN(bool r, df.step());
    int64_t d = r ? df.int_at(0) : 0;
    df.reset();
    return d;
  };
  std::string loose;
  for (const auto& g : plan.groups) {
    // Estimate: the typed member's rarest part (a phrase occurs at most that often), or its whole term.
    int64_t est = 0;
    for (const auto& parts : g.member_parts) {
      int64_t rarest = -1;
      for (const auto& p : parts) {
        KDA_ASSIGN_OR_RETURN(int64_t d, doc_count(light_stem(p)));
        rarest = rarest < 0 ? d : std::min(rarest, d);
      }
      est += std::max<int64_t>(rarest, 0);
      break;  // the first member is the typed word or the canonical name; enough for an estimate
    }
    if (plan.groups.size() > 1 && total > 0 && static_cast<double>(est) > kCommonWordFraction * total) continue;
    loose += (loose.empty() ? "" : " OR ") + g.loose_expr;
  }
  return loose.empty() ? plan.loose : loose;
}

namespace {

// The multipliers of a chunk's score that come from the query's words: its file named for them
// (kStemBonus, kDirBonus) and its own symbols made of them (kDefBonus).
struct QueryBonus {
  const std::set<std::string>& words;
  std::unordered_map<std::string, double> by_path;

  double share(const std::vector<std::string>& parts) const {
    if (parts.empty()) return 0.0;
    size_t hit = 0;
    for (const auto& part : parts) hit += words.contains(light_stem(part));
    return static_cast<double>(hit) / static_cast<double>(parts.size());
  }
  double of_path(const std::string& path) {
    auto [it, inserted] = by_path.emplace(path, 1.0);
    if (!inserted) return it->second;
    const stdfs::path p(path);
    std::vector<std::string> dirs;
    stdfs::path parent = p.parent_path();
    for (int i = 0; i < 2 && !parent.empty(); ++i, parent = parent.parent_path())
      for (const auto& part : identifier_parts(parent.filename().string())) dirs.push_back(part);
    it->second = 1.0 + kStemBonus * share(identifier_parts(p.stem().string())) + kDirBonus * share(dirs);
    return it->second;
  }
  double of_symbols(std::string_view symbols) const {
    double best = 0;
    for (const auto& sym : split_lines(symbols)) {
      const auto parts = identifier_parts(sym);
      if (parts.size() >= kDefMinParts) best = std::max(best, share(parts));
    }
    return 1.0 + kDefBonus * best;
  }
};

}  // namespace

namespace {

// A hit's matched terms (the query's words or alias members whose parts all occur in the chunk's
// text or metadata) and its snippet (the body line with the most distinct matched parts, with a
// line of context before and two after, numbered from the chunk's first line).
void describe_match(const QueryPlan& plan, const std::string& meta, std::string body, SearchHit& h) {
  // Matched terms: the query's words (or alias members) whose parts all occur in the chunk.
  std::unordered_set<std::string> chunk_terms;
  for_each_term(meta + "\n" + body, [&](const Term& t) {
    chunk_terms.insert(t.text);
    return true;
  });
  std::unordered_set<std::string> leaf;
  for (const auto& g : plan.groups)
    for (size_t m = 0; m < g.members.size(); ++m) {
      const auto& parts = g.member_parts[m];
      bool all = !parts.empty() && std::all_of(parts.begin(), parts.end(),
                                               [&](const std::string& p) { return chunk_terms.count(p) > 0; });
      if (all) {
        h.matched_terms.push_back(g.members[m]);
        for (const auto& p : parts) leaf.insert(p);
      }
    }
  // Snippet: the body line with the most distinct matched parts, with a line of context.
  auto lines = std::vector<std::string_view>();
  while (!body.empty() && body.back() == '\n') body.pop_back();
  for (size_t pos = 0; pos <= body.size();) {
    size_t nl = body.find('\n', pos);
    if (nl == std::string::npos) nl = body.size();
    lines.push_back(std::string_view(body).substr(pos, nl - pos));
    pos = nl + 1;
  }
  size_t best_line = 0;
  size_t best_count = 0;
  for (size_t l = 0; l < lines.size(); ++l) {
    std::unordered_set<std::string> here;
    for_each_term(lines[l], [&](const Term& t) {
      if (leaf.count(t.text)) here.insert(t.text);
      return true;
    });
    if (here.size() > best_count) {
      best_count = here.size();
      best_line = l;
    }
  }
  size_t from = best_line > 0 ? best_line - 1 : 0;
  size_t to = std::min(lines.size(), best_line + 3);
  for (size_t l = from; l < to; ++l) {
    std::string text(lines[l].substr(0, 160));
    h.snippet += fmt::format("{:>5}: {}\n", h.start_line + static_cast<int>(l), text);
  }
}

}  // namespace

Result<std::vector<SearchHit>> Index::search(const SearchRequest& req) {
  Impl& im = *impl_;
  if (req.limit <= 0) return Status::bad_input("--limit must be positive");
  QueryPlan plan = build_query(req.query, aliases_);
  if (plan.groups.empty()) return Status::bad_input("search: the query has no searchable words");
  std::vector<std::string> binds;
  std::string where = im.filter_sql(req.filters, aliases_, binds);
  // Small metadata columns come before `body` in the chunks table, so the join does not read bodies.
  std::string sql =
      where.empty()
          ? std::string(
                "SELECT c.id, c.file_id, f.rank, c.kind, c.path, c.symbols FROM (SELECT rowid, rank FROM chunks_fts "
                "WHERE chunks_fts MATCH ?1 ORDER BY rank LIMIT ?2) AS f JOIN chunks c ON c.id = f.rowid")
          : fmt::format(
                "SELECT c.id, c.file_id, chunks_fts.rank, c.kind, c.path, c.symbols FROM chunks_fts JOIN chunks c ON "
                "c.id = chunks_fts.rowid "
                "WHERE chunks_fts MATCH ?1{} ORDER BY chunks_fts.rank LIMIT ?2",
                where);
  const std::set<std::string> query_words = [&] {
    std::set<std::string> w;
    for (const auto& t : terms_of(req.query))
      if (!t.colocated) w.insert(t.text);
    return w;
  }();
  QueryBonus bonus{query_words, {}};
  KDA_ASSIGN_OR_RETURN(Statement q, im.db->prepare(sql));
  struct Cand {
    int64_t id, file;
    double score;
  };
  std::vector<Cand> cands;
  std::unordered_set<int64_t> have;
  int want = std::max(50, req.limit * 8);
  auto run = [&](const std::string& expr) -> Status {
    q.bind(1, expr).bind(2, static_cast<int64_t>(want));
    for (size_t i = 0; i < binds.size(); ++i) q.bind(static_cast<int>(i) + 3, binds[i]);
    std::vector<Cand> got;
    while (true) {
      KDA_ASSIGN_OR_RETURN(bool row, q.step());
      if (!row) break;
      double s = -q.double_at(2);
      if (q.view_at(3) == "page") s *= kPageBoost;
      s *= bonus.of_path(q.text_at(4)) * bonus.of_symbols(q.view_at(5));
      got.push_back({q.int_at(0), q.int_at(1), s});
    }
    q.reset();
    // Strict matches rank above loose ones; within each pass, by score.
    std::stable_sort(got.begin(), got.end(), [](const Cand& a, const Cand& b) { return a.score > b.score; });
    for (auto& c : got)
      if (have.insert(c.id).second) cands.push_back(c);
    return {};
  };
  KDA_RETURN_IF_ERROR(run(plan.strict));
  std::set<int64_t> files;
  for (auto& c : cands) files.insert(c.file);
  if (static_cast<int>(files.size()) < req.limit && plan.loose != plan.strict) {
    KDA_ASSIGN_OR_RETURN(std::string loose, loose_expression(plan));
    KDA_RETURN_IF_ERROR(run(loose));
  }

  // Collapse: the best chunk of each file stands for the file.
  std::vector<Cand> best;
  std::unordered_map<int64_t, size_t> file_slot;
  std::vector<int> file_hits;
  for (const auto& c : cands) {
    auto [it, inserted] = file_slot.emplace(c.file, best.size());
    if (inserted) {
      best.push_back(c);
      file_hits.push_back(1);
    } else {
      ++file_hits[it->second];
    }
  }
  if (static_cast<int>(best.size()) > req.limit) best.resize(static_cast<size_t>(req.limit));

  KDA_ASSIGN_OR_RETURN(
      Statement d,
      im.db->prepare(
          "SELECT c.key, c.title, c.kind, c.language, c.unit, c.repo, f.commit_sha, f.license, c.path, c.start_line, "
          "c.end_line, c.tags, c.body, c.symbols, c.headings FROM chunks c JOIN files f ON f.id = c.file_id WHERE c.id "
          "= ?1"));
  std::vector<SearchHit> hits;
  for (size_t i = 0; i < best.size(); ++i) {
    d.bind(1, best[i].id);
    KDA_ASSIGN_OR_RETURN(bool row, d.step());
    if (!row) {
      d.reset();
      continue;
    }
    SearchHit h;
    h.id = d.text_at(0);
    h.title = d.text_at(1);
    h.kind = d.text_at(2);
    h.language = d.text_at(3);
    h.unit = d.text_at(4);
    h.repo = d.text_at(5);
    h.commit = d.text_at(6);
    h.license = d.text_at(7);
    h.path = d.text_at(8);
    h.start_line = static_cast<int>(d.int_at(9));
    h.end_line = static_cast<int>(d.int_at(10));
    h.tags = split_lines(d.view_at(11));
    std::string body = d.text_at(12);
    std::string meta =
        d.text_at(1) + "\n" + d.text_at(13) + "\n" + d.text_at(14) + "\n" + h.path + "\n" + d.text_at(11);
    d.reset();
    h.score = best[i].score;
    h.file_hits = file_hits[i];
    h.location = fmt::format("{}@{}:{}:{}-{}", h.repo, h.commit.empty() ? "worktree" : h.commit.substr(0, 12), h.path,
                             h.start_line, h.end_line);
    h.open_command = "kda wiki show " + h.id;

    describe_match(plan, meta, std::move(body), h);
    hits.push_back(std::move(h));
  }
  return hits;
}

Result<ChunkRecord> Index::show(const std::string& id) {
  Impl& im = *impl_;
  const std::string cols =
      "SELECT c.key, c.title, c.kind, c.language, c.unit, c.repo, f.commit_sha, f.license, c.path, c.symbols, "
      "c.headings, c.body, c.start_line, c.end_line, c.tags, c.related, c.sources, c.arch, c.op, c.technique "
      "FROM chunks c JOIN files f ON f.id = c.file_id ";
  std::vector<std::pair<std::string, std::string>> attempts = {{"WHERE c.key = ?1 ORDER BY c.id", id}};
  bool numeric = !id.empty() && std::all_of(id.begin() + (id[0] == '#' ? 1 : 0), id.end(), ::isdigit) && id != "#";
  if (numeric) attempts.push_back({"WHERE c.id = ?1", id[0] == '#' ? id.substr(1) : id});
  attempts.push_back({"WHERE c.key LIKE ?1 ESCAPE '\\' ORDER BY c.id", id + "#%"});
  // A page's front matter may list alias ids (kept in its symbols, one per line).
  attempts.push_back(
      {"WHERE c.kind = 'page' AND (char(10) || c.symbols || char(10)) LIKE ?1 ORDER BY c.id", "%\n" + id + "\n%"});
  for (auto& [where, value] : attempts) {
    KDA_ASSIGN_OR_RETURN(Statement q, im.db->prepare(cols + where));
    q.bind(1, value);
    ChunkRecord r;
    bool any = false;
    while (true) {
      KDA_ASSIGN_OR_RETURN(bool row, q.step());
      if (!row) break;
      if (!any) {
        r.id = q.text_at(0);
        r.title = q.text_at(1);
        r.kind = q.text_at(2);
        r.language = q.text_at(3);
        r.unit = q.text_at(4);
        r.repo = q.text_at(5);
        r.commit = q.text_at(6);
        r.license = q.text_at(7);
        r.path = q.text_at(8);
        r.symbols = q.text_at(9);
        r.headings = q.text_at(10);
        r.start_line = static_cast<int>(q.int_at(12));
        r.tags = split_lines(q.view_at(14));
        r.related = split_lines(q.view_at(15));
        r.sources = split_lines(q.view_at(16));
        r.arch = q.text_at(17);
        r.op = q.text_at(18);
        r.technique = q.text_at(19);
      } else {
        r.body += "\n";
      }
      r.body += q.text_at(11);
      r.end_line = static_cast<int>(q.int_at(13));
      any = true;
    }
    if (any) {
      auto trim = [](std::string s) {
        while (!s.empty() && s.front() == ' ') s.erase(0, 1);
        while (!s.empty() && s.back() == ' ') s.pop_back();
        return s;
      };
      r.arch = trim(r.arch);
      r.op = trim(r.op);
      r.technique = trim(r.technique);
      return r;
    }
  }
  return Status::not_found(fmt::format("no chunk with id '{}' (ids are listed by `kda wiki search`)", id));
}

Result<std::vector<GrepHit>> Index::grep(const std::string& pattern, const Filters& filters, int limit) {
  Impl& im = *impl_;
  regex_t re;
  if (int rc = regcomp(&re, pattern.c_str(), REG_EXTENDED | REG_NOSUB); rc != 0) {
    char buf[256];
    regerror(rc, &re, buf, sizeof buf);
    return Status::bad_input(fmt::format("grep: bad regular expression '{}': {}", pattern, buf));
  }
  struct Free {
    regex_t* r;
    ~Free() { regfree(r); }
  } guard{&re};
  std::vector<std::string> binds;
  std::string where = im.filter_sql(filters, aliases_, binds);
  // filter_sql numbers its parameters from ?3; bind ?1 and ?2 to no-ops.
  KDA_ASSIGN_OR_RETURN(Statement q,
                       im.db->prepare("SELECT c.key, c.repo, c.path, c.start_line, c.body FROM chunks c WHERE ?1 = ?2" +
                                      where + " ORDER BY c.id"));
  q.bind(1, int64_t{1}).bind(2, int64_t{1});
  for (size_t i = 0; i < binds.size(); ++i) q.bind(static_cast<int>(i) + 3, binds[i]);
  std::vector<GrepHit> hits;
  std::string line;
  while (static_cast<int>(hits.size()) < limit) {
    KDA_ASSIGN_OR_RETURN(bool row, q.step());
    if (!row) break;
    std::string_view body = q.view_at(4);
    int start = static_cast<int>(q.int_at(3));
    size_t pos = 0;
    int ln = 0;
    while (pos <= body.size() && static_cast<int>(hits.size()) < limit) {
      size_t nl = body.find('\n', pos);
      if (nl == std::string_view::npos) nl = body.size();
      line.assign(body.substr(pos, nl - pos));
      if (regexec(&re, line.c_str(), 0, nullptr, 0) == 0)
        hits.push_back({q.text_at(0), q.text_at(1), q.text_at(2), start + ln, line.substr(0, 200)});
      pos = nl + 1;
      ++ln;
    }
  }
  return hits;
}

Result<IndexStats> Index::stats() {
  Impl& im = *impl_;
  IndexStats s;
  KDA_ASSIGN_OR_RETURN(Statement a,
                       im.db->prepare("SELECT (SELECT count(*) FROM files), (SELECT count(*) FROM chunks)"));
  KDA_ASSIGN_OR_RETURN(bool row, a.step());
  if (row) {
    s.files = a.int_at(0);
    s.chunks = a.int_at(1);
  }
  KDA_ASSIGN_OR_RETURN(Statement k, im.db->prepare("SELECT kind, count(*) FROM chunks GROUP BY kind"));
  while (true) {
    KDA_ASSIGN_OR_RETURN(bool r, k.step());
    if (!r) break;
    s.chunks_by_kind[k.text_at(0)] = k.int_at(1);
  }
  KDA_ASSIGN_OR_RETURN(Statement rp, im.db->prepare("SELECT repo, count(*) FROM chunks GROUP BY repo"));
  while (true) {
    KDA_ASSIGN_OR_RETURN(bool r, rp.step());
    if (!r) break;
    s.chunks_by_repo[rp.text_at(0)] = rp.int_at(1);
  }
  KDA_ASSIGN_OR_RETURN(Statement c, im.db->prepare("SELECT repo, max(commit_sha) FROM files GROUP BY repo"));
  while (true) {
    KDA_ASSIGN_OR_RETURN(bool r, c.step());
    if (!r) break;
    s.repo_commits[c.text_at(0)] = c.text_at(1);
  }
  std::error_code ec;
  for (const char* suffix : {"", "-wal"}) {
    auto n = stdfs::file_size(im.file.string() + suffix, ec);
    if (!ec) s.db_bytes += static_cast<int64_t>(n);
  }
  return s;
}

Result<int64_t> Index::file_count(const std::string& repo) {
  KDA_ASSIGN_OR_RETURN(Statement q, impl_->db->prepare(repo.empty() ? "SELECT count(*) FROM files WHERE ?1 = ?1"
                                                                    : "SELECT count(*) FROM files WHERE repo = ?1"));
  q.bind(1, repo);
  KDA_ASSIGN_OR_RETURN(bool row, q.step());
  return row ? q.int_at(0) : 0;
}

}  // namespace kda::wiki
