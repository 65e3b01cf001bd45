// `kda audit verify` end to end: the built binary on intact, tampered and truncated logs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "audit/audit_log.h"
#include "proc/subprocess.h"
#include "util/fs.h"

namespace kda::audit {
namespace {

namespace stdfs = std::filesystem;

class AuditCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    bin_ = std::string(KDA_BINARY_DIR) + "/kda";
    if (!stdfs::exists(bin_)) GTEST_SKIP() << "kda binary not built";
    auto d = fs::make_temp_dir(stdfs::temp_directory_path(), "kda-audit-cli");
    ASSERT_TRUE(d.ok());
    run_ = *d;
    auto log = AuditLog::open(run_ / "audit.jsonl");
    ASSERT_TRUE(log.ok());
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(log->append("state", "kda", {{"phase", i}}).ok());
    head_ = log->last_hash();
  }
  void TearDown() override {
    std::error_code ec;
    if (!run_.empty()) stdfs::remove_all(run_, ec);
  }
  proc::RunResult kda(std::vector<std::string> args) {
    proc::RunOptions o;
    o.argv = {bin_};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.timeout_seconds = 60;
    auto r = proc::run(o);
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : proc::RunResult{};
  }
  void write_state(const std::string& head) {
    std::ofstream(run_ / "state.json") << nlohmann::json{{"phase", "round"}, {"audit_head", head}}.dump();
  }
  void drop_last_line() {
    std::ifstream in(run_ / "audit.jsonl");
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    lines.pop_back();
    std::ofstream out(run_ / "audit.jsonl", std::ios::trunc);
    for (const auto& l : lines) out << l << "\n";
  }

  std::string bin_, head_;
  stdfs::path run_;
};

TEST_F(AuditCliTest, IntactRunDirAndFile) {
  write_state(head_);
  auto r = kda({"audit", "verify", run_.string()});
  EXPECT_EQ(r.exit.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("intact, 4 records"), std::string::npos) << r.stdout_text;
  auto f = kda({"audit", "verify", (run_ / "audit.jsonl").string(), "--json"});
  EXPECT_EQ(f.exit.exit_code, 0) << f.stderr_text;
  auto j = nlohmann::json::parse(f.stdout_text);
  EXPECT_EQ(j["intact"], true);
  EXPECT_EQ(j["records"], 4);
  EXPECT_EQ(j["head"], head_);
}

TEST_F(AuditCliTest, TamperedLogExitsOneNamingTheLine) {
  std::string text = *fs::read_file(run_ / "audit.jsonl");
  auto pos = text.find("\"phase\":2");
  ASSERT_NE(pos, std::string::npos);
  text[pos + 8] = '7';
  std::ofstream(run_ / "audit.jsonl", std::ios::trunc) << text;
  auto r = kda({"audit", "verify", run_.string()});
  EXPECT_EQ(r.exit.exit_code, 1);
  EXPECT_NE(r.stderr_text.find("audit.jsonl:3: hash mismatch"), std::string::npos) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("TAMPERED"), std::string::npos);
}

TEST_F(AuditCliTest, TruncationCaughtThroughStateHead) {
  write_state(head_);
  drop_last_line();
  auto r = kda({"audit", "verify", run_.string()});
  EXPECT_EQ(r.exit.exit_code, 1) << r.stdout_text;
  EXPECT_NE(r.stderr_text.find("not in the log"), std::string::npos) << r.stderr_text;
  // Without the state file's head the shorter chain is self-consistent; --head catches it again.
  std::filesystem::remove(run_ / "state.json");
  EXPECT_EQ(kda({"audit", "verify", run_.string()}).exit.exit_code, 0);
  EXPECT_EQ(kda({"audit", "verify", run_.string(), "--head", head_}).exit.exit_code, 1);
}

TEST_F(AuditCliTest, BadInputExitsTwo) {
  EXPECT_EQ(kda({"audit", "verify", (run_ / "missing.jsonl").string()}).exit.exit_code, 2);
  auto h = kda({"audit", "verify", run_.string(), "--head", "xyz"});
  EXPECT_EQ(h.exit.exit_code, 2);
  EXPECT_NE(h.stderr_text.find("--head"), std::string::npos) << h.stderr_text;
  std::ofstream(run_ / "state.json") << "{\"audit_head\": 5}";
  auto s = kda({"audit", "verify", run_.string()});
  EXPECT_EQ(s.exit.exit_code, 2);
  EXPECT_NE(s.stderr_text.find("state.json: /audit_head"), std::string::npos) << s.stderr_text;
}

}  // namespace
}  // namespace kda::audit
