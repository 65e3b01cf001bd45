// Resume after a failure (backend or evaluator) injected at every effect of the full scenario, one
// at a time: each failed run resumes to the same result without repeating an accepted round.
#include "loop/run_loop_fixture.h"

namespace kda::loop::testing_fixture {
namespace {

// A failure (backend or evaluator) at any point leaves a run that resumes to the same result,
// without repeating an accepted round's writer session.
TEST_F(RunLoopTest, ResumesAfterFailureAtEveryEffect) {
  add_full_scenario(sessions_);
  // Clean run: count effects.
  ASSERT_TRUE(start_run(run_, options(), env()).ok());
  const int total_sessions = session_calls_, total_evals = fake_.calls;
  ASSERT_GT(total_sessions, 10);
  for (int at = 1; at <= total_sessions + total_evals; ++at) {
    SCOPED_TRACE("failure at effect " + std::to_string(at));
    start_over();
    if (at <= total_sessions)
      fail_session_at_ = at;
    else
      fake_.fail_at = at - total_sessions;
    auto first = start_run(run_, options(), env());
    if (first.ok()) {  // an evaluate-tool failure is the agent's problem, not the run's
      expect_full_scenario_result(run_, *first);
      continue;
    }
    fail_session_at_ = -1;
    fake_.fail_at = -1;
    auto resumed = resume_run(run_, env());
    if (!resumed.ok() && !stdfs::exists(run_ / "state.json")) continue;  // died before setup finished
    ASSERT_TRUE(resumed.ok()) << resumed.status().message();
    expect_full_scenario_result(run_, *resumed);
    // Round 1's writer ran once, unless the failure was in it.
    int r1 = std::count(session_log_.begin(), session_log_.end(), "writer:round:1");
    EXPECT_LE(r1, 2);
    if (r1 == 2) {
      EXPECT_EQ(session_log_[at - 1], "writer:round:1");
    }
  }
}

}  // namespace
}  // namespace kda::loop::testing_fixture
