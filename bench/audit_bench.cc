// Audit log append throughput: each append is one write() and one fsync() of a canonical JSON
// line under flock, so the disk's fsync latency dominates. Also the verifier's read rate.
#include <benchmark/benchmark.h>

#include <filesystem>

#include "audit/audit_log.h"
#include "util/fs.h"

namespace {

namespace stdfs = std::filesystem;

const nlohmann::json& sample_record() {
  static const nlohmann::json kData = {{"tool", "edit_file"},
                                       {"path", "solution/kernel.cu"},
                                       {"sha256", std::string(64, 'a')},
                                       {"bytes", 18234},
                                       {"ok", true}};
  return kData;
}

void BM_AuditAppend(benchmark::State& state) {
  auto dir = kda::fs::make_temp_dir(stdfs::temp_directory_path(), "kda-audit-bench");
  if (!dir.ok()) {
    state.SkipWithError("no temp dir");
    return;
  }
  auto log = kda::audit::AuditLog::open(*dir / "audit.jsonl");
  if (!log.ok()) {
    state.SkipWithError("open failed");
    return;
  }
  for (auto _ : state) {
    if (!log->append("tool_call", "writer", sample_record()).ok()) state.SkipWithError("append failed");
  }
  state.SetItemsProcessed(state.iterations());
  stdfs::remove_all(*dir);
}
BENCHMARK(BM_AuditAppend)->UseRealTime();

void BM_AuditVerify(benchmark::State& state) {
  auto dir = kda::fs::make_temp_dir(stdfs::temp_directory_path(), "kda-audit-bench");
  if (!dir.ok()) {
    state.SkipWithError("no temp dir");
    return;
  }
  const auto path = *dir / "audit.jsonl";
  {
    auto log = kda::audit::AuditLog::open(path);
    for (int i = 0; i < state.range(0) && log.ok(); ++i) (void)log->append("tool_call", "writer", sample_record());
  }
  for (auto _ : state) {
    auto r = kda::audit::verify(path);
    if (!r.ok() || !r->ok()) state.SkipWithError("verify failed");
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
  stdfs::remove_all(*dir);
}
BENCHMARK(BM_AuditVerify)->Arg(2000)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
