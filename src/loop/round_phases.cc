// One round of the loop (docs/run.md "States"): the writer's session under the round's contract,
// the reviewer's verdict, and the decision that updates the ledger and the incumbent. Verification
// of what the writer claims against kda's own evaluation is round_verify.cc.
#include "loop/round_decision.h"
#include "loop/runner.h"
#include "util/strings.h"

#include <thread>

namespace kda::loop::detail {

std::string Runner::previous_round_block() const {
  if (state_.round <= 1) return {};
  const RoundExplanation e = explain_round(state_.round - 1);
  if (!e.measured) return {};
  return fmt::format("\n## Previous round\nPREVIOUS_ROUND: {}\nOUTCOME: {}\nREASON: {}\nDETAIL: {}\nEVIDENCE: {}\n",
                     state_.round - 1, e.accepted ? "accepted" : "rejected", e.outcome.code,
                     e.outcome.what + std::string("; ") + e.detail,
                     (dir_ / "rounds" / round_name(state_.round - 1) / "verify.json").string());
}

std::string Runner::contract_text() const {
  const Candidate* inc = ledger_.find(state_.incumbent_id);
  std::string s = fmt::format(
      "# Round {} contract\n\nMainline objective: improve the geomean speedup of the incumbent {} ({:.3f}x vs the "
      "baseline) on the dev workloads, keeping every workload PASSED, following the frozen plan's next direction.\n\n"
      "Evidence required: call the `evaluate` tool on your final version, then `finish_round` with a summary and "
      "claims that match what evaluate showed (kda re-measures on fresh seeds; a claim off by more than {:.0f}% "
      "rejects the round). Change only the solution files in the workspace.\n",
      state_.round, state_.incumbent_id, state_.incumbent_speedup, state_.options.claim_tolerance * 100);
  if (inc != nullptr && inc->eval.contains("workloads")) s += "\nIncumbent measurement:\n" + eval_table(inc->eval);
  s += previous_round_block();
  if (state_.stalls >= 2)
    s += "\nREPLAN: the last " + std::to_string(state_.stalls) +
         " rounds stalled. Step back: re-read the plan, pick a different ranked direction, and say why the previous "
         "attempts failed. One more stalled round stops the run.\n";
  if (!state_.note.empty()) s += "\nNote from kda: " + state_.note + "\n";
  if (const std::optional<FailedCheck> open = failed_check())
    s += "\nOpen from the last completion check of " + state_.incumbent_id + ": " + util::join(open->criteria, ", ") +
         " on the workloads " + util::join(open->workloads, ", ") +
         ". A candidate that meets them there (kda measures those workloads itself; your `evaluate` tool measures "
         "the dev workloads), every workload PASSED, and is not slower on the dev workloads beyond the noise, is "
         "accepted as a repair without being faster.\n";
  return s;
}

Status Runner::round_writer() {
  const std::string rel = round_dir_rel();
  // A restarted round starts clean from the incumbent: no half-written artifacts, no stale edits.
  for (auto it = state_.protected_files.begin(); it != state_.protected_files.end();)
    it = it->first.rfind(rel + "/", 0) == 0 ? state_.protected_files.erase(it) : std::next(it);
  std::error_code ec;
  stdfs::remove_all(round_dir(), ec);
  KDA_RETURN_IF_ERROR(fs::ensure_dir(round_dir()));
  const std::string contract = contract_text();
  KDA_RETURN_IF_ERROR(fs::write_file_atomic(round_dir() / "contract.md", contract));
  const int lanes = state_.options.lanes;
  KDA_RETURN_IF_ERROR(log("state", "kda",
                          {{"event", "round started"},
                           {"round", state_.round},
                           {"incumbent", state_.incumbent_id},
                           {"lanes", lanes},
                           {"contract_sha256", sha256_hex(contract)}}));
  state_.lane_commits.clear();
  if (lanes == 1) {
    KDA_ASSIGN_OR_RETURN(state_.candidate_commit, writer_session(contract));
  } else {
    KDA_ASSIGN_OR_RETURN(state_.lane_commits, lane_writers(contract));
    state_.candidate_commit = state_.lane_commits.front();  // until verify promotes the best lane
  }
  KDA_RETURN_IF_ERROR(state_.move_to(Phase::kRound, Step::kVerify));
  return save_state();
}

Result<std::vector<std::string>> Runner::lane_writers(const std::string& contract) {
  const int lanes = state_.options.lanes;
  // Phase 1: each lane's work tree at the incumbent (an earlier round's, or a killed one's, go
  // first), its scratch directory, its tools and a writer backend of its own.
  GitWorkspace run_repo = workspace();
  const stdfs::path lanes_dir = dir_ / "lanes";
  std::error_code ec;
  stdfs::remove_all(lanes_dir, ec);
  if (ec) return Status::io("removing " + lanes_dir.string() + ": " + ec.message());
  KDA_RETURN_IF_ERROR(run_repo.prune_worktrees());
  std::vector<Lane> lane(lanes);
  for (int k = 1; k <= lanes; ++k) {
    Lane& l = lane[k - 1];
    l.k = k;
    KDA_RETURN_IF_ERROR(fs::ensure_dir(round_dir(k)));
    KDA_ASSIGN_OR_RETURN(l.git, run_repo.add_worktree(lanes_dir / fmt::format("lane{}", k), state_.incumbent_commit));
    l.scratch = dir_ / "scratch" / fmt::format("lane{}", k);
    KDA_RETURN_IF_ERROR(fs::ensure_dir(l.scratch));
    l.tools = make_tools(k, l.workspace());
    auto backend = env_.make_backend(state_.options.writer);
    if (!backend.ok()) return backend.status().with_context(fmt::format("lane {}'s writer backend", k));
    l.backend = std::move(*backend);
  }

  // Phase 2: the writers at once, a thread each.
  std::vector<Result<std::string>> commits(lanes, Status::internal("lane writer did not run"));
  {
    std::vector<std::thread> threads;
    for (int k = 0; k < lanes; ++k)
      threads.emplace_back([&, k] {
        try {
          commits[k] = writer_session(contract, &lane[k]);
        } catch (const std::exception& e) {
          commits[k] = Status::internal(fmt::format("lane {}'s writer: {}", k + 1, e.what()));
        }
      });
    for (auto& t : threads) t.join();
  }

  // Phase 3: the commits in lane order (the first failure, after every lane ended, is the round's);
  // the work trees go, each commit stays under refs/kda/.
  std::vector<std::string> out;
  for (auto& c : commits) {
    if (!c.ok()) return c.status();
    out.push_back(*c);
  }
  stdfs::remove_all(lanes_dir, ec);
  KDA_RETURN_IF_ERROR(run_repo.prune_worktrees());
  return out;
}

// The writer's session of the round, from the incumbent's files: in the run's workspace, or in a
// lane's work tree (which add_worktree put at the incumbent); its commit.
Result<std::string> Runner::writer_session(const std::string& contract, Lane* lane) {
  const int k = lane != nullptr ? lane->k : 0;
  GitWorkspace ws = lane != nullptr ? *lane->git : workspace();
  if (lane == nullptr) KDA_RETURN_IF_ERROR(ws.reset_to(state_.incumbent_commit));
  const stdfs::path scratch = lane != nullptr ? lane->scratch : dir_ / "scratch";
  KdaToolHost& tools = lane != nullptr ? *lane->tools : *tools_;
  const int lanes = state_.options.lanes;
  std::string prompt = contract;
  if (k > 0)
    prompt += fmt::format(
        "\n## Lane {} of {}\nThis round has {} writer lanes, each starting from the incumbent's files in a work tree "
        "of its own and verified by kda on its own; only the best verified lane can become the incumbent. Where the "
        "plan ranks several directions, take direction {} (counting from 1, wrapping around), so the lanes try "
        "different things.\n",
        k, lanes, lanes, k);
  prompt += "\nThe frozen plan:\n" + plan_text() + "\nYour workspace: " + ws.dir().string() +
            "; scratch: " + scratch.string() + "; earlier rounds' evidence: " + (dir_ / "rounds").string() + ".\n";
  const std::string phase = k > 0 ? fmt::format("round.lane{}", k) : std::string("round");
  tools.begin_round(state_.options.max_evals_per_round);
  auto r = session(agent::Role::kWriter, phase, state_.round, prompt, lane);
  tools.end_round();
  if (!r.ok()) return r.status();
  json writer = {
      {"final_text", r->final_text}, {"turns", r->turns}, {"timed_out", r->timed_out}, {"events", r->events.size()}};
  KDA_RETURN_IF_ERROR(fs::write_file_atomic(round_dir(k) / "writer.json", writer.dump(2)));
  if (tools.finished())
    KDA_RETURN_IF_ERROR(fs::write_file_atomic(round_dir(k) / "finish.json", tools.finished()->to_json().dump(2)));
  const std::string what = k > 0 ? fmt::format("round {} lane {} candidate", state_.round, k)
                                 : fmt::format("round {} candidate", state_.round);
  KDA_ASSIGN_OR_RETURN(std::string commit, ws.commit_all(candidate_id(state_.round) + ": " + what));
  if (k > 0) KDA_RETURN_IF_ERROR(ws.keep(fmt::format("kda/rounds/{}/lane{}", round_name(state_.round), k), commit));
  json event = {{"event", "writer done"},
                {"round", state_.round},
                {"candidate_commit", commit},
                {"finished", tools.finished().has_value()}};
  if (k > 0) event["lane"] = k;
  KDA_RETURN_IF_ERROR(log("state", "kda", event));
  return commit;
}

Status Runner::round_review() {
  const bool alignment = state_.options.alignment_every > 0 && state_.round % state_.options.alignment_every == 0;
  const Result<VerifyRecord> verify = VerifyRecord::read(round_dir() / "verify.json");
  std::string finish = read_or_empty(round_dir() / "finish.json");
  std::string diff = read_or_empty(round_dir() / "diff.patch");
  if (diff.size() > 30000) diff = diff.substr(0, 30000) + "\n[diff truncated]\n";
  std::string evidence;
  if (verify.ok()) {
    for (const auto& c : verify->checks)
      evidence += fmt::format("- {} {}: {}\n", c.passed ? "pass" : "FAIL", c.name, c.detail);
    for (const auto& c : verify->claims) evidence += fmt::format("- claim {} {}: {}\n", c.metric, c.status, c.detail);
    if (verify->eval.is_object() && verify->eval.contains("workloads"))
      evidence += "\nkda's measurement (dev workloads, fresh seeds):\n" + eval_table(verify->eval);
    evidence +=
        fmt::format("\nverified: {}; improvement over the incumbent ({:.3f}x): {}\n", verify->verified ? "yes" : "NO",
                    state_.incumbent_speedup, verify->improvement ? "yes" : "no");
    if (verify->repair.is_object())
      evidence += "The incumbent failed its last completion check; this candidate was measured as its repair: " +
                  verify->repair.value("detail", "") + "\n";
    if (verify->lane > 0) {
      evidence += fmt::format(
          "\nThis round had {} writer lanes, each verified on its own (rounds/{}/lanes/K: diff.patch, verify.json, "
          "finish.json); the candidate above is lane {}, the best verified one:\n",
          verify->lanes.size(), round_name(state_.round), verify->lane);
      for (const auto& l : verify->lanes)
        evidence += fmt::format("- lane {}{}: verified {}, geomean {:.3f}x, improvement {}; {}{}\n", l.lane,
                                l.chosen ? " (chosen)" : "", l.verified ? "yes" : "NO", l.geomean,
                                l.improvement ? "yes" : "no", l.summary.substr(0, 300),
                                l.rejections.empty() ? "" : "; rejected: " + json(l.rejections).dump());
    }
  }
  std::string history;
  int shown = 0;
  for (auto it = ledger_.candidates.rbegin(); it != ledger_.candidates.rend() && shown < (alignment ? 100 : 3);
       ++it, ++shown)
    history +=
        fmt::format("- {} (round {}, parent {}): geomean {:.3f}x, accepted {}; {}\n", it->id, it->round, it->parent,
                    it->eval.value("geomean", 0.0), it->accepted ? "yes" : "no", it->notes.substr(0, 300));
  std::string prompt = fmt::format(
      "{} of round {}.\n\n--- frozen plan ---\n{}\n--- round contract ---\n{}\n--- writer's finish_round ---\n{}\n"
      "--- verifier evidence ---\n{}\n--- diff (incumbent -> candidate) ---\n{}\n--- recent candidates ---\n{}\n"
      "COMPLETE asks kda to run the completion check (all workloads, more trials, the machine criteria); STOP "
      "ends the run with the incumbent. ADVANCED accepts the candidate as the new incumbent if kda verified an "
      "improvement.\nEnd with exactly:\nDECISION: CONTINUE|COMPLETE|STOP\nPROGRESS: ADVANCED|STALLED|REGRESSED\n",
      alignment ? "Alignment review (is the run still on the plan's course? judge the whole trajectory)" : "Review",
      state_.round, plan_text(), read_or_empty(round_dir() / "contract.md"),
      finish.empty() ? "(none: the writer did not call finish_round)" : finish, evidence, diff, history);
  KDA_ASSIGN_OR_RETURN(agent::SessionResult r,
                       session(agent::Role::kReviewer, alignment ? "alignment" : "review", state_.round, prompt));
  KDA_RETURN_IF_ERROR(fs::write_file_atomic(round_dir() / "review.md", r.final_text));
  ReviewVerdict v = parse_review_verdict(r.final_text);
  const json vj = VerdictRecord{.decision = v.decision,
                                .progress = v.progress,
                                .well_formed = v.well_formed,
                                .complaint = v.complaint,
                                .alignment = alignment}
                      .to_json();
  KDA_RETURN_IF_ERROR(fs::write_file_atomic(round_dir() / "verdict.json", vj.dump(2)));
  KDA_RETURN_IF_ERROR(protect(round_dir_rel() + "/verdict.json"));
  KDA_RETURN_IF_ERROR(log("verdict", "reviewer", {{"round", state_.round}, {"verdict", vj}}));
  if (!v.well_formed) {
    state_.complaints.push_back(fmt::format("round {}: {}", state_.round, v.complaint));
    KDA_RETURN_IF_ERROR(log("complaint", "kda", {{"round", state_.round}, {"what", v.complaint}}));
  }
  KDA_RETURN_IF_ERROR(state_.move_to(Phase::kRound, Step::kDecide));
  return save_state();
}

// Deterministic from the round's files and the state, so a kill before the state is saved just
// makes the resumed run decide the same way again.
Status Runner::round_decide() {
  auto verify = VerifyRecord::read(round_dir() / "verify.json");
  auto verdict = VerdictRecord::read(round_dir() / "verdict.json");
  if (!verify.ok() || !verdict.ok())
    return Status::internal("round " + std::to_string(state_.round) + ": verify.json or verdict.json unreadable: " +
                            (verify.ok() ? verdict.status().message() : verify.status().message()));
  const bool verified = verify->verified;
  const bool improvement = verify->improvement;
  const RoundDecision d = decide_round({.verified = verified,
                                        .improvement = improvement,
                                        .decision = verdict->decision,
                                        .progress = verdict->progress,
                                        .stalls_before = state_.stalls});
  const bool accepted = d.accepted;

  Candidate c;
  c.id = candidate_id(state_.round);
  c.parent = state_.incumbent_id;
  c.round = state_.round;
  c.commit = state_.candidate_commit;
  if (auto s = task::load_solution(dir_ / "workspace"); s.ok()) c.solution_hash = task::solution_hash(*s);
  c.eval = verify->eval.is_object() ? verify->eval : json::object();
  c.verdicts = {{"verify", {{"verified", verified}, {"improvement", improvement}, {"rejections", verify->rejections}}},
                {"review", verdict->to_json()}};
  c.accepted = accepted;
  json finish = json::parse(read_or_empty(round_dir() / "finish.json"), nullptr, false);
  c.notes = finish.is_object() ? finish.value("summary", "") : "";
  if (verify->lane > 0) c.notes = fmt::format("lane {} of {}: ", verify->lane, verify->lanes.size()) + c.notes;
  ledger_.upsert(c);
  // The lanes not chosen stay in the ledger as candidates of their own (never accepted).
  for (const LaneRecord& l : verify->lanes) {
    if (l.chosen) continue;
    Candidate other;
    other.id = lane_candidate_id(state_.round, l.lane);
    other.parent = state_.incumbent_id;
    other.round = state_.round;
    other.commit = l.commit;
    auto lv = VerifyRecord::read(round_dir() / "lanes" / std::to_string(l.lane) / "verify.json");
    other.eval = lv.ok() && lv->eval.is_object() ? lv->eval : json::object();
    other.verdicts = {
        {"verify", {{"verified", l.verified}, {"improvement", l.improvement}, {"rejections", l.rejections}}}};
    other.notes = fmt::format("lane {} of {}, not chosen: ", l.lane, verify->lanes.size()) + l.summary;
    ledger_.upsert(other);
  }
  if (accepted) {
    state_.incumbent_id = c.id;
    state_.incumbent_commit = c.commit;
    set_incumbent_score(verify->geomean, verify->geomean_ci95);
  }
  ledger_.incumbent = state_.incumbent_id;
  KDA_ASSIGN_OR_RETURN(state_.protected_files["ledger.json"], save_json(dir_ / "ledger.json", ledger_.to_json()));
  state_.stalls = d.stalls;
  state_.note.clear();
  KDA_RETURN_IF_ERROR(log("state", "kda",
                          {{"event", "round decided"},
                           {"round", state_.round},
                           {"accepted", accepted},
                           {"incumbent", state_.incumbent_id},
                           {"decision", decision_name(verdict->decision)},
                           {"progress", progress_name(verdict->progress)},
                           {"stalls", state_.stalls}}));
  GitWorkspace ws = workspace();
  KDA_RETURN_IF_ERROR(ws.reset_to(state_.incumbent_commit));
  if (accepted) {
    status_line(fmt::format("round {} accepted: geomean {:.3f}x (reviewer {}, {})", state_.round,
                            state_.incumbent_speedup, decision_name(verdict->decision),
                            progress_name(verdict->progress)));
  } else {
    const RoundExplanation e = explain_round(state_.round);
    status_line(fmt::format("round {} not accepted: {}: {} (reviewer {})", state_.round, e.outcome.code,
                            e.detail.substr(0, 300), e.review));
  }
  state_.round += 1;
  KDA_RETURN_IF_ERROR(state_.move_to(Phase::kRound, Step::kWriter));
  state_.candidate_commit.clear();
  if (d.next == RoundDecision::Next::kStop) return stop(d.stop_reason);
  if (d.next == RoundDecision::Next::kCompletionCheck) {
    const IncumbentScore incumbent{.id = state_.incumbent_id,
                                   .speedup = state_.incumbent_speedup,
                                   .ci_high = state_.incumbent_ci_high,
                                   .claim_tolerance = state_.options.claim_tolerance};
    const json last_check = json::parse(read_or_empty(dir_ / "final" / "check.json"), nullptr, false);
    if (auto futile = futile_completion(accepted, last_check, incumbent, criteria_.min_geomean_speedup)) {
      // The round changed nothing the check would measure: say why instead of spending it.
      KDA_RETURN_IF_ERROR(log("state", "kda", {{"event", "completion check skipped"}, {"why", *futile}}));
      state_.note = "the reviewer asked for COMPLETE, but no completion check was run: " + *futile;
      state_.complaints.push_back("COMPLETE on round " + std::to_string(state_.round - 1) + ": " + *futile);
      status_line("completion check skipped: " + *futile);
      if (state_.round > state_.options.max_rounds)
        return stop("the reviewer asked for COMPLETE and no rounds are left: " + *futile);
      return save_state();
    }
    KDA_RETURN_IF_ERROR(state_.move_to(Phase::kFinalize, Step::kCheck));
  }
  return save_state();
}

}  // namespace kda::loop::detail
