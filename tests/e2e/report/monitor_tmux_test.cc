// `kda monitor` watching a live `kda run` inside a real tmux pane (120 x 40): started before the
// run exists, it waits, then redraws as the run goes (the loop's scripted host GEMM scenario,
// tests/e2e/loop), shows a round in progress, and ends by itself when the run is done, with the
// final frame on screen and exit 0. tmux is required where KDA_REQUIRE_TMUX=1 (CI).
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

#include "proc/subprocess.h"
#include "util/fs.h"

namespace {

namespace stdfs = std::filesystem;

const stdfs::path kSource = KDA_SOURCE_DIR;

std::optional<stdfs::path> find_tmux() {
  for (const auto& dir : {"/usr/bin", "/usr/local/bin"})
    if (stdfs::exists(stdfs::path(dir) / "tmux")) return stdfs::path(dir) / "tmux";
  return std::nullopt;
}

class MonitorTmux : public ::testing::Test {
 protected:
  void SetUp() override {
    tmux_ = find_tmux();
    if (!tmux_) {
      const char* require = std::getenv("KDA_REQUIRE_TMUX");
      if (require != nullptr && std::string(require) == "1") FAIL() << "KDA_REQUIRE_TMUX=1 but no tmux on this machine";
      GTEST_SKIP() << "tmux is not installed (apt-get install tmux)";
    }
    tmp_ = *kda::fs::make_temp_dir(stdfs::temp_directory_path(), "kda-monitor-tmux");
    socket_ = (tmp_ / "tmux.sock").string();  // a private server: nothing of the user's tmux is touched
  }
  void TearDown() override {
    if (!tmux_) return;
    tmux({"kill-server"});
    if (!HasFailure()) stdfs::remove_all(tmp_);
  }
  kda::proc::RunResult tmux(std::vector<std::string> args) {
    args.insert(args.begin(), {tmux_->string(), "-S", socket_});
    kda::proc::RunOptions o;
    o.argv = args;
    o.timeout_seconds = 20;
    auto r = kda::proc::run(o);
    return r.ok() ? *r : kda::proc::RunResult{};
  }
  std::string screen() { return tmux({"capture-pane", "-p", "-t", "mon"}).stdout_text; }

  std::optional<stdfs::path> tmux_;
  stdfs::path tmp_;
  std::string socket_;
};

TEST_F(MonitorTmux, WatchesALiveRunUntilItIsDone) {
  const stdfs::path run_dir = tmp_ / "run", here = kSource / "tests/e2e/loop";
  const std::string monitor = std::string(KDA_BINARY) + " monitor " + run_dir.string() +
                              " --interval 0.1 --wait 120; echo MONITOR_EXIT=$?; sleep 60";
  auto started = tmux({"new-session", "-d", "-s", "mon", "-x", "120", "-y", "40", monitor});
  ASSERT_EQ(started.exit.exit_code, 0) << started.stderr_text;
  // The monitor waits for a run that does not exist yet.
  std::string first;
  for (int i = 0; i < 50 && first.find("waiting for") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    first = screen();
  }
  EXPECT_NE(first.find("kda monitor: waiting for " + (run_dir / "state.json").string()), std::string::npos) << first;

  kda::proc::ChildOptions co;
  co.argv = {KDA_BINARY,
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
             "2",
             "--eval-iterations",
             "20",
             "--eval-warmup",
             "1",
             "--final-trials",
             "2",
             "--min-improvement",
             "0.1",
             "--quiet"};
  auto run = kda::proc::Child::spawn(co);
  ASSERT_TRUE(run.ok()) << run.status().message();
  bool saw_round = false, saw_done = false;
  std::string last;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  while (std::chrono::steady_clock::now() < deadline && !saw_done) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    last = screen();
    saw_round = saw_round || last.find(" of 6, step ") != std::string::npos;
    saw_done = last.find("MONITOR_EXIT=") != std::string::npos;
  }
  auto exit = run->wait_or_kill(kda::proc::Deadline::after(std::chrono::seconds(300)));
  EXPECT_TRUE(exit.exit_code == 0 || exit.exit_code == 1) << exit.describe();  // done, or stopped
  EXPECT_TRUE(saw_round) << "never saw a round in progress; last screen:\n" << last;
  ASSERT_TRUE(saw_done) << last;
  // The final frame stays on screen above the exit line, and says what state.json says (the
  // scenario's outcome may differ on a loaded machine; what the monitor shows may not).
  auto state = nlohmann::json::parse(*kda::fs::read_file(run_dir / "state.json"), nullptr, false);
  ASSERT_TRUE(state.is_object());
  const std::string phase = state["phase"].get<std::string>(), incumbent = state["incumbent"]["id"].get<std::string>();
  EXPECT_NE(last.find("phase " + phase), std::string::npos) << last;
  EXPECT_NE(last.find("incumbent " + incumbent), std::string::npos) << last;
  EXPECT_EQ(last.find("MET") != std::string::npos, phase == "done") << last;
  EXPECT_NE(last.find("false_claim"), std::string::npos) << last;  // round 2's 1000x claim, always false
  EXPECT_NE(last.find("activity (audit log)"), std::string::npos) << last;
  EXPECT_NE(last.find(phase == "done" ? "MONITOR_EXIT=0" : "MONITOR_EXIT=1"), std::string::npos) << last;
  for (size_t at = 0, line = 0; at < last.size(); at = last.find('\n', at) + 1, ++line) {
    const size_t end = last.find('\n', at);
    EXPECT_LE((end == std::string::npos ? last.size() : end) - at, 120u) << "line " << line << " wider than the pane";
    if (end == std::string::npos) break;
  }
}

TEST_F(MonitorTmux, NoRunIsABadInputAfterTheWait) {
  kda::proc::RunOptions o;
  o.argv = {KDA_BINARY, "monitor", (tmp_ / "nothing").string(), "--wait", "0.3", "--interval", "0.1"};
  o.timeout_seconds = 30;
  auto r = kda::proc::run(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit.exit_code, 2) << r->stderr_text;
  EXPECT_NE(r->stderr_text.find("nothing/state.json: no run there (yet)"), std::string::npos) << r->stderr_text;
}

}  // namespace
