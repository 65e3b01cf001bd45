// The knowledge tools inside `kda run`: a scripted writer profiles into its scratch space and reads
// the analysis, a path outside the run is refused, the reviewer (read-only) can call them too, and
// every call lands in the audit log.
#include "loop/run_loop_fixture.h"

namespace kda::loop::testing_fixture {
namespace {

// The agent_event tool_call records of the audit log for `tool`.
std::vector<json> tool_calls(const stdfs::path& audit, const std::string& tool) {
  std::vector<json> out;
  auto text = fs::read_file(audit);
  EXPECT_TRUE(text.ok());
  if (!text.ok()) return out;
  size_t start = 0;
  for (size_t nl; (nl = text->find('\n', start)) != std::string::npos; start = nl + 1) {
    json r = json::parse(text->substr(start, nl - start), nullptr, false);
    if (r.is_discarded() || r.value("type", "") != "agent_event") continue;
    const json& d = r["data"];
    if (d.value("kind", "") == "tool_call" && d["detail"].value("name", "") == tool) {
      json c = d;
      c["actor"] = r["actor"];
      out.push_back(c);
    }
  }
  return out;
}

TEST_F(RunLoopTest, SessionsOfferTheKnowledgeTools) {
  auto csv = fs::read_file(stdfs::path(KDA_SOURCE_DIR) / "src/ncu/testdata/saxpy_raw.csv");
  ASSERT_TRUE(csv.ok());
  for (const auto& p : plan_sessions()) sessions_.push_back(p);
  json write = {{"write_file", {{"path", "../scratch/profile.csv"}, {"content", *csv}}}};
  json inside = {{"tool", "ncu_analyze"}, {"arguments", {{"report", "../scratch/profile.csv"}}}};
  json outside = {{"tool", "ncu_analyze"}, {"arguments", {{"report", "/etc/passwd"}}}};
  sessions_.push_back(writer_session("round", 1,
                                     json::array({write, inside, outside, write_kernel(4.0),
                                                  finish("coalesced", json::array({geomean_claim(4.0)}))})));
  json review = reviewer_session("review", 1, "DECISION: COMPLETE\nPROGRESS: ADVANCED");
  json diff_step = {{"tool", "ncu_diff"},
                    {"arguments", {{"before", "../scratch/profile.csv"}, {"after", "../scratch/profile.csv"}}}};
  review["steps"] = json::array({diff_step});
  sessions_.push_back(review);
  auto o = start_run(run_, options(), env());
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->phase, "done") << o->stop_reason;

  auto analyze = tool_calls(run_ / "audit.jsonl", "ncu_analyze");
  ASSERT_EQ(analyze.size(), 2u);
  EXPECT_EQ(analyze[0]["actor"], "writer");
  EXPECT_TRUE(analyze[0]["ok"].get<bool>()) << analyze[0].dump();
  EXPECT_NE(analyze[0]["detail"]["result"].get<std::string>().find("### Priorities"), std::string::npos);
  EXPECT_FALSE(analyze[1]["ok"].get<bool>()) << analyze[1].dump();
  EXPECT_NE(analyze[1]["detail"]["result"].get<std::string>().find("outside the directories"), std::string::npos);
  auto diff = tool_calls(run_ / "audit.jsonl", "ncu_diff");
  ASSERT_EQ(diff.size(), 1u);
  EXPECT_EQ(diff[0]["actor"], "reviewer");
  EXPECT_TRUE(diff[0]["ok"].get<bool>()) << diff[0].dump();
}

}  // namespace
}  // namespace kda::loop::testing_fixture
