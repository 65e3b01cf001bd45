// The dispatcher's queue (idempotent ids, attempts, results counted once, durability), pools, and
// the dispatcher against real `kda serve` instances on the host backend: the same verdicts as one
// `kda eval` process, and a server killed with -9 mid-run whose tasks are requeued and finished once.
#include <signal.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "exec/cluster.h"
#include "exec/dispatcher.h"
#include "exec/pool.h"
#include "exec/queue.h"
#include "proc/subprocess.h"
#include "task/solution.h"
#include "util/fs.h"

namespace kda::exec {
namespace {

namespace stdfs = std::filesystem;
using nlohmann::json;

const stdfs::path kSource = KDA_SOURCE_DIR;
const stdfs::path kRmsnorm = kSource / "tasks/host/rmsnorm";
const stdfs::path kFixtures = kSource / "tests/fixtures/solutions/host_rmsnorm";

stdfs::path tmp_dir() {
  auto d = fs::make_temp_dir(stdfs::temp_directory_path(), "kda-exec-test");
  EXPECT_TRUE(d.ok()) << d.status().message();
  return d.ok() ? *d : stdfs::path();
}

struct TmpDir {
  stdfs::path path = tmp_dir();
  ~TmpDir() {
    std::error_code ec;
    stdfs::remove_all(path, ec);
  }
};

std::unique_ptr<TaskQueue> open_queue(const stdfs::path& file) {
  auto q = TaskQueue::open(file);
  EXPECT_TRUE(q.ok()) << q.status().message();
  return q.ok() ? std::move(*q) : nullptr;
}

TEST(TaskQueue, IdsAreIdempotentAndAnotherBodyIsAConflict) {
  TmpDir d;
  auto q = TaskQueue::open(d.path / "q.sqlite");
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_EQ(*(*q)->enqueue("a", {{"x", 1}}), TaskQueue::Enqueued::kCreated);
  EXPECT_EQ(*(*q)->enqueue("a", {{"x", 1}}), TaskQueue::Enqueued::kSame);
  EXPECT_EQ(*(*q)->enqueue("a", {{"x", 2}}), TaskQueue::Enqueued::kConflict);
  EXPECT_FALSE((*q)->enqueue("", {}).ok());
  EXPECT_EQ((*q)->counts()->queued, 1u);
}

TEST(TaskQueue, AResultIsCountedOnlyByTheAttemptThatHoldsTheTask) {
  TmpDir d;
  auto q = open_queue(d.path / "q.sqlite");
  ASSERT_TRUE(q->enqueue("first", {{"n", 1}}).ok());
  ASSERT_TRUE(q->enqueue("second", {{"n", 2}}).ok());
  auto t = std::move(**q->claim("http://a", "i1"));
  EXPECT_EQ(t.id, "first");  // oldest first
  EXPECT_EQ(t.attempt, 1);
  // Requeued (its server went down): the old attempt's late result is not counted...
  EXPECT_EQ(**q->requeue("first", 1, "a went down", 3), TaskState::kQueued);
  EXPECT_FALSE(*q->complete("first", 1, {{"late", true}}));
  // ...the next attempt's is, once.
  auto again = std::move(**q->claim("http://b", "i2"));
  EXPECT_EQ(again.id, "first");
  EXPECT_EQ(again.attempt, 2);
  EXPECT_TRUE(*q->complete("first", 2, {{"ok", true}}));
  EXPECT_FALSE(*q->complete("first", 2, {{"ok", true}}));
  auto done = std::move(**q->find("first"));
  EXPECT_EQ(done.state, TaskState::kDone);
  EXPECT_EQ(done.server, "http://b");
  EXPECT_EQ((*done.result)["ok"], true);
  EXPECT_EQ(done.last_reason, "a went down");
  const QueueCounts c = *q->counts();
  EXPECT_EQ(c.done, 1u);
  EXPECT_EQ(c.queued, 1u);
  EXPECT_EQ(c.retries, 1u);
}

TEST(TaskQueue, AttemptsRunOutButBackpressureCostsNone) {
  TmpDir d;
  auto q = open_queue(d.path / "q.sqlite");
  ASSERT_TRUE(q->enqueue("t", json::object()).ok());
  for (int i = 0; i < 5; ++i) {  // 503s: never charged
    auto t = std::move(**q->claim("s", "i"));
    EXPECT_EQ(t.attempt, 1);
    EXPECT_EQ(**q->requeue("t", t.attempt, "draining (503)", 2, false), TaskState::kQueued);
  }
  auto t1 = std::move(**q->claim("s", "i"));
  EXPECT_EQ(**q->requeue("t", t1.attempt, "down", 2), TaskState::kQueued);
  auto t2 = std::move(**q->claim("s", "i"));
  EXPECT_EQ(t2.attempt, 2);
  EXPECT_EQ(**q->requeue("t", t2.attempt, "down again", 2), TaskState::kFailed);
  auto f = std::move(**q->find("t"));
  EXPECT_EQ(f.state, TaskState::kFailed);
  EXPECT_NE(f.error.find("gave up after 2 attempt(s)"), std::string::npos) << f.error;
  EXPECT_NE(f.error.find("down again"), std::string::npos) << f.error;
  EXPECT_FALSE(q->claim("s", "i")->has_value());
}

TEST(TaskQueue, SurvivesItsProcessAndRecoversRunningTasks) {
  TmpDir d;
  {
    auto q = open_queue(d.path / "q.sqlite");
    ASSERT_TRUE(q->enqueue("a", {{"n", 1}}).ok());
    ASSERT_TRUE(q->enqueue("b", {{"n", 2}}).ok());
    ASSERT_TRUE(q->claim("s", "i")->has_value());  // "a" running when the dispatcher dies
  }
  auto q = open_queue(d.path / "q.sqlite");
  EXPECT_EQ(q->counts()->running, 1u);
  EXPECT_EQ(*q->recover(), 1u);
  auto all = *q->tasks();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, "a");
  EXPECT_EQ(all[0].state, TaskState::kQueued);
  EXPECT_EQ(all[0].attempt, 0);  // not charged
  EXPECT_EQ(all[0].body["n"], 1);
  // Not a queue: a clear error naming the file.
  std::ofstream(d.path / "not.sqlite") << "plain text, not a database";
  auto bad = TaskQueue::open(d.path / "not.sqlite");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not.sqlite"), std::string::npos) << bad.status().message();
}

TEST(Pool, UrlsAddressFilesAndLocalAndClearErrors) {
  TmpDir d;
  auto urls = parse_pool("http://127.0.0.1:1,http://127.0.0.1:2", std::nullopt);
  ASSERT_TRUE(urls.ok()) << urls.status().message();
  ASSERT_EQ(urls->servers.size(), 2u);
  EXPECT_EQ(urls->servers[1].url, "http://127.0.0.1:2");
  std::ofstream(d.path / "token") << "0123456789abcdef0123\n";
  std::ofstream(d.path / "a.json") << json{{"url", "http://n1:8000"}, {"auth", "bearer"}, {"token_file", "token"}};
  std::ofstream(d.path / "b.json") << json{{"url", "http://n2:8000"}, {"auth", "none"}};
  auto dir = parse_pool(d.path.string(), std::nullopt);
  ASSERT_TRUE(dir.ok()) << dir.status().message();
  ASSERT_EQ(dir->servers.size(), 2u);
  EXPECT_EQ(dir->servers[0].token, "0123456789abcdef0123");
  EXPECT_EQ(dir->servers[1].token, "");
  auto local = parse_pool("local:cpu:2", std::nullopt);
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(*local->local, "cpu:2");
  // A bearer server without a token, a file that is not an address, a word that is nothing.
  std::ofstream(d.path / "c.json") << json{{"url", "http://n3:8000"}, {"auth", "bearer"}};
  auto no_token = parse_pool((d.path / "c.json").string(), std::nullopt);
  ASSERT_FALSE(no_token.ok());
  EXPECT_NE(no_token.status().message().find("--token-file"), std::string::npos);
  std::ofstream(d.path / "e.json") << json{{"host", "n4"}};
  EXPECT_NE(parse_pool((d.path / "e.json").string(), std::nullopt).status().message().find("\"url\""),
            std::string::npos);
  auto word = parse_pool("nowhere-at-all", std::nullopt);
  ASSERT_FALSE(word.ok());
  EXPECT_NE(word.status().message().find("nowhere-at-all"), std::string::npos);
  EXPECT_FALSE(parse_pool("http://a:1,ftp://b", std::nullopt).ok());
}

// The batch job kda cluster submits, as a GPU cluster would get it (CI's Slurm has host workers only).
TEST(Cluster, JobFilesAskSlurmForTheNodesGpusTimeAndRequeue) {
  ClusterOptions o{.dir = "/shared/kc",
                   .kda_binary = "/opt/kda/bin/kda",
                   .dataset = "/shared/packs",
                   .nodes = 4,
                   .servers_per_node = 2,
                   .gpus_per_node = 8,
                   .partition = "gpu",
                   .account = "proj",
                   .time_minutes = 360,
                   .serve_args = {"--num-trials", "5", "--allow-holdout"}};
  const JobFiles f = job_files(o);
  for (const char* line : {"#SBATCH --nodes=4\n", "#SBATCH --ntasks-per-node=2\n", "#SBATCH --requeue\n",
                           "#SBATCH --time=360\n", "#SBATCH --gres=gpu:8\n", "#SBATCH --partition=gpu\n",
                           "#SBATCH --account=proj\n", "#SBATCH --output=/shared/kc/logs/slurm-%j.out\n",
                           "exec srun --kill-on-bad-exit=0 bash '/shared/kc'/node.sh\n"})
    EXPECT_NE(f.job_script.find(line), std::string::npos) << line << "\n" << f.job_script;
  // Each of the 2 servers on a node takes its 4 of the node's 8 GPUs, by its local task id.
  for (const char* line : {"per=$(( ${#gpus[@]} / 2 ))", "start=$(( ${SLURM_LOCALID:-0} * per ))",
                           "exec '/opt/kda/bin/kda' serve --local '/shared/packs'", "--token-file '/shared/kc'/token",
                           "'--num-trials' '5' '--allow-holdout'"})
    EXPECT_NE(f.node_script.find(line), std::string::npos) << line << "\n" << f.node_script;
  // Host workers: no GRES line, the --devices given.
  o.gpus_per_node = 0;
  o.host_devices = "cpu:4";
  const JobFiles h = job_files(o);
  EXPECT_EQ(h.job_script.find("--gres"), std::string::npos);
  EXPECT_NE(h.node_script.find("devices='cpu:4'"), std::string::npos) << h.node_script;
  // Bad options are refused before anything is written or submitted, naming the option.
  TmpDir d;
  o.dir = d.path / "c";
  o.dataset = kRmsnorm;
  o.gpus_per_node = 3;  // does not split over 2 servers
  auto up = cluster_up(o);
  ASSERT_FALSE(up.ok());
  EXPECT_NE(up.status().message().find("--gpus-per-node 3"), std::string::npos) << up.status().message();
  EXPECT_FALSE(stdfs::exists(o.dir / "job.sh"));
}

json solution_json(const std::string& which) {
  auto s = task::load_solution(kFixtures / which);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s->to_json();
}

std::vector<std::string> workload_uuids() {
  std::vector<std::string> out;
  std::ifstream in(kRmsnorm / "workloads.jsonl");
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(json::parse(line)["workload"]["uuid"]);
  return out;
}

std::unique_ptr<LocalServe> serve(const stdfs::path& dir, const std::string& devices,
                                  const stdfs::path& dataset = kRmsnorm) {
  auto s = LocalServe::start({.kda_binary = KDA_BINARY,
                              .dataset = dataset,
                              .devices = devices,
                              .dir = dir,
                              .extra_args = {"--warmup-runs", "1", "--iterations", "5", "--num-trials", "1"}});
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? std::move(*s) : nullptr;
}

// One task per (solution, workload); the verdict of each, by task id.
std::map<std::string, std::string> verdicts(TaskQueue& q) {
  std::map<std::string, std::string> out;
  const auto all = *q.tasks();
  for (const auto& t : all) {
    if (t.state != TaskState::kDone) {
      out[t.id] = std::string(task_state_name(t.state)) + ": " + t.error;
      continue;
    }
    const json& traces = (*t.result)["traces"];
    out[t.id] = traces.size() == 1 ? traces[0]["evaluation"]["status"].get<std::string>() : traces.dump();
  }
  return out;
}

// What one `kda eval` process says of `which` on every workload, by the same task ids.
std::map<std::string, std::string> one_process(const std::string& which) {
  auto r =
      proc::run({.argv = {KDA_BINARY, "eval", (kFixtures / which).string(), "--task", kRmsnorm.string(), "--workloads",
                          "all", "--warmup", "1", "--iterations", "5", "--trials", "1", "--json", "--quiet"},
                 .timeout_seconds = 600});
  EXPECT_TRUE(r.ok());
  std::map<std::string, std::string> out;
  auto j = json::parse(r->stdout_text, nullptr, false);
  EXPECT_TRUE(j.is_object()) << r->stdout_text << r->stderr_text;
  if (!j.is_object()) return out;
  for (const auto& t : j["traces"])
    out[which + "-" + t["workload"]["uuid"].get<std::string>()] = t["evaluation"]["status"];
  return out;
}

TEST(Dispatch, SpreadOverFourHostDevicesGivesOneProcesssVerdicts) {
  TmpDir d;
  auto a = serve(d.path / "a", "cpu:2");
  auto b = serve(d.path / "b", "cpu:2");
  ASSERT_TRUE(a && b);
  auto q = open_queue(d.path / "q.sqlite");
  std::map<std::string, std::string> want;
  for (const std::string which : {"fast", "wrong"}) {
    const json sol = solution_json(which);
    for (const auto& uuid : workload_uuids())
      ASSERT_EQ(*q->enqueue(which + "-" + uuid, {{"solution", sol}, {"workload_uuids", json::array({uuid})}}),
                TaskQueue::Enqueued::kCreated);
    want.merge(one_process(which));
  }
  size_t most_busy = 0;
  DispatchOptions o;
  o.progress = [&](const Progress& p) { most_busy = std::max(most_busy, p.busy); };
  Status st = dispatch(*q, {a->spec(), b->spec()}, o);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(verdicts(*q), want);
  EXPECT_EQ(most_busy, 4u);  // every device had a task at some point, none had two
  const QueueCounts c = *q->counts();
  EXPECT_EQ(c.done, want.size());
  EXPECT_EQ(c.retries, 0u);
  std::set<std::string> used;
  const auto all = *q->tasks();
  for (const auto& t : all) used.insert(t.server);
  EXPECT_EQ(used.size(), 2u);  // both servers took tasks
}

TEST(Dispatch, AServerKilledMidRunHasItsTasksRequeuedAndFinishedOnce) {
  TmpDir d;
  auto a = serve(d.path / "a", "cpu:1");
  auto b = serve(d.path / "b", "cpu:1");
  ASSERT_TRUE(a && b);
  auto q = open_queue(d.path / "q.sqlite");
  const json sol = solution_json("fast");
  const auto uuids = workload_uuids();
  for (const auto& uuid : uuids)
    ASSERT_TRUE(q->enqueue(uuid, {{"solution", sol}, {"workload_uuids", json::array({uuid})}}).ok());
  const std::string a_url = a->spec().url;
  std::atomic<bool> killed{false};
  std::vector<std::string> log;
  DispatchOptions o;
  o.health_interval_s = 0.2;
  o.log = [&](const std::string& line) { log.push_back(line); };
  // Once a's device has a task and two are done, a is killed with -9: the process and its evaluation.
  o.progress = [&](const Progress& p) {
    if (!killed && p.busy == 2 && p.tasks.done >= 2) {
      auto addr = json::parse(std::ifstream(d.path / "a" / "address.json"));
      ::kill(addr["pid"].get<int>(), SIGKILL);
      killed = true;
    }
  };
  Status st = dispatch(*q, {a->spec(), b->spec()}, o);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_TRUE(killed);
  const QueueCounts c = *q->counts();
  EXPECT_EQ(c.done, uuids.size());  // every task finished, each counted once (one row, one result)
  EXPECT_EQ(c.failed, 0u);
  EXPECT_GE(c.retries, 1u);
  bool requeued = false;
  const auto all = *q->tasks();
  for (const auto& t : all) {
    EXPECT_EQ((*t.result)["traces"][0]["evaluation"]["status"], "PASSED") << t.id;
    if (t.attempt > 1) {
      requeued = true;
      EXPECT_NE(t.server, a_url) << t.id << " was requeued to the server that died";
      EXPECT_NE(t.last_reason.find(a_url), std::string::npos) << t.last_reason;
    }
  }
  EXPECT_TRUE(requeued);
  std::string all_log;
  for (const auto& l : log) all_log += l + "\n";
  EXPECT_NE(all_log.find(a_url + " is down"), std::string::npos) << all_log;
}

TEST(Dispatch, AServerThatAppearsLaterJoins) {
  TmpDir d;
  auto a = serve(d.path / "a", "cpu:1");
  ASSERT_TRUE(a);
  auto q = open_queue(d.path / "q.sqlite");
  const json sol = solution_json("fast");
  const auto uuids = workload_uuids();
  for (size_t i = 0; i < 2; ++i)
    ASSERT_TRUE(q->enqueue(uuids[i], {{"solution", sol}, {"workload_uuids", json::array({uuids[i]})}}).ok());
  DispatchOptions o;
  o.health_interval_s = 0.1;
  std::vector<std::string> log;
  o.log = [&](const std::string& line) { log.push_back(line); };
  o.discover = [&]() { return std::vector<ServerSpec>{a->spec()}; };  // as a requeued job's address file
  Status st = dispatch(*q, {{.url = "http://127.0.0.1:9"}}, o);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(q->counts()->done, 2u);
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(log.front(), a->spec().url + " joined the pool");
}

// kda eval --on local with --queue, killed with -9 mid-run: the server it started goes with it, and
// the same command again resumes from the queue (the tasks it left running requeued, none counted
// twice), ending with every workload evaluated once.
TEST(EvalOn, AKilledEvaluationResumesFromItsQueueAndItsLocalServerGoesWithIt) {
  TmpDir d;
  std::vector<std::string> env = proc::current_environment();
  env.push_back("KDA_CACHE_DIR=" + (d.path / "cache").string());
  const std::vector<std::string> argv{KDA_BINARY,
                                      "eval",
                                      (kFixtures / "fast").string(),
                                      "--task",
                                      kRmsnorm.string(),
                                      "--workloads",
                                      "all",
                                      "--on",
                                      "local:cpu:1",
                                      "--trials",
                                      "1",
                                      "--warmup",
                                      "1",
                                      "--iterations",
                                      "5",
                                      "--queue",
                                      (d.path / "q.sqlite").string(),
                                      "--json"};
  auto first = proc::Child::spawn({.argv = argv, .env = env});
  ASSERT_TRUE(first.ok()) << first.status().message();
  // Wait until two tasks are done, then kill -9.
  size_t done = 0;
  for (int i = 0; i < 600 && done < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!stdfs::exists(d.path / "q.sqlite")) continue;
    auto q = TaskQueue::open(d.path / "q.sqlite");
    if (q.ok())
      if (auto c = (*q)->counts(); c.ok()) done = c->done;
  }
  ASSERT_GE(done, 2u);
  std::optional<int> server_pid;
  for (const auto& e : stdfs::recursive_directory_iterator(d.path / "cache"))
    if (e.path().filename() == "address.json") server_pid = json::parse(std::ifstream(e.path()))["pid"].get<int>();
  ASSERT_TRUE(server_pid);
  first->kill_group(SIGKILL);
  first->wait();
  bool server_gone = false;
  for (int i = 0; i < 100 && !server_gone; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    server_gone = ::kill(*server_pid, 0) != 0;
  }
  EXPECT_TRUE(server_gone) << "the local kda serve outlived the kda eval that started it";
  auto again = proc::run({.argv = argv, .env = env, .timeout_seconds = 600});
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->exit.success()) << again->stderr_text;
  auto j = json::parse(again->stdout_text, nullptr, false);
  ASSERT_TRUE(j.is_object()) << again->stdout_text;
  EXPECT_EQ(j["dispatch"]["tasks"], 11);
  EXPECT_EQ(j["dispatch"]["done"], 11);
  EXPECT_GE(j["dispatch"]["already_finished"].get<int>(), 2);  // resumed: those were not run again
  std::set<std::string> uuids;
  for (const auto& t : j["traces"]) uuids.insert(t["workload"]["uuid"].get<std::string>());
  EXPECT_EQ(uuids.size(), 11u);
  EXPECT_EQ(j["all_passed"], true);
}

// A remote server gets tasks only if it judges by the pack the client has: one whose workloads.jsonl
// differs is refused with the file named (and, being the only one, the evaluation stops at once); one
// whose pack lacks the holdout and has other starting solutions judges alike and evaluates.
TEST(EvalOn, AServerThatJudgesAnotherPackGetsNoTasks) {
  TmpDir d;
  std::error_code ec;
  for (const char* name : {"changed", "same"}) stdfs::copy(kRmsnorm, d.path / name, stdfs::copy_options::recursive, ec);
  ASSERT_FALSE(ec) << ec.message();
  {
    std::string text = *fs::read_file(d.path / "changed/workloads.jsonl");
    text.erase(text.rfind('\n', text.size() - 2) + 1);  // the last workload (not a dev one) gone
    ASSERT_TRUE(fs::write_file_atomic(d.path / "changed/workloads.jsonl", text).ok());
  }
  stdfs::remove(d.path / "same/holdout.jsonl");
  ASSERT_TRUE(fs::write_file_atomic(d.path / "same/solutions/tunable/kernel.cc", "// another start\n").ok());
  auto changed = serve(d.path / "a", "cpu:1", d.path / "changed");
  auto same = serve(d.path / "b", "cpu:1", d.path / "same");
  ASSERT_TRUE(changed && same);
  auto eval_on = [&](const std::string& url) {
    std::vector<std::string> env = proc::current_environment();
    env.push_back("KDA_CACHE_DIR=" + (d.path / "cache").string());
    auto r = proc::run({.argv = {KDA_BINARY, "eval", (kFixtures / "fast").string(), "--task", kRmsnorm.string(), "--on",
                                 url, "--json"},
                        .env = env,
                        .timeout_seconds = 300});
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : proc::RunResult{};
  };
  const auto t0 = std::chrono::steady_clock::now();
  auto refused = eval_on(changed->spec().url);
  EXPECT_FALSE(refused.exit.success());
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 60);  // not the 120 s give-up
  EXPECT_NE(
      refused.stderr_text.find(changed->spec().url + " gets no tasks: it judges 'host_rmsnorm_f32' by another pack"),
      std::string::npos)
      << refused.stderr_text;
  EXPECT_NE(refused.stderr_text.find("changed: workloads.jsonl"), std::string::npos) << refused.stderr_text;
  EXPECT_NE(refused.stderr_text.find("no server may take these tasks"), std::string::npos) << refused.stderr_text;
  auto judged = eval_on(same->spec().url);
  EXPECT_TRUE(judged.exit.success()) << judged.stderr_text;
  auto j = json::parse(judged.stdout_text, nullptr, false);
  ASSERT_TRUE(j.is_object()) << judged.stdout_text;
  EXPECT_EQ(j["all_passed"], true);
  // Both at once: the refused one takes nothing, the other everything.
  auto both = eval_on(changed->spec().url + "," + same->spec().url);
  EXPECT_TRUE(both.exit.success()) << both.stderr_text;
  EXPECT_NE(both.stderr_text.find(changed->spec().url + " gets no tasks"), std::string::npos) << both.stderr_text;
}

// kda tune --on local:cpu:2: each rung's configurations are spread over two host workers (both busy at
// once), each measured with the rung's timing; the guard and the final timing go through the pool too,
// and the result is a map and a dispatcher that pass, as one process's tuning gives.
TEST(TuneOn, ConfigurationsSpreadOverTwoHostWorkersGiveAMapAndAPassingDispatcher) {
  TmpDir d;
  std::vector<std::string> env = proc::current_environment();
  env.push_back("KDA_CACHE_DIR=" + (d.path / "cache").string());
  auto r = proc::run({.argv = {KDA_BINARY, "tune", (kRmsnorm / "solutions/tunable").string(), "--task",
                               kRmsnorm.string(), "--out", (d.path / "out").string(), "--on", "local:cpu:2",
                               "--max-configs", "4", "--screen-iterations", "5", "--json"},
                      .env = env,
                      .timeout_seconds = 600});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->exit.success()) << r->stderr_text.substr(r->stderr_text.size() > 4000 ? r->stderr_text.size() - 4000
                                                                                       : 0);
  const json j = json::parse(r->stdout_text, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r->stdout_text;
  EXPECT_GE(j["configs_measured"].get<int>(), 4);
  EXPECT_TRUE(j["dispatcher_passed"].get<bool>());
  EXPECT_GT(j["baseline_geomean_ms"].get<double>(), 0);        // the final timing had the baseline beside it
  EXPECT_EQ(j["dispatcher_vs_best_single"].get<double>(), 0);  // no head-to-head through a pool (said why)
  EXPECT_TRUE(j["guard"].value("ran", false)) << j["guard"].dump();
  EXPECT_TRUE(stdfs::exists(d.path / "out/map.json"));
  EXPECT_TRUE(stdfs::exists(d.path / "out/dispatcher/solution.json"));
  EXPECT_NE(r->stderr_text.find("kda tune: started kda serve"), std::string::npos);
  EXPECT_NE(r->stderr_text.find("2/2 device(s) busy"), std::string::npos) << "the two workers never ran at once";
  EXPECT_NE(r->stderr_text.find("no head-to-head"), std::string::npos);
  // Each rung measured with its own timing: rung 1's measurements took longer per workload than rung 0's
  // would need, and state.json holds both rungs.
  const json state = json::parse(std::ifstream(d.path / "out/state.json"), nullptr, false);
  ASSERT_TRUE(state.is_object());
  std::set<int> rungs;
  for (const auto& m : state["measurements"]) rungs.insert(m["rung"].get<int>());
  EXPECT_TRUE(rungs.count(0));
  // Bad options are refused before anything starts.
  auto bad =
      proc::run({.argv = {KDA_BINARY, "tune", (kRmsnorm / "solutions/tunable").string(), "--task", kRmsnorm.string(),
                          "--out", (d.path / "out2").string(), "--on", "local:cpu:1", "--seed", "7"},
                 .env = env,
                 .timeout_seconds = 60});
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->exit.exit_code, 2) << bad->stderr_text;
  EXPECT_NE(bad->stderr_text.find("--seed cannot go with --on"), std::string::npos) << bad->stderr_text;
}

TEST(Dispatch, NoServerUpGivesUpAndKeepsTheTasks) {
  TmpDir d;
  auto q = open_queue(d.path / "q.sqlite");
  ASSERT_TRUE(q->enqueue("t", json::object()).ok());
  DispatchOptions o;
  o.give_up_after_s = 0.5;
  o.health_interval_s = 0.1;
  Status st = dispatch(*q, {{.url = "http://127.0.0.1:9"}}, o);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("no server was up"), std::string::npos) << st.message();
  EXPECT_EQ(q->counts()->queued, 1u);
}

}  // namespace
}  // namespace kda::exec
