// kda serve: the FlashInfer-Bench server API on the host backend, driven by a plain HTTP client.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "proc/subprocess.h"
#include "serve/dataset.h"
#include "serve/server.h"
#include "serve/tasks.h"
#include "serve/worker.h"
#include "task/solution.h"
#include "util/fs.h"

namespace kda::serve {
namespace {

namespace stdfs = std::filesystem;
using nlohmann::json;

const stdfs::path kSource = KDA_SOURCE_DIR;
const stdfs::path kRmsnorm = kSource / "tasks/host/rmsnorm";
const stdfs::path kFixtures = kSource / "tests/fixtures/solutions/host_rmsnorm";

json solution_json(const stdfs::path& dir) {
  auto s = task::load_solution(dir);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? s->to_json() : json();
}

// A server on a free loopback port, serving in a thread of its own.
class Running {
 public:
  explicit Running(ServeOptions o, const stdfs::path& local = kRmsnorm) : work_(tmp_dir()) {
    o.host = "127.0.0.1";
    o.port = 0;
    o.eval.kda_binary = KDA_BINARY;
    o.eval.work_dir = work_ / "work";
    o.eval.warmup = 1, o.eval.iterations = 5, o.eval.trials = 1;
    if (o.devices.empty()) o.devices = *parse_devices("cpu:2");
    auto data = load_dataset(local);
    EXPECT_TRUE(data.ok()) << data.status().message();
    auto s = Server::create(std::move(o), std::move(*data));
    EXPECT_TRUE(s.ok()) << s.status().message();
    server_ = std::move(*s);
    thread_ = std::thread([this] { status_ = server_->run(); });
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    client_->set_read_timeout(120, 0);
  }
  ~Running() {
    server_->stop();
    thread_.join();
    std::error_code ec;
    stdfs::remove_all(work_, ec);
  }
  httplib::Client& http() { return *client_; }
  Server& server() { return *server_; }
  void join() { thread_.join(); }
  const stdfs::path& work() const { return work_; }

  // POST `body` to /evaluate; the response's status and JSON.
  std::pair<int, json> post(const std::string& path, const std::string& body) {
    auto r = client_->Post(path, body, "application/json");
    if (!r) return {0, json()};
    return {r->status, json::parse(r->body, nullptr, false)};
  }
  std::pair<int, json> get(const std::string& path) {
    auto r = client_->Get(path);
    if (!r) return {0, json()};
    return {r->status, json::parse(r->body, nullptr, false)};
  }
  // Submits and long-polls until the task finishes.
  json evaluate(const json& request) {
    auto [code, body] = post("/evaluate", request.dump());
    EXPECT_EQ(code, 200) << body.dump();
    auto [c2, task] = get("/tasks/" + body.value("task_id", "") + "?timeout=120");
    EXPECT_EQ(c2, 200) << task.dump();
    return task;
  }

 private:
  static stdfs::path tmp_dir() {
    auto d = fs::make_temp_dir(stdfs::temp_directory_path(), "kda-serve-test");
    return d.ok() ? *d : stdfs::path("/tmp");
  }
  stdfs::path work_;
  std::unique_ptr<Server> server_;
  std::thread thread_;
  Status status_;
  std::unique_ptr<httplib::Client> client_;
};

TEST(ServeDevices, NamesGpusAndHostWorkers) {
  auto d = parse_devices("cuda:0,cuda:3");
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->size(), 2u);
  EXPECT_TRUE((*d)[1].cuda);
  EXPECT_EQ((*d)[1].index, 3);
  auto c = parse_devices("cpu:3");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->size(), 3u);
  EXPECT_EQ((*c)[2].name, "cpu:2");
  EXPECT_EQ(parse_devices("cpu")->size(), 1u);
  for (const char* bad : {"gpu0", "cuda:", "cuda:x", "cpu:0", "cuda:0,cuda:0", "cpu,cpu:2", ""})
    EXPECT_FALSE(parse_devices(bad).ok()) << bad;
}

TEST(ServeDataset, PacksListVisibleWorkloadsOnly) {
  auto d = load_dataset(kSource / "tasks/host");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->kind, "packs");
  EXPECT_EQ(d->entries.size(), 3u);
  const Entry* e = d->find("host_rmsnorm_f32");
  ASSERT_NE(e, nullptr);
  EXPECT_FALSE(e->holdout.empty());
  for (const auto& h : e->holdout) {
    EXPECT_FALSE(e->has_visible(h));
    EXPECT_EQ(d->find_workload(h).second, nullptr);
  }
  EXPECT_EQ(d->id.size(), 64u);
  auto again = load_dataset(kSource / "tasks/host");
  EXPECT_EQ(again->id, d->id);
  EXPECT_NE(load_dataset(kRmsnorm)->id, d->id);
  EXPECT_EQ(load_dataset("/nonexistent/kda").status().kind(), ErrorKind::kNotFound);
  EXPECT_EQ(load_dataset(kSource / "docs").status().kind(), ErrorKind::kNotFound);
}

TEST(ServeTasks, IdempotentIdsConflictsAndDrain) {
  TaskStore store;
  Task t{.id = "a", .digest = "x", .definition = "d", .solution = "s"};
  EXPECT_EQ(store.submit(t), TaskStore::Submitted::kCreated);
  EXPECT_EQ(store.submit(t), TaskStore::Submitted::kSame);
  Task other = t;
  other.digest = "y";
  EXPECT_EQ(store.submit(other), TaskStore::Submitted::kConflict);
  EXPECT_EQ(store.counts().queued, 1u);
  auto running = store.next("cpu:0");
  ASSERT_TRUE(running);
  EXPECT_EQ(store.response("a", std::chrono::seconds(0))->at("status"), "running");
  store.complete("a", json::array());
  store.fail("a", "late");  // a finished task stays as it finished
  EXPECT_EQ(store.response("a", std::chrono::seconds(0))->at("status"), "completed");
  store.drain();
  Task b{.id = "b", .digest = "z"};
  EXPECT_EQ(store.submit(b), TaskStore::Submitted::kClosed);
  EXPECT_EQ(store.submit(t), TaskStore::Submitted::kSame);  // a retry of a known task still answers
  EXPECT_FALSE(store.response("nope", std::chrono::seconds(0)));
}

TEST(ServeTasks, CloseFailsQueuedTasksAndWakesWorkers) {
  TaskStore store;
  store.submit(Task{.id = "q", .digest = "1"});
  std::thread waiter([&] {
    auto r = store.response("q", std::chrono::seconds(30));
    EXPECT_EQ(r->at("status"), "failed");
  });
  store.close();
  waiter.join();
  EXPECT_FALSE(store.next("cpu:0"));
}

// FlashInfer-Bench's "minimal runnable example": a Python solution with a syntax error completes
// with COMPILE_ERROR; a good solution PASSES.
TEST(ServeApi, TheMinimalExampleAndAGoodSolution) {
  Running s({});
  auto [hc, health] = s.get("/health");
  ASSERT_EQ(hc, 200);
  EXPECT_EQ(health["status"], "ok");
  EXPECT_EQ(health["total_workers"], 2);
  EXPECT_EQ(health["auth"], "none");
  EXPECT_EQ(health["instance_id"], s.server().instance_id());
  auto [dc, defs] = s.get("/definitions");
  ASSERT_EQ(dc, 200);
  ASSERT_EQ(defs.size(), 1u);
  const std::string name = defs[0]["name"];
  auto [wc, workloads] = s.get("/definitions/" + name + "/workloads");
  ASSERT_EQ(wc, 200);
  ASSERT_FALSE(workloads.empty());
  const std::string uuid = workloads[0]["uuid"];
  EXPECT_EQ(s.get("/workloads/" + uuid).first, 200);
  EXPECT_EQ(s.get("/definitions/" + name).second["name"], name);

  json bad = {{"solution",
               {{"name", "docs_compile_error"},
                {"definition", name},
                {"author", "docs"},
                {"spec",
                 {{"language", "python"},
                  {"target_hardware", {"cuda"}},
                  {"entry_point", "pkg/main.py::kernel"},
                  {"destination_passing_style", false}}},
                {"sources", {{{"path", "pkg/main.py"}, {"content", "def kernel(\n    return 0\n"}}}}}},
              {"workload_uuids", {uuid}}};
  json task = s.evaluate(bad);
  EXPECT_EQ(task["status"], "completed") << task.dump();
  ASSERT_EQ(task["traces"].size(), 1u);
  EXPECT_EQ(task["traces"][0]["evaluation"]["status"], "COMPILE_ERROR");
  EXPECT_TRUE(task["solution"].get<std::string>().starts_with("docs_compile_error_"));

  json good = {{"solution", solution_json(kFixtures / "fast")}, {"workload_uuids", {uuid, workloads[1]["uuid"]}}};
  task = s.evaluate(good);
  ASSERT_EQ(task["status"], "completed") << task.dump();
  ASSERT_EQ(task["traces"].size(), 2u);
  for (const auto& t : task["traces"]) {
    EXPECT_EQ(t["evaluation"]["status"], "PASSED") << t.dump();
    EXPECT_GT(t["evaluation"]["performance"]["latency_ms"].get<double>(), 0);
  }
  // The task's files are gone once it finished.
  EXPECT_FALSE(stdfs::exists(s.work() / "work" / task["task_id"].get<std::string>()));
}

// The same verdicts as `kda eval` in one process, workload by workload.
TEST(ServeApi, VerdictsEqualKdaEval) {
  Running s({});
  auto [wc, workloads] = s.get("/definitions/host_rmsnorm_f32/workloads");
  ASSERT_EQ(wc, 200);
  std::vector<std::string> uuids;
  for (size_t i = 0; i < 3 && i < workloads.size(); ++i) uuids.push_back(workloads[i]["uuid"]);
  for (const char* which : {"fast", "wrong"}) {
    json task = s.evaluate({{"solution", solution_json(kFixtures / which)}, {"workload_uuids", uuids}});
    ASSERT_EQ(task["status"], "completed") << task.dump();
    const stdfs::path traces = s.work() / (std::string(which) + ".jsonl");
    auto r = proc::run({.argv = {KDA_BINARY, "eval", (kFixtures / which).string(), "--task", kRmsnorm.string(),
                                 "--workloads", uuids[0] + "," + uuids[1] + "," + uuids[2], "--iterations", "5",
                                 "--trials", "1", "--warmup", "1", "--quiet", "--traces", traces.string()},
                        .timeout_seconds = 120});
    ASSERT_TRUE(r.ok());
    auto text = fs::read_file(traces);
    ASSERT_TRUE(text.ok()) << r->stderr_text;
    std::vector<std::string> direct;
    size_t pos = 0;
    for (size_t nl; (nl = text->find('\n', pos)) != std::string::npos; pos = nl + 1)
      direct.push_back(json::parse(text->substr(pos, nl - pos))["evaluation"]["status"]);
    ASSERT_EQ(direct.size(), uuids.size());
    for (size_t i = 0; i < uuids.size(); ++i) {
      EXPECT_EQ(task["traces"][i]["workload"]["uuid"], uuids[i]);
      EXPECT_EQ(task["traces"][i]["evaluation"]["status"], direct[i]) << which << " " << uuids[i];
    }
  }
}

TEST(ServeApi, IdempotentTaskIdsAndDrain) {
  Running s({});
  auto [wc, workloads] = s.get("/definitions/host_rmsnorm_f32/workloads");
  json req = {{"solution", solution_json(kFixtures / "fast")},
              {"workload_uuids", {workloads[0]["uuid"]}},
              {"task_id", "retry-1"}};
  auto [c1, r1] = s.post("/evaluate", req.dump());
  ASSERT_EQ(c1, 200) << r1.dump();
  EXPECT_EQ(r1["task_id"], "retry-1");
  auto [c2, r2] = s.post("/evaluate", req.dump());
  EXPECT_EQ(c2, 200);
  EXPECT_EQ(r2, r1);
  json changed = req;
  changed["workload_uuids"] = {workloads[1]["uuid"]};
  auto [c3, r3] = s.post("/evaluate", changed.dump());
  EXPECT_EQ(c3, 409) << r3.dump();
  EXPECT_NE(r3["detail"].get<std::string>().find("retry-1"), std::string::npos);

  auto [bc, batch] = s.post("/tasks/batch", json{{"task_ids", {"retry-1", "retry-1"}}, {"timeout", 120}}.dump());
  ASSERT_EQ(bc, 200) << batch.dump();
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(batch[0]["status"], "completed");
  EXPECT_EQ(s.post("/tasks/batch", json{{"task_ids", {"retry-1", "nope"}}}.dump()).first, 404);

  auto [dc, drain] = s.post("/drain", "");
  EXPECT_EQ(dc, 200);
  EXPECT_EQ(drain["status"], "draining");
  json fresh = req;
  fresh["task_id"] = "after-drain";
  EXPECT_EQ(s.post("/evaluate", fresh.dump()).first, 503);
  EXPECT_EQ(s.get("/health").second["accepting"], false);
  EXPECT_EQ(s.get("/health").second["status"], "draining");
}

TEST(ServeApi, BadInputIsAClearFourHundredAndTheServerGoesOn) {
  ServeOptions o;
  o.max_body_bytes = 64 << 10;
  Running s(std::move(o));
  auto expect = [&](int code, const std::string& path, const std::string& body, const std::string& says) {
    auto [c, r] = s.post(path, body);
    EXPECT_EQ(c, code) << body.substr(0, 200) << " -> " << r.dump();
    if (!r.is_discarded()) {
      EXPECT_NE(r.value("detail", "").find(says), std::string::npos) << r.dump();
    }
  };
  expect(400, "/evaluate", "{not json", "not JSON");
  expect(400, "/evaluate", "[]", "object");
  expect(400, "/evaluate", "{}", "solution");
  json sol = solution_json(kFixtures / "fast");
  json unknown = sol;
  unknown["definition"] = "no_such_kernel";
  expect(400, "/evaluate", json{{"solution", unknown}}.dump(), "no_such_kernel");
  json escape = sol;
  escape["sources"][0]["path"] = "../../escape.cc";
  expect(400, "/evaluate", json{{"solution", escape}}.dump(), "sources");
  json absolute = sol;
  absolute["sources"][0]["path"] = "/tmp/escape.cc";
  expect(400, "/evaluate", json{{"solution", absolute}}.dump(), "sources");
  expect(400, "/evaluate", json{{"solution", sol}, {"task_id", "../up"}}.dump(), "task_id");
  expect(413, "/evaluate", json{{"solution", sol}, {"pad", std::string(100 << 10, 'x')}}.dump(), "limit");
  EXPECT_EQ(s.get("/tasks/nope").first, 404);
  EXPECT_EQ(s.get("/tasks/nope?timeout=5000").first, 422);
  EXPECT_EQ(s.get("/definitions/nope").first, 404);
  EXPECT_EQ(s.get("/no/such/endpoint").first, 404);
  // An unknown workload: the task is created and fails, saying which.
  json task = s.evaluate({{"solution", sol}, {"workload_uuids", {"not-a-workload"}}});
  EXPECT_EQ(task["status"], "failed");
  EXPECT_NE(task["error"].get<std::string>().find("not-a-workload"), std::string::npos);
  // A holdout uuid is unknown unless the operator allows holdout evaluation.
  auto data = load_dataset(kRmsnorm);
  const std::string holdout = *data->find("host_rmsnorm_f32")->holdout.begin();
  EXPECT_EQ(s.get("/workloads/" + holdout).first, 404);
  task = s.evaluate({{"solution", sol}, {"workload_uuids", {holdout}}});
  EXPECT_EQ(task["status"], "failed");
  EXPECT_EQ(s.get("/health").first, 200);
}

// kda's extension kda_timing: a request's own trials, warmup and iterations over the server's, the
// baseline left out on request; part of the request (another timing under one task id is a conflict);
// out-of-range or mistyped values are a 400 naming the field.
TEST(ServeApi, ARequestsKdaTimingIsItsOwn) {
  Running s({});
  auto [wc, workloads] = s.get("/definitions/host_rmsnorm_f32/workloads");
  const json sol = solution_json(kFixtures / "fast");
  json req = {{"solution", sol},
              {"workload_uuids", {workloads[0]["uuid"]}},
              {"task_id", "timed-1"},
              {"kda_timing", {{"trials", 2}, {"warmup", 0}, {"iterations", 3}, {"baseline", false}}}};
  json task = s.evaluate(req);
  ASSERT_EQ(task["status"], "completed") << task.dump();
  const json& ev = task["traces"][0]["evaluation"];
  EXPECT_EQ(ev["status"], "PASSED");
  // 2 trials, not the server's 1; on the host a call this short (under 5 us) gets 8, each in its own
  // runner processes, and says so (docs/evaluator.md).
  const size_t trials = ev["kda"].contains("added_trials") ? ev["kda"]["added_trials"]["trials"].get<size_t>() : 2u;
  EXPECT_GE(trials, 2u);
  EXPECT_EQ(ev["kda"]["candidate"]["trials_ms"].size(), trials) << ev["kda"].dump();
  EXPECT_FALSE(ev["kda"].contains("baseline")) << "baseline: false leaves the baseline out";
  json other = req;
  other["kda_timing"]["trials"] = 3;
  EXPECT_EQ(s.post("/evaluate", other.dump()).first, 409);
  for (const auto& [timing, says] :
       std::vector<std::pair<json, std::string>>{{{{"trials", 0}}, "kda_timing.trials: 0 is not in 1..100000"},
                                                 {{{"iterations", 1000001}}, "kda_timing.iterations"},
                                                 {{{"warmup", "two"}}, "warmup"},
                                                 {json::array(), "kda_timing"}}) {
    auto [c, r] = s.post("/evaluate", json{{"solution", sol}, {"kda_timing", timing}}.dump());
    EXPECT_EQ(c, 400) << timing.dump();
    EXPECT_NE(r.value("detail", "").find(says), std::string::npos) << r.dump();
  }
}

TEST(ServeWorker, EvalArgvTakesTheRequestsTimingBeforeTheServers) {
  EvalSettings settings;
  settings.kda_binary = "kda";
  settings.trials = 1;
  settings.iterations = 5;
  Entry entry;
  entry.pack_dir = kRmsnorm;
  Task task;
  task.timing.trials = 4;
  task.timing.baseline = false;
  const auto argv = eval_argv(settings, entry, task, "/w");
  auto after = [&](const std::string& flag) {
    auto it = std::find(argv.begin(), argv.end(), flag);
    return it == argv.end() || it + 1 == argv.end() ? std::string("-") : *(it + 1);
  };
  EXPECT_EQ(after("--trials"), "4");
  EXPECT_EQ(after("--iterations"), "5");
  EXPECT_EQ(after("--warmup"), "-");
  EXPECT_NE(std::find(argv.begin(), argv.end(), "--no-baseline"), argv.end());
}

TEST(ServeApi, HoldoutOnlyWhenTheOperatorAllowsIt) {
  ServeOptions o;
  o.eval.allow_holdout = true;
  Running s(std::move(o));
  auto data = load_dataset(kRmsnorm);
  const std::string holdout = *data->find("host_rmsnorm_f32")->holdout.begin();
  EXPECT_EQ(s.get("/workloads/" + holdout).first, 404);  // still never returned
  json task = s.evaluate({{"solution", solution_json(kFixtures / "fast")}, {"workload_uuids", {holdout}}});
  ASSERT_EQ(task["status"], "completed") << task.dump();
  EXPECT_EQ(task["traces"][0]["evaluation"]["status"], "PASSED");
}

TEST(ServeApi, ATokenGuardsEverythingButHealth) {
  auto dir = fs::make_temp_dir(stdfs::temp_directory_path(), "kda-serve-token");
  ServeOptions o;
  o.token_file = *dir / "token";
  Running s(std::move(o));
  auto token = fs::read_file(*dir / "token");
  ASSERT_TRUE(token.ok());
  EXPECT_EQ(stdfs::status(*dir / "token").permissions() & stdfs::perms::others_read, stdfs::perms::none);
  EXPECT_EQ(s.get("/health").first, 200);
  EXPECT_EQ(s.get("/health").second["auth"], "bearer");
  EXPECT_EQ(s.get("/definitions").first, 401);
  s.http().set_bearer_token_auth("wrong-token-of-some-length");
  EXPECT_EQ(s.get("/definitions").first, 401);
  s.http().set_bearer_token_auth(token->substr(0, token->size() - 1));
  EXPECT_EQ(s.get("/definitions").first, 200);
  stdfs::remove_all(*dir);
}

TEST(ServeApi, OffLoopbackNeedsATokenOrNoAuth) {
  auto data = load_dataset(kRmsnorm);
  ServeOptions o;
  o.host = "0.0.0.0";
  o.port = 0;
  o.devices = *parse_devices("cpu");
  o.eval.work_dir = stdfs::temp_directory_path() / "kda-serve-offloop";
  auto s = Server::create(o, *data);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().kind(), ErrorKind::kBadInput);
  EXPECT_NE(s.status().message().find("--token-file"), std::string::npos);
  EXPECT_TRUE(is_loopback("127.0.0.1"));
  EXPECT_FALSE(is_loopback("10.0.0.1"));
}

TEST(ServeApi, AnEvaluationPastTheTimeoutIsKilledAndReportedTimeout) {
  ServeOptions o;
  o.eval.timeout_s = 3;
  o.devices = *parse_devices("cpu");
  Running s(std::move(o));
  auto [wc, workloads] = s.get("/definitions/host_rmsnorm_f32/workloads");
  const auto t0 = std::chrono::steady_clock::now();
  json task = s.evaluate({{"solution", solution_json(kFixtures / "hang")}, {"workload_uuids", {workloads[0]["uuid"]}}});
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(task["status"], "completed") << task.dump();
  EXPECT_EQ(task["traces"][0]["evaluation"]["status"], "TIMEOUT");
  EXPECT_LT(took, 20);
}

TEST(ServeApi, ShutdownEndsRun) {
  auto data = load_dataset(kRmsnorm);
  ServeOptions o;
  o.port = 0;
  o.devices = *parse_devices("cpu");
  o.eval.kda_binary = KDA_BINARY;
  o.eval.work_dir = stdfs::temp_directory_path() / "kda-serve-shutdown";
  auto s = Server::create(o, *data);
  ASSERT_TRUE(s.ok());
  Status st = Status::internal("not run");
  std::thread t([&] { st = (*s)->run(); });
  httplib::Client c("127.0.0.1", (*s)->port());
  auto r = c.Post("/shutdown");
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body)["status"], "shutting_down");
  t.join();
  EXPECT_TRUE(st.ok()) << st.message();
}

}  // namespace
}  // namespace kda::serve
