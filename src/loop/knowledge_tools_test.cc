// KnowledgeTools: wiki_search / wiki_show over a temporary index built from pages the test writes,
// and ncu_analyze / ncu_diff on the shared fixture reports, with the path rule (roots) enforced.
#include "loop/knowledge_tools.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>

#include "util/fs.h"

namespace kda::loop {
namespace {

namespace stdfs = std::filesystem;
using nlohmann::json;

const stdfs::path kFixtures = stdfs::path(KDA_SOURCE_DIR) / "src/ncu/testdata";

void write(const stdfs::path& p, const std::string& text) {
  stdfs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

std::string page(const std::string& id, const std::string& title, const std::string& tags, const std::string& body) {
  return "---\nid: " + id + "\ntitle: \"" + title + "\"\ntype: technique\ntags: [" + tags +
         "]\nrelated: [technique/other]\nsources:\n  - Our own notes, https://example.org/notes\n---\n# " + title +
         "\n\n" + body + "\n";
}

// Many lines of plain words (a long page).
std::string filler(int lines) {
  std::string s;
  for (int i = 0; i < lines; ++i) s += "row " + std::to_string(i) + " of the long explanation keeps going here.\n";
  return s;
}

class KnowledgeToolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = fs::make_temp_dir(stdfs::temp_directory_path(), "kda-knowledge-tools");
    ASSERT_TRUE(d.ok()) << d.status().message();
    dir_ = *d;
    knowledge_ = dir_ / "knowledge";
    write(knowledge_ / "technique" / "quokka.md",
          page("technique/quokka-pipelining", "Quokka pipelining of striped tiles", "technique, pipelining, quokkafold",
               "## Idea\n\nThe quokkafold schedule keeps three stages of striped tiles in flight so that the copy of "
               "stage k+2 overlaps the math of stage k.\n\n## When\n\nUse it when the long scoreboard stalls dominate "
               "and shared memory allows three stages."));
    write(
        knowledge_ / "technique" / "wombat.md",
        page("technique/wombat-split", "Wombat split of the reduction", "technique, split-k",
             "## Idea\n\nSplit the reduction dimension across wombat blocks and reduce partial sums in a second pass. "
             "Striped tiles again, but no quokkafold schedule is needed here."));
    write(knowledge_ / "technique" / "numbat.md",
          page("technique/numbat-swizzle", "Numbat swizzle", "technique, swizzle",
               "## Idea\n\nXOR the column index with the row to spread striped tiles over the banks.\n\n" + filler(60) +
                   "end of numbat."));
    ::setenv("KDA_KNOWLEDGE_DIR", knowledge_.c_str(), 1);
    stdfs::create_directories(dir_ / "ws");
  }
  void TearDown() override {
    ::unsetenv("KDA_KNOWLEDGE_DIR");
    std::error_code ec;
    stdfs::remove_all(dir_, ec);
  }
  KnowledgeToolsOptions options() {
    KnowledgeToolsOptions o;
    o.wiki_db = dir_ / "db" / "wiki.db";
    o.roots = {dir_ / "ws", dir_ / "run"};
    return o;
  }
  void copy_fixture(const std::string& name, const stdfs::path& to) {
    stdfs::create_directories(to.parent_path());
    stdfs::copy_file(kFixtures / name, to, stdfs::copy_options::overwrite_existing);
  }
  stdfs::path dir_, knowledge_;
};

TEST_F(KnowledgeToolsTest, OffersReadOnlyTools) {
  KnowledgeTools host(options());
  std::vector<std::string> names;
  for (const auto& t : host.tools()) {
    names.push_back(t.name);
    EXPECT_TRUE(t.read_only) << t.name;
    EXPECT_EQ(t.input_schema["type"], "object") << t.name;
    EXPECT_FALSE(t.description.empty()) << t.name;
  }
  std::vector<std::string> expected = {"ncu_analyze", "ncu_diff"};
  if (KnowledgeTools::wiki_built()) expected.insert(expected.begin(), {"wiki_search", "wiki_show"});
  EXPECT_EQ(names, expected);
  auto r = host.call("no_such_tool", json::object());
  EXPECT_TRUE(r.is_error);
  EXPECT_EQ(r.data["error"], "unknown_tool");
}

TEST_F(KnowledgeToolsTest, WikiSearchFindsThePageAndWikiShowReadsIt) {
  if (!KnowledgeTools::wiki_built()) GTEST_SKIP() << "built without the KernelWiki";
  KnowledgeTools host(options());
  auto r = host.call("wiki_search", {{"query", "quokkafold schedule"}});
  ASSERT_FALSE(r.is_error) << r.text;
  ASSERT_FALSE(r.data["results"].empty()) << r.text;
  EXPECT_EQ(r.data["results"][0]["id"], "technique/quokka-pipelining") << r.text;
  EXPECT_NE(r.text.find("id: technique/quokka-pipelining"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("cite: knowledge@"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("technique/quokka.md:"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("wiki_show {\"id\": \"technique/quokka-pipelining\"}"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("tags: "), std::string::npos) << r.text;
  EXPECT_TRUE(stdfs::exists(dir_ / "db" / "wiki.db"));  // the index built itself from knowledge/

  std::string id = r.data["results"][0]["id"];
  auto s = host.call("wiki_show", {{"id", id}});
  ASSERT_FALSE(s.is_error) << s.text;
  EXPECT_NE(s.text.find("# Quokka pipelining of striped tiles"), std::string::npos) << s.text;
  EXPECT_NE(s.text.find("cite: knowledge@"), std::string::npos) << s.text;
  EXPECT_NE(s.text.find("stage k+2 overlaps the math"), std::string::npos) << s.text;
  EXPECT_NE(s.text.find("related (wiki_show ids): technique/other"), std::string::npos) << s.text;
  EXPECT_NE(s.text.find("sources: Our own notes"), std::string::npos) << s.text;

  // A filter that excludes every page: no result, which is an answer, not an error.
  auto f = host.call("wiki_search", {{"query", "quokkafold"}, {"kind", "code"}});
  EXPECT_FALSE(f.is_error) << f.text;
  EXPECT_TRUE(f.data["results"].empty()) << f.text;
  EXPECT_NE(f.text.find("drop a filter"), std::string::npos) << f.text;
}

TEST_F(KnowledgeToolsTest, WikiSearchWithoutAMatchSaysSo) {
  if (!KnowledgeTools::wiki_built()) GTEST_SKIP() << "built without the KernelWiki";
  KnowledgeTools host(options());
  auto r = host.call("wiki_search", {{"query", "xylophonic marmalade"}});
  EXPECT_FALSE(r.is_error) << r.text;
  EXPECT_TRUE(r.data["results"].empty()) << r.text;
  EXPECT_NE(r.text.find("No results for 'xylophonic marmalade'"), std::string::npos) << r.text;
}

TEST_F(KnowledgeToolsTest, WikiOutputIsBounded) {
  if (!KnowledgeTools::wiki_built()) GTEST_SKIP() << "built without the KernelWiki";
  auto o = options();
  o.max_snippet_chars = 120;
  o.max_output_chars = 700;
  KnowledgeTools host(o);
  auto r = host.call("wiki_search", {{"query", "striped tiles"}, {"limit", 8}});
  ASSERT_FALSE(r.is_error) << r.text;
  EXPECT_LE(r.text.size(), 700u + 200u) << r.text;
  EXPECT_GE(r.data["results"].size(), 1u);
  EXPECT_LT(r.data["results"].size(), 3u) << r.text;  // three pages match; not all fit
  EXPECT_NE(r.text.find("left out"), std::string::npos) << r.text;

  auto s = host.call("wiki_show", {{"id", "technique/numbat-swizzle"}, {"max_chars", 300}});
  ASSERT_FALSE(s.is_error) << s.text;
  EXPECT_NE(s.text.find("[truncated: "), std::string::npos) << s.text;
  EXPECT_EQ(s.text.find("end of numbat"), std::string::npos) << s.text;
  EXPECT_LT(s.text.size(), 500u);
  auto full = host.call("wiki_show", {{"id", "technique/numbat-swizzle"}, {"max_chars", 20000}});
  EXPECT_NE(full.text.find("end of numbat"), std::string::npos) << full.text;
}

TEST_F(KnowledgeToolsTest, WikiErrorsAreOutcomes) {
  if (!KnowledgeTools::wiki_built()) GTEST_SKIP() << "built without the KernelWiki";
  KnowledgeTools host(options());
  auto bad_id = host.call("wiki_show", {{"id", "technique/does-not-exist"}});
  EXPECT_TRUE(bad_id.is_error);
  EXPECT_EQ(bad_id.data["error"], "not_found");
  EXPECT_NE(bad_id.text.find("no chunk with id 'technique/does-not-exist'"), std::string::npos) << bad_id.text;

  for (const json& args : {json::object(), json{{"query", ""}}, json{{"query", 7}}, json{{"query", "x"}, {"limit", 0}},
                           json{{"query", "x"}, {"limit", 99}}, json{{"query", "x"}, {"architecture", "sm90"}},
                           json{{"query", "x"}, {"kind", "poem"}}, json::array({1, 2})}) {
    auto r = host.call("wiki_search", args);
    EXPECT_TRUE(r.is_error) << args.dump();
    EXPECT_EQ(r.text.rfind("wiki_search: ", 0), 0u) << r.text;
  }
  auto unknown = host.call("wiki_search", {{"query", "x"}, {"architecture", "sm90"}});
  EXPECT_NE(unknown.text.find("unknown argument \"architecture\""), std::string::npos) << unknown.text;
  EXPECT_TRUE(host.call("wiki_show", json::object()).is_error);
  EXPECT_TRUE(host.call("wiki_show", {{"id", "x"}, {"max_chars", "many"}}).is_error);
}

TEST_F(KnowledgeToolsTest, EmptyIndexIsAnError) {
  if (!KnowledgeTools::wiki_built()) GTEST_SKIP() << "built without the KernelWiki";
  ::setenv("KDA_KNOWLEDGE_DIR", (dir_ / "no-such-knowledge").c_str(), 1);
  KnowledgeTools host(options());
  auto r = host.call("wiki_search", {{"query", "quokkafold"}});
  EXPECT_TRUE(r.is_error);
  EXPECT_EQ(r.data["error"], "no_index");
  EXPECT_NE(r.text.find("index is empty"), std::string::npos) << r.text;
  auto s = host.call("wiki_show", {{"id", "technique/quokka-pipelining"}});
  EXPECT_TRUE(s.is_error);
}

TEST_F(KnowledgeToolsTest, NcuAnalyzeReadsAReportInsideTheRoots) {
  copy_fixture("saxpy.ncu-rep", dir_ / "ws" / "profiles" / "saxpy.ncu-rep");
  KnowledgeTools host(options());
  auto r = host.call("ncu_analyze", {{"report", "profiles/saxpy.ncu-rep"}});
  ASSERT_FALSE(r.is_error) << r.text;
  EXPECT_NE(r.text.find("saxpy"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("### Priorities"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("KernelWiki: "), std::string::npos) << r.text;  // priorities name wiki pages to read
  EXPECT_EQ(r.data["report"], "profiles/saxpy.ncu-rep");
  ASSERT_EQ(r.data["kernels"].size(), 1u) << r.data.dump();
  EXPECT_FALSE(r.data["kernels"][0]["priorities"].empty()) << r.text;

  // The multi-kernel report, narrowed by kernel regex and priorities.
  copy_fixture("multi.ncu-rep", dir_ / "run" / "multi.ncu-rep");
  auto m =
      host.call("ncu_analyze",
                {{"report", (dir_ / "run" / "multi.ncu-rep").string()}, {"kernel", "smem"}, {"max_priorities", 1}});
  ASSERT_FALSE(m.is_error) << m.text;
  ASSERT_EQ(m.data["kernels"].size(), 1u) << m.data.dump();
  EXPECT_NE(m.data["kernels"][0]["name"].get<std::string>().find("smem"), std::string::npos);
  EXPECT_LE(m.data["kernels"][0]["priorities"].size(), 1u);
  auto nomatch =
      host.call("ncu_analyze", {{"report", (dir_ / "run" / "multi.ncu-rep").string()}, {"kernel", "nomatch_kernel"}});
  EXPECT_TRUE(nomatch.is_error) << nomatch.text;
}

TEST_F(KnowledgeToolsTest, NcuAnalyzeMergesCsvPages) {
  copy_fixture("saxpy_raw.csv", dir_ / "ws" / "saxpy_raw.csv");
  copy_fixture("saxpy_details.csv", dir_ / "ws" / "saxpy_details.csv");
  KnowledgeTools host(options());
  auto r = host.call("ncu_analyze", {{"report", "saxpy_raw.csv"}, {"extra_pages", {"saxpy_details.csv"}}});
  ASSERT_FALSE(r.is_error) << r.text;
  ASSERT_EQ(r.data["kernels"].size(), 1u) << r.data.dump();
  EXPECT_EQ(r.data["report"], "saxpy_raw.csv, saxpy_details.csv");
}

TEST_F(KnowledgeToolsTest, NcuPathsOutsideTheRootsAreRefused) {
  copy_fixture("saxpy.ncu-rep", dir_ / "ws" / "saxpy.ncu-rep");
  copy_fixture("saxpy.ncu-rep", dir_ / "elsewhere" / "saxpy.ncu-rep");
  stdfs::create_symlink(dir_ / "elsewhere" / "saxpy.ncu-rep", dir_ / "ws" / "link.ncu-rep");
  stdfs::create_directory_symlink(dir_ / "elsewhere", dir_ / "ws" / "linkdir");
  KnowledgeTools host(options());
  for (const std::string& p : {(kFixtures / "saxpy.ncu-rep").string(), std::string("../elsewhere/saxpy.ncu-rep"),
                               std::string("link.ncu-rep"), std::string("linkdir/saxpy.ncu-rep"),
                               std::string("/etc/passwd"), (dir_ / "elsewhere" / "missing.ncu-rep").string()}) {
    auto r = host.call("ncu_analyze", {{"report", p}});
    EXPECT_TRUE(r.is_error) << p;
    EXPECT_EQ(r.data["error"], "outside_roots") << p << ": " << r.text;
    EXPECT_NE(r.text.find("outside the directories open to this tool"), std::string::npos) << r.text;
  }
  auto extra = host.call("ncu_analyze", {{"report", "saxpy.ncu-rep"}, {"extra_pages", {"../elsewhere/saxpy.ncu-rep"}}});
  EXPECT_TRUE(extra.is_error);
  EXPECT_EQ(extra.data["error"], "outside_roots");
  auto diff = host.call("ncu_diff", {{"before", "saxpy.ncu-rep"}, {"after", "/etc/passwd"}});
  EXPECT_TRUE(diff.is_error);
  EXPECT_EQ(diff.data["error"], "outside_roots");
  EXPECT_EQ(diff.text.rfind("ncu_diff: after: ", 0), 0u) << diff.text;
  // Inside the roots the same file is fine.
  EXPECT_FALSE(host.call("ncu_analyze", {{"report", "saxpy.ncu-rep"}}).is_error);
  // No roots at all: nothing is readable.
  auto o = options();
  o.roots.clear();
  KnowledgeTools none(o);
  auto n = none.call("ncu_analyze", {{"report", (dir_ / "ws" / "saxpy.ncu-rep").string()}});
  EXPECT_TRUE(n.is_error);
}

TEST_F(KnowledgeToolsTest, NcuBadReportsAreOutcomes) {
  write(dir_ / "ws" / "notes.txt", "this is not a report\n");
  write(dir_ / "ws" / "bad.ncu-rep", std::string("NVIDIA Nsight Compute garbage ") + '\x01' + '\xff');
  ASSERT_EQ(::mkfifo((dir_ / "ws" / "fifo.ncu-rep").c_str(), 0600), 0);
  stdfs::create_directories(dir_ / "ws" / "adir");
  KnowledgeTools host(options());
  for (const char* p : {"notes.txt", "bad.ncu-rep", "fifo.ncu-rep", "adir", "missing.ncu-rep"}) {
    auto r = host.call("ncu_analyze", {{"report", p}});
    EXPECT_TRUE(r.is_error) << p;
    EXPECT_EQ(r.data["error"], "bad_report") << p << ": " << r.text;
    EXPECT_EQ(r.text.rfind("ncu_analyze: ", 0), 0u) << r.text;
    EXPECT_NO_THROW((void)json(r.text).dump()) << p;
  }
  for (const json& args : {json::object(), json{{"report", 3}}, json{{"report", "x"}, {"max_priorities", 9}},
                           json{{"report", "x"}, {"extra_pages", "y"}}, json{{"report", "x"}, {"bogus", 1}}}) {
    auto r = host.call("ncu_analyze", args);
    EXPECT_TRUE(r.is_error) << args.dump();
    EXPECT_EQ(r.data["error"], "bad_arguments") << args.dump();
  }
  EXPECT_EQ(host.call("ncu_diff", {{"before", "x"}}).data["error"], "bad_arguments");
}

TEST_F(KnowledgeToolsTest, NcuDiffSaysWhatMoved) {
  copy_fixture("multi.ncu-rep", dir_ / "ws" / "before.ncu-rep");
  copy_fixture("saxpy.ncu-rep", dir_ / "run" / "after.ncu-rep");
  KnowledgeTools host(options());
  auto r = host.call("ncu_diff", {{"before", "before.ncu-rep"}, {"after", (dir_ / "run" / "after.ncu-rep").string()}});
  ASSERT_FALSE(r.is_error) << r.text;
  EXPECT_NE(r.text.find("gpu__time_duration.sum"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("-61.9%"), std::string::npos) << r.text;
  ASSERT_EQ(r.data["kernels"].size(), 1u) << r.data.dump();
  EXPECT_NE(r.data["kernels"][0]["verdict"].get<std::string>().find("faster"), std::string::npos) << r.data.dump();
  EXPECT_EQ(r.data["only_before"], 2);
  EXPECT_EQ(r.data["before"], "before.ncu-rep");
}

}  // namespace
}  // namespace kda::loop
