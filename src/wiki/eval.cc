#include "wiki/eval.h"

#include <algorithm>
#include <chrono>
#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace kda::wiki {

Result<std::vector<EvalQuery>> parse_eval_queries(const std::string& text, const std::string& origin, int k) {
  using nlohmann::json;
  std::vector<EvalQuery> out;
  size_t pos = 0;
  int line_no = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::string where = fmt::format("{}:{}", origin, line_no);
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return Status::bad_input(where + ": not a JSON object");
    if (!j.contains("query") || !j["query"].is_string())
      return Status::bad_input(where + ": /query: missing or not a string");
    if (!j.contains("expect") || !j["expect"].is_array() || j["expect"].empty())
      return Status::bad_input(where + ": /expect: missing or not a non-empty array");
    EvalQuery q;
    q.request.query = j["query"].get<std::string>();
    q.k = k;
    q.request.limit = std::max(k, 10);
    if (j.contains("kind")) {
      if (!j["kind"].is_string()) return Status::bad_input(where + ": /kind: not a string");
      q.kind = j["kind"].get<std::string>();
    }
    for (const auto& e : j["expect"]) {
      if (!e.is_string()) return Status::bad_input(where + ": /expect: items must be strings");
      q.expect.push_back(e.get<std::string>());
    }
    if (j.contains("filters")) {
      const json& f = j["filters"];
      if (!f.is_object()) return Status::bad_input(where + ": /filters: not an object");
      auto get = [&](const char* key) {
        return f.contains(key) && f[key].is_string() ? f[key].get<std::string>() : "";
      };
      q.request.filters = {get("arch"), get("op"), get("technique"), get("kind"), get("repo"), get("language")};
    }
    out.push_back(std::move(q));
  }
  if (out.empty()) return Status::bad_input(origin + ": no queries");
  return out;
}

bool hit_matches(const SearchHit& h, const std::string& e) {
  if (h.id == e || h.id.starts_with(e + "#")) return true;
  auto ends = [&](const std::string& s) {
    return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0 &&
           (s.size() == e.size() || s[s.size() - e.size() - 1] == '/');
  };
  return ends(h.repo + "/" + h.path) || ends(h.path);
}

namespace {

double cpu_ms_now() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5))];
}

}  // namespace

Result<EvalResult> evaluate(Index& index, const std::vector<EvalQuery>& queries, int repeat) {
  EvalResult r;
  std::vector<double> lat, cpu;
  for (const auto& q : queries) {
    std::vector<SearchHit> res;
    std::vector<double> qlat, qcpu;
    for (int i = 0; i < std::max(1, repeat); ++i) {
      double c0 = cpu_ms_now();
      auto t0 = std::chrono::steady_clock::now();
      auto got = index.search(q.request);
      qlat.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      qcpu.push_back(cpu_ms_now() - c0);
      if (!got.ok()) return got.status().with_context("query '" + q.request.query + "'");
      res = std::move(*got);
    }
    lat.insert(lat.end(), qlat.begin(), qlat.end());
    cpu.insert(cpu.end(), qcpu.begin(), qcpu.end());
    EvalResult::PerQuery pq;
    pq.query = q.request.query;
    pq.ms = percentile(qlat, 0.5);
    pq.cpu_ms = percentile(qcpu, 0.5);
    for (size_t i = 0; i < res.size() && !pq.rank; ++i)
      for (const auto& e : q.expect)
        if (hit_matches(res[i], e)) pq.rank = static_cast<int>(i) + 1;
    for (size_t i = 0; i < res.size() && static_cast<int>(i) < q.k; ++i) pq.top.push_back(res[i].id);
    if (pq.rank && pq.rank <= q.k) ++r.hits;
    for (RankStats* st : {&r.all, &r.by_kind[q.kind]}) {
      ++st->n;
      st->hit1 += pq.rank == 1;
      st->hit5 += pq.rank >= 1 && pq.rank <= 5;
      st->hit10 += pq.rank >= 1 && pq.rank <= 10;
      st->mrr += pq.rank >= 1 && pq.rank <= 10 ? 1.0 / pq.rank : 0.0;
    }
    r.per_query.push_back(std::move(pq));
  }
  auto norm = [](RankStats& x) {
    if (x.n == 0) return;
    const double n = x.n;
    x.hit1 /= n, x.hit5 /= n, x.hit10 /= n, x.mrr /= n;
  };
  norm(r.all);
  for (auto& [kind, ks] : r.by_kind) norm(ks);
  r.hit_rate = queries.empty() ? 0 : static_cast<double>(r.hits) / static_cast<double>(queries.size());
  r.p50_ms = percentile(lat, 0.5);
  r.p95_ms = percentile(lat, 0.95);
  r.max_ms = percentile(lat, 1.0);
  r.cpu_p50_ms = percentile(cpu, 0.5);
  r.cpu_p95_ms = percentile(cpu, 0.95);
  r.samples = lat.size();
  return r;
}

}  // namespace kda::wiki
