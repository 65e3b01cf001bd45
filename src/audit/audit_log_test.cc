#include "audit/audit_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "util/fs.h"
#include "util/sha256.h"

namespace kda::audit {
namespace {

namespace stdfs = std::filesystem;

class AuditLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = fs::make_temp_dir(stdfs::temp_directory_path(), "kda-audit");
    ASSERT_TRUE(d.ok());
    dir_ = *d;
    path_ = dir_ / "audit.jsonl";
  }
  void TearDown() override { stdfs::remove_all(dir_); }

  // Writes n records and returns the head.
  std::string write_records(int n) {
    auto log = AuditLog::open(path_);
    EXPECT_TRUE(log.ok()) << log.status().message();
    for (int i = 0; i < n; ++i)
      EXPECT_TRUE(log->append("tool_call", "writer", {{"i", i}, {"tool", "read_file"}, {"x", 0.1 * i}}).ok());
    return log->last_hash();
  }
  std::vector<std::string> lines() {
    std::ifstream in(path_);
    std::vector<std::string> v;
    for (std::string l; std::getline(in, l);) v.push_back(l);
    return v;
  }
  void set_lines(const std::vector<std::string>& v, bool final_newline = true) {
    std::ofstream out(path_, std::ios::trunc);
    for (size_t i = 0; i < v.size(); ++i) out << v[i] << (i + 1 < v.size() || final_newline ? "\n" : "");
  }
  VerifyResult check(const std::string& head = "") {
    auto r = verify(path_, head);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? *r : VerifyResult{};
  }
  static bool has_problem(const VerifyResult& r, uint64_t line, const std::string& needle) {
    for (const auto& p : r.problems)
      if (p.line == line && p.message.find(needle) != std::string::npos) return true;
    return false;
  }
  static std::string dump(const VerifyResult& r) {
    std::ostringstream s;
    for (const auto& p : r.problems) s << p.line << ": " << p.message << "\n";
    return s.str();
  }

  stdfs::path dir_, path_;
};

TEST_F(AuditLogTest, IntactLogVerifiesAndChains) {
  std::string head = write_records(5);
  auto r = check(head);
  EXPECT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(r.records, 5u);
  EXPECT_EQ(r.head, head);
  EXPECT_EQ(r.head_line, 5u);
  auto v = lines();
  ASSERT_EQ(v.size(), 5u);
  auto first = nlohmann::json::parse(v[0]);
  EXPECT_EQ(first["seq"], 0);
  EXPECT_EQ(first["prev"], kGenesisHash);
  EXPECT_EQ(first["type"], "tool_call");
  EXPECT_EQ(first["actor"], "writer");
  EXPECT_EQ(nlohmann::json::parse(v[1])["prev"], first["hash"]);
  // Field order is the documented one, "hash" last.
  EXPECT_EQ(v[0].rfind("{\"seq\":0,\"time\":\"", 0), 0u);
  EXPECT_NE(v[0].find("\"prev\":\"" + std::string(kGenesisHash) + "\",\"hash\":\""), std::string::npos);
}

TEST_F(AuditLogTest, EmptyLogVerifies) {
  { ASSERT_TRUE(AuditLog::open(path_).ok()); }
  auto r = check();
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.records, 0u);
  EXPECT_EQ(r.head, kGenesisHash);
}

TEST_F(AuditLogTest, DetectsEditedRecord) {
  write_records(4);
  auto v = lines();
  auto pos = v[1].find("\"i\":1");
  ASSERT_NE(pos, std::string::npos);
  v[1].replace(pos, 5, "\"i\":7");
  set_lines(v);
  auto r = check();
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(has_problem(r, 2, "hash mismatch")) << dump(r);
  EXPECT_EQ(r.problems.size(), 1u) << dump(r);
}

TEST_F(AuditLogTest, DetectsEditedRecordWithRecomputedHash) {
  write_records(4);
  auto v = lines();
  auto j = nlohmann::ordered_json::parse(v[1]);
  j["data"]["tool"] = "write_file";
  j.erase("hash");
  std::string canon = j.dump();
  j["hash"] = sha256_hex(canon);
  v[1] = j.dump();
  set_lines(v);
  auto r = check();
  EXPECT_TRUE(has_problem(r, 3, "prev does not chain")) << dump(r);
  EXPECT_FALSE(has_problem(r, 2, "hash mismatch")) << dump(r);
}

TEST_F(AuditLogTest, DetectsDeletedRecord) {
  write_records(5);
  auto v = lines();
  v.erase(v.begin() + 2);
  set_lines(v);
  auto r = check();
  EXPECT_TRUE(has_problem(r, 3, "prev does not chain")) << dump(r);
  EXPECT_TRUE(has_problem(r, 3, "seq 3, expected 2")) << dump(r);
}

TEST_F(AuditLogTest, DetectsDeletedFirstRecord) {
  write_records(3);
  auto v = lines();
  v.erase(v.begin());
  set_lines(v);
  auto r = check();
  EXPECT_TRUE(has_problem(r, 1, "genesis")) << dump(r);
}

TEST_F(AuditLogTest, DetectsTruncationOnlyWithExpectedHead) {
  std::string head = write_records(5);
  auto v = lines();
  v.resize(3);
  set_lines(v);
  EXPECT_TRUE(check().ok());  // a clean prefix is a valid chain by itself
  auto r = check(head);
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(has_problem(r, 4, "not in the log")) << dump(r);
}

TEST_F(AuditLogTest, RecordsAfterTheExpectedHeadAreFine) {
  std::string head = write_records(3);
  {
    auto log = AuditLog::open(path_);
    ASSERT_TRUE(log.ok());
    ASSERT_TRUE(log->append("state", "kda", {{"phase", "review"}}).ok());
  }
  auto r = check(head);
  EXPECT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(r.head_line, 3u);
  EXPECT_EQ(r.records, 4u);
}

TEST_F(AuditLogTest, DetectsReordering) {
  write_records(5);
  auto v = lines();
  std::swap(v[1], v[2]);
  set_lines(v);
  auto r = check();
  EXPECT_TRUE(has_problem(r, 2, "prev does not chain")) << dump(r);
  EXPECT_TRUE(has_problem(r, 2, "seq 2, expected 1")) << dump(r);
  EXPECT_TRUE(has_problem(r, 3, "prev does not chain")) << dump(r);
}

TEST_F(AuditLogTest, DetectsMalformedAndInsertedLines) {
  write_records(4);
  auto v = lines();
  v[1] = "{\"seq\":1, not json";
  v.insert(v.begin() + 3, "");
  set_lines(v);
  auto r = check();
  EXPECT_TRUE(has_problem(r, 2, "malformed JSON")) << dump(r);
  EXPECT_TRUE(has_problem(r, 4, "empty line")) << dump(r);
}

TEST_F(AuditLogTest, DetectsMissingAndExtraFields) {
  write_records(3);
  auto v = lines();
  auto j = nlohmann::ordered_json::parse(v[0]);
  j["note"] = "added";
  v[0] = j.dump();
  auto k = nlohmann::ordered_json::parse(v[2]);
  k.erase("actor");
  v[2] = k.dump();
  set_lines(v);
  auto r = check();
  EXPECT_TRUE(has_problem(r, 1, "unexpected field \"note\"")) << dump(r);
  EXPECT_TRUE(has_problem(r, 3, "invalid field \"actor\"")) << dump(r);
}

TEST_F(AuditLogTest, DetectsTornLastLine) {
  write_records(3);
  auto v = lines();
  v[2].resize(v[2].size() / 2);
  set_lines(v, /*final_newline=*/false);
  auto r = check();
  EXPECT_TRUE(r.torn_tail);
  EXPECT_TRUE(has_problem(r, 3, "torn last line")) << dump(r);
  EXPECT_EQ(r.records, 2u);
}

TEST_F(AuditLogTest, ReopenContinuesTheChain) {
  write_records(3);
  {
    auto log = AuditLog::open(path_);
    ASSERT_TRUE(log.ok()) << log.status().message();
    EXPECT_EQ(log->size(), 3u);
    ASSERT_TRUE(log->append("verdict", "reviewer", {{"verdict", "CONTINUE"}}).ok());
    EXPECT_EQ(log->size(), 4u);
  }
  auto r = check();
  EXPECT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(r.records, 4u);
  EXPECT_EQ(nlohmann::json::parse(lines()[3])["seq"], 3);
}

TEST_F(AuditLogTest, ReopenRefusesTamperedLog) {
  write_records(3);
  auto v = lines();
  std::swap(v[0], v[1]);
  set_lines(v);
  auto log = AuditLog::open(path_);
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.status().message().find("audit.jsonl:1:"), std::string::npos) << log.status().message();
}

TEST_F(AuditLogTest, ReopenAfterTornAppendCutsItAndRecordsTheCut) {
  write_records(3);
  {
    std::ofstream out(path_, std::ios::app);
    out << "{\"seq\":3,\"time\":\"2026-";  // a crash in the middle of an append
  }
  auto log = AuditLog::open(path_);
  ASSERT_TRUE(log.ok()) << log.status().message();
  EXPECT_EQ(log->size(), 4u);  // three records plus the recovery record
  ASSERT_TRUE(log->append("state", "kda", {{"phase", "round"}}).ok());
  auto r = check(log->last_hash());
  EXPECT_TRUE(r.ok()) << dump(r);
  auto rec = nlohmann::json::parse(lines()[3]);
  EXPECT_EQ(rec["type"], "recovery");
  EXPECT_EQ(rec["data"]["torn_bytes"], 22);
}

TEST_F(AuditLogTest, TwoHandlesOnOneFileInterleave) {
  auto a = AuditLog::open(path_);
  auto b = AuditLog::open(path_);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(a->append("tool_call", "writer", {{"i", i}}).ok());
    ASSERT_TRUE(b->append("agent_event", "kda", {{"i", i}}).ok());
  }
  EXPECT_EQ(b->size(), 6u);
  EXPECT_EQ(a->last_hash().size(), 64u);
  auto r = check(b->last_hash());
  EXPECT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(r.records, 6u);
}

TEST_F(AuditLogTest, UnusualDataRoundTrips) {
  auto log = AuditLog::open(path_);
  ASSERT_TRUE(log.ok());
  nlohmann::json weird = {{"utf8", "caf\xc3\xa9 \xe2\x9c\x93"},
                          {"bad_utf8", std::string("\xff\xfe")},
                          {"ctrl", std::string("a\nb\tc\0d", 7)},
                          {"nums", {1e300, -0.0, 1.0 / 3.0, -5, 18446744073709551615ull}},
                          {"nested", {{"z", 1}, {"a", {{"b", nullptr}}}}}};
  ASSERT_TRUE(log->append("file_write", "writer", weird).ok());
  ASSERT_TRUE(log->append("file_write", "writer", nlohmann::json::array()).ok());
  auto r = check();
  EXPECT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(lines().size(), 2u);
}

TEST(AuditVerify, MissingFileIsNotFound) {
  auto r = verify("/nonexistent/kda/audit.jsonl");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().kind(), ErrorKind::kNotFound);
}

}  // namespace
}  // namespace kda::audit
