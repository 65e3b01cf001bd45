// `--writer tuner`: an offline writer with no LLM that improves a kernel by autotuning (kda_tune)
// in rounds and claims only what the tuner measured.
//
//   plan     names the tunables, the configuration count and the regimes; copies the tunable
//            starting point into scratch/tuner/source (the workspace's own solution when it has a
//            tunables.toml, else the sealed pack's solutions/tunable/, which the plan says)
//   round 1  coarse search: a sample of the space; the best single configuration -> workspace
//   round 2  per-regime refinement: the rest of the space (successive halving re-times each
//            regime's survivors longer); the refined best single configuration -> workspace
//   round 3  the dispatcher: each regime's winner compiled in, dispatched on shape -> workspace
//   round 4+ nothing left: the best verified artefact again (NEXT: none)
//
// Every round ends with finish_round: a summary (the map, the numbers, a `NEXT:` line naming the
// next stage or "none", which the rules reviewer reads) and a geomean_speedup claim computed from
// the tuner's final timing of the chosen solution against the baseline interleaved with it. The
// search state lives in scratch/tuner/search, so a restarted round measures nothing twice.
//
// It lives in src/loop, not src/agent: it needs kda_tune (and so the evaluator) and the run
// directory's layout (state.json's budgets, the sealed task/), which the agent contracts library
// must not depend on.
#pragma once

#include <memory>
#include <string>

#include "agent/backend.h"
#include "util/status.h"

namespace kda::tune {
struct TuneResult;
}

namespace kda::loop {

enum class TunerStage { kCoarse, kRefine, kDispatcher, kDone };
const char* tuner_stage_name(TunerStage s);  // "coarse", "refine", "dispatcher", "none"
TunerStage tuner_stage_for_round(int round);

// Shares of the run's remaining budget (wall hours or evaluator minutes, whichever is tighter) a
// search stage may spend; the rest is kept for the loop's own verification and completion check.
inline constexpr double kTunerCoarseShare = 0.30;
inline constexpr double kTunerRefineShare = 0.45;
// The coarse round samples a quarter of the space (at least kTunerCoarseMin configurations):
// enough to find a good region, cheap enough to leave the refinement most of the budget. With 4 of
// host rmsnorm's 16 the first round was sometimes no faster than the baseline (3 of 5 runs here,
// 0.91x-0.99x); the good configurations there are few (large unrolls), so small spaces get 8.
inline constexpr int kTunerCoarseDivisor = 4;
inline constexpr int kTunerCoarseMin = 8;

// Whether a round writes the dispatcher rather than the best single configuration alone: the
// dispatcher round always (when its final evaluation passed); other rounds when the guard found the
// best single slower than the baseline on a visible workload beyond tune::kGuardTolerance, else the
// faster of the two.
bool emit_dispatcher(const tune::TuneResult& r, TunerStage stage);

// `arg` is the spec after "tuner:" (unused for now; "" or "auto").
Result<std::unique_ptr<agent::Backend>> make_tuner_writer(const std::string& arg);

}  // namespace kda::loop
