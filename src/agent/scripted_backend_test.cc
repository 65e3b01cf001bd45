#include "agent/scripted_backend.h"

#include <gtest/gtest.h>

#include "util/fs.h"

namespace kda::agent {
namespace {

class RecordingTools final : public ToolHost {
 public:
  std::vector<ToolSpec> tools() const override { return {{"echo", "echoes", {{"type", "object"}}, true}}; }
  ToolOutcome call(const std::string& name, const nlohmann::json& arguments) override {
    calls.emplace_back(name, arguments);
    if (name != "echo") return {"unknown tool: " + name, true, {}};
    return {arguments.dump(), false, {}};
  }
  std::vector<std::pair<std::string, nlohmann::json>> calls;
};

class ScriptedBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = fs::make_temp_dir(std::filesystem::temp_directory_path(), "kda-scripted");
    ASSERT_TRUE(d.ok());
    dir_ = *d;
    ASSERT_TRUE(fs::ensure_dir(dir_ / "ws").ok());
    ASSERT_TRUE(fs::ensure_dir(dir_ / "outside").ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  SessionRequest request(Role role, const std::string& phase, int index) {
    SessionRequest r;
    r.role = role;
    r.phase = phase;
    r.index = index;
    r.workspace = dir_ / "ws";
    r.writable = {dir_ / "ws"};
    r.tools = &tools_;
    return r;
  }
  std::filesystem::path dir_;
  RecordingTools tools_;
};

TEST_F(ScriptedBackendTest, PlaysStepsAndPicksExactIndexBeforeWildcard) {
  nlohmann::json script = {{"sessions",
                            {{{"role", "writer"}, {"phase", "round"}, {"final_text", "any round"}},
                             {{"role", "writer"},
                              {"phase", "round"},
                              {"index", 2},
                              {"steps",
                               {{{"write_file", {{"path", "k.cc"}, {"content", "int x;"}}}},
                                {{"tool", "echo"}, {"arguments", {{"a", 1}}}},
                                {{"tool", "nope"}}}},
                              {"final_text", "round two"},
                              {"usage", {{"input_tokens", 10}, {"output_tokens", 5}, {"cost_usd", 0.5}}}}}}};
  auto b = make_scripted_backend(script);
  ASSERT_TRUE(b.ok()) << b.status().message();
  std::vector<AgentEvent> seen;
  auto req = request(Role::kWriter, "round", 2);
  req.on_event = [&](const AgentEvent& e) { seen.push_back(e); };
  auto r = (*b)->run_session(req);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->final_text, "round two");
  EXPECT_EQ(r->usage.input_tokens, 10);
  EXPECT_DOUBLE_EQ(r->usage.cost_usd, 0.5);
  EXPECT_EQ(*fs::read_file(dir_ / "ws" / "k.cc"), "int x;");
  ASSERT_EQ(tools_.calls.size(), 2u);
  EXPECT_EQ(tools_.calls[0].second["a"], 1);
  ASSERT_EQ(r->events.size(), 4u);  // write, echo, nope, message
  EXPECT_EQ(r->events[0].kind, "file_write");
  EXPECT_TRUE(r->events[1].ok);
  EXPECT_FALSE(r->events[2].ok);
  EXPECT_EQ(seen.size(), r->events.size());

  auto other = (*b)->run_session(request(Role::kWriter, "round", 7));
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->final_text, "any round");
}

TEST_F(ScriptedBackendTest, WritesOutsideWritableAreDeniedUnlessUnconfined) {
  nlohmann::json script = {
      {"sessions",
       {{{"role", "writer"},
         {"phase", "round"},
         {"steps",
          {{{"write_file", {{"path", "../outside/a.txt"}, {"content", "x"}}}},
           {{"write_file", {{"path", "../outside/b.txt"}, {"content", "y"}, {"unconfined", true}}}}}}}}}};
  auto b = make_scripted_backend(script);
  ASSERT_TRUE(b.ok());
  auto r = (*b)->run_session(request(Role::kWriter, "round", 1));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->events[0].kind, "denied");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "outside" / "a.txt"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "outside" / "b.txt"));
}

TEST_F(ScriptedBackendTest, MissingSessionAndFailStepAreErrors) {
  nlohmann::json script = {
      {"sessions", {{{"role", "reviewer"}, {"phase", "review"}, {"steps", {{{"fail", "down"}}}}}}}};
  auto b = make_scripted_backend(script);
  ASSERT_TRUE(b.ok());
  auto missing = (*b)->run_session(request(Role::kWriter, "round", 1));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("phase round"), std::string::npos);
  auto failed = (*b)->run_session(request(Role::kReviewer, "review", 1));
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("down"), std::string::npos);
}

TEST_F(ScriptedBackendTest, BadScriptsNameTheField) {
  auto bad_role = make_scripted_backend(nlohmann::json{{"sessions", {{{"role", "boss"}, {"phase", "x"}}}}});
  ASSERT_FALSE(bad_role.ok());
  EXPECT_NE(bad_role.status().message().find("sessions[0].role"), std::string::npos);
  auto bad_step = make_scripted_backend(
      nlohmann::json{{"sessions", {{{"role", "writer"}, {"phase", "x"}, {"steps", {{{"dance", 1}}}}}}}});
  ASSERT_FALSE(bad_step.ok());
  EXPECT_NE(bad_step.status().message().find("sessions[0].steps[0]"), std::string::npos);
  auto missing_file = make_scripted_backend(dir_ / "none.json");
  EXPECT_FALSE(missing_file.ok());
}

TEST_F(ScriptedBackendTest, ContentFileIsReadBesideTheScript) {
  ASSERT_TRUE(fs::write_file_atomic(dir_ / "kernel.cc", "// fast").ok());
  ASSERT_TRUE(
      fs::write_file_atomic(
          dir_ / "script.json",
          R"({"sessions":[{"role":"writer","phase":"round","steps":[{"write_file":{"path":"kernel.cc","content_file":"kernel.cc"}}]}]})")
          .ok());
  auto b = make_scripted_backend(dir_ / "script.json");
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_TRUE((*b)->run_session(request(Role::kWriter, "round", 3)).ok());
  EXPECT_EQ(*fs::read_file(dir_ / "ws" / "kernel.cc"), "// fast");
}

}  // namespace
}  // namespace kda::agent
