// `kda report` of a real `kda run` (host GEMM, scripted agents: tests/e2e/loop), of its round
// evaluation and of a real `kda tune`, each opened in headless Chromium. Checked: the DOM Chromium
// built carries every number with its provenance and each matches the run's files; the rounds
// table has the run's rounds; the page made no network request (Chromium's own net log, where the
// page's requests carry the page as initiator; a control page with one external image proves the
// check sees a request); the screenshot is a PNG of the window's size. Chromium is required where
// KDA_REQUIRE_CHROMIUM=1 (CI); elsewhere the test skips when it is not installed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "proc/subprocess.h"
#include "report/provenance.h"
#include "util/fs.h"

namespace {

namespace stdfs = std::filesystem;
using nlohmann::json;

const stdfs::path kSource = KDA_SOURCE_DIR;

std::optional<stdfs::path> find_chromium() {
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    for (const auto& dir : {"/usr/bin", "/usr/local/bin", "/snap/bin"}) {
      const stdfs::path p = stdfs::path(dir) / name;
      if (stdfs::exists(p)) return p;
    }
  }
  return std::nullopt;
}

class ReportChromium : public ::testing::Test {
 protected:
  void SetUp() override {
    chromium_ = find_chromium();
    if (!chromium_) {
      const char* require = std::getenv("KDA_REQUIRE_CHROMIUM");
      if (require != nullptr && std::string(require) == "1")
        FAIL() << "KDA_REQUIRE_CHROMIUM=1 but no chromium on this machine";
      GTEST_SKIP() << "chromium is not installed (apt-get install chromium)";
    }
    tmp_ = *kda::fs::make_temp_dir(stdfs::temp_directory_path(), "kda-report-chromium");
  }
  void TearDown() override {
    if (!tmp_.empty() && !HasFailure()) stdfs::remove_all(tmp_);
  }

  kda::proc::RunResult run(const std::vector<std::string>& argv, double timeout = 300) {
    kda::proc::RunOptions o;
    o.argv = argv;
    o.timeout_seconds = timeout;
    auto r = kda::proc::run(o);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.status().message());
    return r.ok() ? *r : kda::proc::RunResult{};
  }

  struct Rendered {
    std::string dom;
    int page_requests = 0;  // requests the page itself started
    std::vector<std::string> urls;
  };
  // Opens `page` in a fresh headless Chromium profile: the DOM after load, and the page's requests
  // from the net log (the browser's own update and time checks have no initiator origin; a page's
  // requests have the page's origin, "null" for a file:// page).
  Rendered open(const stdfs::path& page, const std::string& tag) {
    const stdfs::path profile = tmp_ / ("profile-" + tag), netlog = tmp_ / ("net-" + tag + ".json");
    auto r = run({chromium_->string(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-extensions", "--user-data-dir=" + profile.string(), "--log-net-log=" + netlog.string(),
                  "--dump-dom", "file://" + page.string()});
    EXPECT_EQ(r.exit.exit_code, 0) << r.stderr_text.substr(0, 2000);
    Rendered out{r.stdout_text, 0, {}};
    json log = json::parse(*kda::fs::read_file(netlog), nullptr, false);
    EXPECT_TRUE(log.is_object()) << "net log of " << page << " does not parse";
    if (!log.is_object()) return out;
    int start_job = -1;
    for (const auto& [name, id] : log["constants"]["logEventTypes"].items())
      if (name == "URL_REQUEST_START_JOB") start_job = id.get<int>();
    EXPECT_GE(start_job, 0);
    for (const auto& e : log["events"]) {
      if (e.value("type", -1) != start_job || !e.contains("params") || !e["params"].contains("url")) continue;
      const std::string initiator = e["params"].value("initiator", "");
      if (initiator == "not an origin") continue;  // the browser's own traffic
      ++out.page_requests;
      out.urls.push_back(e["params"]["url"].get<std::string>());
    }
    return out;
  }

  void screenshot(const stdfs::path& page, const std::string& tag) {
    const stdfs::path png = tmp_ / (tag + ".png");
    auto r = run({chromium_->string(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--hide-scrollbars", "--user-data-dir=" + (tmp_ / ("profile-shot-" + tag)).string(),
                  "--window-size=1280,2000", "--screenshot=" + png.string(), "file://" + page.string()});
    ASSERT_EQ(r.exit.exit_code, 0) << r.stderr_text.substr(0, 2000);
    auto bytes = kda::fs::read_file(png);
    ASSERT_TRUE(bytes.ok());
    ASSERT_GE(bytes->size(), 24u);
    EXPECT_EQ(bytes->substr(1, 3), "PNG");
    auto be32 = [&](size_t at) {
      const auto* u = reinterpret_cast<const unsigned char*>(bytes->data() + at);
      return (uint32_t{u[0]} << 24) | (uint32_t{u[1]} << 16) | (uint32_t{u[2]} << 8) | u[3];
    };
    EXPECT_EQ(be32(16), 1280u);  // IHDR width and height
    EXPECT_EQ(be32(20), 2000u);
    EXPECT_GT(bytes->size(), 30'000u) << "a near-empty screenshot";  // a blank page compresses to a few KB
  }

  json report(const stdfs::path& input, const stdfs::path& out) {
    auto r = run({KDA_BINARY, "report", input.string(), "-o", out.string(), "--json"});
    EXPECT_EQ(r.exit.exit_code, 0) << r.stdout_text << r.stderr_text;
    return json::parse(r.stdout_text, nullptr, false);
  }

  void expect_dom_matches_files(const Rendered& page, const stdfs::path& root, int numbers) {
    const kda::report::ProvenanceCheck c = kda::report::check_provenance(page.dom, root);
    EXPECT_TRUE(c.ok()) << c.problems.size() << " problems, first: " << (c.ok() ? "" : c.problems.front());
    EXPECT_EQ(c.checked, numbers) << "numbers in the rendered DOM vs the page kda wrote";
    EXPECT_EQ(page.page_requests, 0) << (page.urls.empty() ? "" : page.urls.front());
  }

  std::optional<stdfs::path> chromium_;
  stdfs::path tmp_;
};

TEST_F(ReportChromium, ARunItsEvaluationAndATuningRenderOfflineWithNumbersFromTheirFiles) {
  // The run: the loop end-to-end scenario (4 rounds: accepted, false claim, stalled, accepted).
  const stdfs::path run_dir = tmp_ / "run", here = kSource / "tests/e2e/loop";
  auto r = run({KDA_BINARY,
                "run",
                (kSource / "tasks/host/gemm").string(),
                "--writer",
                "scripted:" + (here / "writer.json").string(),
                "--reviewer",
                "scripted:" + (here / "reviewer.json").string(),
                "--target",
                "1.5x",
                "--run-dir",
                run_dir.string(),
                "--max-rounds",
                "6",
                "--eval-trials",
                "1",
                "--eval-iterations",
                "5",
                "--eval-warmup",
                "1",
                "--final-trials",
                "2",
                "--min-improvement",
                "0.1",
                "--quiet",
                "--json"},
               600);
  // Done (0) or, on a loaded machine where a round's gain stayed inside the noise, stopped (1): the
  // page must show either as it is.
  ASSERT_TRUE(r.exit.exit_code == 0 || r.exit.exit_code == 1) << r.stderr_text;
  const json outcome = json::parse(r.stdout_text, nullptr, false);

  const json page = report(run_dir, tmp_ / "run.html");
  EXPECT_EQ(page["kind"], "run");
  EXPECT_GE(page["numbers"].get<int>(), 40);
  const Rendered dom = open(tmp_ / "run.html", "run");
  expect_dom_matches_files(dom, run_dir, page["numbers"].get<int>());
  // The rounds table: one row per measured round, as kda run's own table has them.
  const size_t table = dom.dom.find("<table class=\"rounds\">");
  ASSERT_NE(table, std::string::npos);
  const std::string rounds = dom.dom.substr(table, dom.dom.find("</table>", table) - table);
  size_t rows = 0;
  for (size_t at = rounds.find("<tr>"); at != std::string::npos; at = rounds.find("<tr>", at + 1)) ++rows;
  EXPECT_EQ(rows, outcome["round_table"].size() + 1);  // + the header
  EXPECT_NE(rounds.find("false_claim"), std::string::npos);
  EXPECT_NE(dom.dom.find("<span class=\"ok\">verified</span>"), std::string::npos);  // the audit log
  EXPECT_NE(dom.dom.find("class=\"chart dag\""), std::string::npos);
  screenshot(tmp_ / "run.html", "run");

  // The round's evaluation (the same JSON `kda eval --json` prints).
  const json eval_page = report(run_dir / "rounds/004/eval.json", tmp_ / "eval.html");
  EXPECT_EQ(eval_page["kind"], "eval");
  expect_dom_matches_files(open(tmp_ / "eval.html", "eval"), run_dir / "rounds/004", eval_page["numbers"].get<int>());

  // A tuning.
  auto t = run(
      {KDA_BINARY, "tune", (kSource / "tasks/host/rmsnorm/solutions/tunable").string(), "--task",
       (kSource / "tasks/host/rmsnorm").string(), "--out", (tmp_ / "tune").string(), "--max-configs", "6", "--quiet"},
      600);
  ASSERT_EQ(t.exit.exit_code, 0) << t.stderr_text;
  const json tune_page = report(tmp_ / "tune", tmp_ / "tune.html");
  EXPECT_EQ(tune_page["kind"], "tune");
  const Rendered tune_dom = open(tmp_ / "tune.html", "tune");
  expect_dom_matches_files(tune_dom, tmp_ / "tune", tune_page["numbers"].get<int>());
  EXPECT_NE(tune_dom.dom.find("class=\"chart heat\""), std::string::npos);
}

// The request check sees what a page fetches: an image from a loopback port (nothing listens;
// the attempt is what counts).
TEST_F(ReportChromium, TheNetworkCheckSeesAPageThatFetches) {
  const stdfs::path page = tmp_ / "fetches.html";
  ASSERT_TRUE(kda::fs::write_file_atomic(
                  page, "<!DOCTYPE html><html><body><img src=\"http://127.0.0.1:9/x.png\"></body></html>")
                  .ok());
  const Rendered dom = open(page, "control");
  EXPECT_EQ(dom.page_requests, 1);
  ASSERT_FALSE(dom.urls.empty());
  EXPECT_EQ(dom.urls.front(), "http://127.0.0.1:9/x.png");
  // With kda's policy in the page, the same image is never requested.
  const stdfs::path guarded = tmp_ / "guarded.html";
  ASSERT_TRUE(kda::fs::write_file_atomic(guarded,
                                         "<!DOCTYPE html><html><head><meta http-equiv=\"Content-Security-Policy\" "
                                         "content=\"default-src 'none'; img-src data:\"></head><body>"
                                         "<img src=\"http://127.0.0.1:9/x.png\"></body></html>")
                  .ok());
  EXPECT_EQ(open(guarded, "guarded").page_requests, 0);
}

}  // namespace
