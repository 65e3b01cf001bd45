// verify.json and verdict.json through one serialiser each (round_record.h).
#include "loop/round_record.h"

#include "util/fs.h"

namespace kda::loop {

using json = nlohmann::json;

namespace {

json interval_json(const eval::Interval& i) { return json::array({i.low, i.high}); }

std::optional<eval::Interval> interval_from(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_array() || it->size() != 2 || !(*it)[0].is_number() || !(*it)[1].is_number())
    return std::nullopt;
  return eval::Interval{(*it)[0].get<double>(), (*it)[1].get<double>()};
}

std::optional<double> number_from(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::vector<std::string> strings_from(const json& j, const char* key) {
  std::vector<std::string> out;
  for (const auto& s : j.value(key, json::array()))
    if (s.is_string()) out.push_back(s.get<std::string>());
  return out;
}

json claim_json(const ClaimRecord& c) {
  json j = {{"metric", c.metric},
            {"claimed", c.claimed},
            {"workload", c.workload},
            {"status", c.status},
            {"detail", c.detail}};
  if (c.measured) j["measured"] = *c.measured;
  if (c.remeasured) j["remeasured"] = *c.remeasured;
  if (c.accepted_range) j["accepted_range"] = interval_json(*c.accepted_range);
  if (c.measured_ci95) j["measured_ci95"] = interval_json(*c.measured_ci95);
  if (c.conservative) j["conservative"] = true;
  return j;
}

ClaimRecord claim_from(const json& j) {
  ClaimRecord c;
  c.metric = j.value("metric", "");
  c.claimed = j.value("claimed", 0.0);
  c.workload = j.value("workload", "");
  c.status = j.value("status", "");
  c.detail = j.value("detail", "");
  c.measured = number_from(j, "measured");
  c.remeasured = number_from(j, "remeasured");
  c.accepted_range = interval_from(j, "accepted_range");
  c.measured_ci95 = interval_from(j, "measured_ci95");
  c.conservative = j.value("conservative", false);
  return c;
}

json lane_json(const LaneRecord& l) {
  return {{"lane", l.lane},
          {"commit", l.commit},
          {"verified", l.verified},
          {"improvement", l.improvement},
          {"improvement_detail", l.improvement_detail},
          {"geomean", l.geomean},
          {"rejections", l.rejections},
          {"summary", l.summary},
          {"chosen", l.chosen}};
}

LaneRecord lane_from(const json& j) {
  LaneRecord l;
  l.lane = j.value("lane", 0);
  l.commit = j.value("commit", "");
  l.verified = j.value("verified", false);
  l.improvement = j.value("improvement", false);
  l.improvement_detail = j.value("improvement_detail", "");
  l.geomean = j.value("geomean", 0.0);
  l.rejections = strings_from(j, "rejections");
  l.summary = j.value("summary", "");
  l.chosen = j.value("chosen", false);
  return l;
}

Result<json> read_object(const std::filesystem::path& file) {
  KDA_ASSIGN_OR_RETURN(std::string text, fs::read_file(file));
  json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return Status::bad_input(file.string() + ": not a JSON object");
  return j;
}

}  // namespace

void VerifyRecord::add_check(const std::string& name, bool passed, const std::string& detail) {
  checks.push_back({name, passed, detail});
  if (!passed) rejections.push_back(name + ": " + detail);
}

bool VerifyRecord::finished() const {
  for (const auto& c : checks)
    if (c.name == "finish_round") return c.passed;
  return false;
}

bool VerifyRecord::all_passed() const { return eval.is_object() && eval.value("all_passed", false); }

const VerifyCheck* VerifyRecord::first_failed() const {
  for (const auto& c : checks)
    if (!c.passed) return &c;
  return nullptr;
}

json VerifyRecord::to_json() const {
  json cj = json::array();
  for (const auto& c : checks) cj.push_back({{"name", c.name}, {"passed", c.passed}, {"detail", c.detail}});
  // A protected file changed: the round stopped the run before anything was measured.
  if (violation) return {{"checks", cj}, {"verified", false}, {"violation", *violation}};
  json claims_json = json::array();
  for (const auto& c : claims) claims_json.push_back(claim_json(c));
  json j = {{"checks", cj},
            {"claims", claims_json},
            {"verified", verified},
            {"improvement", improvement},
            {"improvement_detail", improvement_detail},
            {"incumbent_speedup", incumbent_speedup},
            {"geomean", geomean},
            {"eval", eval},
            {"rejections", rejections},
            {"profiles", profiles}};
  if (geomean_ci95) j["geomean_ci95"] = interval_json(*geomean_ci95);
  if (incumbent_ci95) j["incumbent_ci95"] = interval_json(*incumbent_ci95);
  if (head_to_head.is_object()) j["head_to_head"] = head_to_head;
  if (repair.is_object()) j["repair"] = repair;
  if (lane > 0) {
    j["lane"] = lane;
    j["lanes"] = json::array();
    for (const auto& l : lanes) j["lanes"].push_back(lane_json(l));
  }
  return j;
}

Result<VerifyRecord> VerifyRecord::from_json(const json& j) {
  if (!j.is_object()) return Status::bad_input("verify.json: not a JSON object");
  VerifyRecord r;
  for (const auto& c : j.value("checks", json::array()))
    if (c.is_object()) r.checks.push_back({c.value("name", ""), c.value("passed", false), c.value("detail", "")});
  for (const auto& c : j.value("claims", json::array()))
    if (c.is_object()) r.claims.push_back(claim_from(c));
  r.verified = j.value("verified", false);
  r.improvement = j.value("improvement", false);
  r.improvement_detail = j.value("improvement_detail", "");
  r.incumbent_speedup = j.value("incumbent_speedup", 0.0);
  r.geomean = j.value("geomean", 0.0);
  r.eval = j.value("eval", json());
  r.rejections = strings_from(j, "rejections");
  r.profiles = j.value("profiles", json());
  r.geomean_ci95 = interval_from(j, "geomean_ci95");
  r.incumbent_ci95 = interval_from(j, "incumbent_ci95");
  r.head_to_head = j.value("head_to_head", json());
  r.repair = j.value("repair", json());
  if (const auto it = j.find("violation"); it != j.end())
    r.violation = it->is_string() ? it->get<std::string>() : it->dump();
  r.lane = j.value("lane", 0);
  for (const auto& l : j.value("lanes", json::array()))
    if (l.is_object()) r.lanes.push_back(lane_from(l));
  return r;
}

Result<VerifyRecord> VerifyRecord::read(const std::filesystem::path& file) {
  KDA_ASSIGN_OR_RETURN(json j, read_object(file));
  return from_json(j);
}

json VerdictRecord::to_json() const {
  return {{"decision", decision_name(decision)},
          {"progress", progress_name(progress)},
          {"well_formed", well_formed},
          {"complaint", complaint},
          {"alignment", alignment}};
}

Result<VerdictRecord> VerdictRecord::from_json(const json& j) {
  if (!j.is_object()) return Status::bad_input("verdict.json: not a JSON object");
  VerdictRecord v;
  v.decision = decision_from_name(j.value("decision", "")).value_or(Decision::kContinue);
  v.progress = progress_from_name(j.value("progress", "")).value_or(Progress::kStalled);
  v.well_formed = j.value("well_formed", false);
  v.complaint = j.value("complaint", "");
  v.alignment = j.value("alignment", false);
  return v;
}

Result<VerdictRecord> VerdictRecord::read(const std::filesystem::path& file) {
  KDA_ASSIGN_OR_RETURN(json j, read_object(file));
  return from_json(j);
}

}  // namespace kda::loop
