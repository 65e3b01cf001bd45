#include "fakellm/scenario.h"

#include <set>

namespace kda::fakellm {
namespace {

using nlohmann::json;

Status bad(const std::string& pointer, const std::string& message) {
  return Status::bad_input("scenarios " + (pointer.empty() ? std::string("/") : pointer) + ": " + message);
}

Result<Fault> parse_fault(const json& j, const std::string& at) {
  if (!j.is_object()) return bad(at, "a fault must be an object");
  Fault f;
  int kinds = 0;
  if (j.contains("status")) {
    const json& s = j["status"];
    if (!s.is_number_integer() || s.get<int>() < 100 || s.get<int>() > 599)
      return bad(at + "/status", "must be an HTTP status (100..599)");
    f.kind = Fault::Kind::kStatus;
    f.status = s.get<int>();
    ++kinds;
  }
  if (j.contains("cut")) {
    const json& c = j["cut"];
    if (c.is_boolean()) {
      if (!c.get<bool>()) return bad(at + "/cut", "false is not a fault; remove it");
      f.cut = "after_start";
    } else if (c.is_string() && (c == "after_start" || c == "before_response")) {
      f.cut = c.get<std::string>();
    } else {
      return bad(at + "/cut", "must be true, \"after_start\" or \"before_response\"");
    }
    f.kind = Fault::Kind::kCut;
    ++kinds;
  }
  if (j.contains("malformed")) {
    if (j["malformed"] != true) return bad(at + "/malformed", "must be true");
    f.kind = Fault::Kind::kMalformed;
    ++kinds;
  }
  if (j.contains("delay_ms")) {
    const json& d = j["delay_ms"];
    if (!d.is_number_integer() || d.get<int>() < 0 || d.get<int>() > 600000)
      return bad(at + "/delay_ms", "must be an integer in 0..600000");
    f.kind = Fault::Kind::kDelay;
    f.delay_ms = d.get<int>();
    f.times = -1;
    ++kinds;
  }
  if (kinds != 1) return bad(at, "a fault needs exactly one of status, cut, malformed, delay_ms");
  if (j.contains("retry_after")) {
    if (f.kind != Fault::Kind::kStatus) return bad(at + "/retry_after", "only with status");
    const json& r = j["retry_after"];
    if (!r.is_number_integer() || r.get<int>() < 0) return bad(at + "/retry_after", "must be a non-negative integer");
    f.retry_after = r.get<int>();
  }
  if (j.contains("times")) {
    const json& t = j["times"];
    if (t == "always") {
      f.times = -1;
    } else if (t.is_number_integer() && t.get<int>() >= 1) {
      f.times = t.get<int>();
    } else {
      return bad(at + "/times", "must be a positive integer or \"always\"");
    }
  }
  for (const auto& [key, value] : j.items()) {
    static const std::set<std::string> kKnown = {"status", "cut", "malformed", "delay_ms", "retry_after", "times"};
    if (!kKnown.count(key)) return bad(at + "/" + key, "unknown fault field");
  }
  return f;
}

Result<std::vector<Fault>> parse_faults(const json& parent, const std::string& at) {
  std::vector<Fault> out;
  if (parent.contains("faults")) {
    const json& list = parent["faults"];
    if (!list.is_array()) return bad(at + "/faults", "must be a list of faults");
    for (size_t i = 0; i < list.size(); ++i) {
      KDA_ASSIGN_OR_RETURN(Fault f, parse_fault(list[i], at + "/faults/" + std::to_string(i)));
      out.push_back(f);
    }
  }
  if (parent.contains("fault")) {
    KDA_ASSIGN_OR_RETURN(Fault f, parse_fault(parent["fault"], at + "/fault"));
    out.push_back(f);
  }
  return out;
}

Result<StepCall> parse_call(const json& j, const std::string& at) {
  StepCall c;
  if (!j.contains("tool") || !j["tool"].is_string() || j["tool"].get<std::string>().empty())
    return bad(at + "/tool", "must be a non-empty tool name");
  c.tool = j["tool"].get<std::string>();
  if (j.contains("input")) {
    if (!j["input"].is_object()) return bad(at + "/input", "must be an object");
    c.input = j["input"];
  }
  return c;
}

Result<Step> parse_step(const json& j, const std::string& at) {
  if (!j.is_object()) return bad(at, "a step must be an object");
  Step s;
  if (j.contains("text")) {
    if (!j["text"].is_string()) return bad(at + "/text", "must be a string");
    s.text = j["text"].get<std::string>();
  }
  if (j.contains("tool")) {
    KDA_ASSIGN_OR_RETURN(StepCall c, parse_call(j, at));
    s.calls.push_back(std::move(c));
  } else if (j.contains("input")) {
    return bad(at + "/input", "input without tool");
  }
  if (j.contains("calls")) {
    if (j.contains("tool")) return bad(at + "/calls", "use either tool or calls, not both");
    const json& calls = j["calls"];
    if (!calls.is_array() || calls.empty()) return bad(at + "/calls", "must be a non-empty list");
    for (size_t i = 0; i < calls.size(); ++i) {
      if (!calls[i].is_object()) return bad(at + "/calls/" + std::to_string(i), "must be an object");
      KDA_ASSIGN_OR_RETURN(StepCall c, parse_call(calls[i], at + "/calls/" + std::to_string(i)));
      s.calls.push_back(std::move(c));
    }
  }
  if (!s.text && s.calls.empty()) return bad(at, "a step needs text, tool or calls");
  KDA_ASSIGN_OR_RETURN(s.faults, parse_faults(j, at));
  return s;
}

Result<Scenario> parse_scenario(const json& j, const std::string& at) {
  if (!j.is_object()) return bad(at, "a scenario must be an object");
  Scenario sc;
  if (!j.contains("name") || !j["name"].is_string() || j["name"].get<std::string>().empty())
    return bad(at + "/name", "must be a non-empty string");
  sc.name = j["name"].get<std::string>();
  if (j.contains("match")) {
    if (!j["match"].is_string()) return bad(at + "/match", "must be a string");
    sc.match = j["match"].get<std::string>();
  }
  if (j.contains("workdir")) {
    if (!j["workdir"].is_string()) return bad(at + "/workdir", "must be a string");
    sc.workdir = j["workdir"].get<std::string>();
  }
  if (!j.contains("steps") || !j["steps"].is_array() || j["steps"].empty())
    return bad(at + "/steps", "must be a non-empty list of steps");
  for (size_t i = 0; i < j["steps"].size(); ++i) {
    KDA_ASSIGN_OR_RETURN(Step s, parse_step(j["steps"][i], at + "/steps/" + std::to_string(i)));
    sc.steps.push_back(std::move(s));
  }
  KDA_ASSIGN_OR_RETURN(sc.faults, parse_faults(j, at));
  return sc;
}

}  // namespace

Result<Script> parse_script(const json& doc) {
  Script script;
  const json* list = &doc;
  std::string list_at;
  if (doc.is_object()) {
    if (doc.contains("scenarios")) {
      list = &doc["scenarios"];
      list_at = "/scenarios";
    } else {
      static const json kEmpty = json::array();
      list = &kEmpty;
    }
    KDA_ASSIGN_OR_RETURN(script.faults, parse_faults(doc, ""));
    if (doc.contains("workdir")) {
      if (!doc["workdir"].is_string()) return bad("/workdir", "must be a string");
      script.workdir = doc["workdir"].get<std::string>();
    }
    if (doc.contains("responses_stream")) {
      const json& r = doc["responses_stream"];
      if (r != "minimal" && r != "full") return bad("/responses_stream", "must be \"minimal\" or \"full\"");
      script.responses_full = r == "full";
    }
    if (doc.contains("chunk_chars")) {
      const json& c = doc["chunk_chars"];
      if (!c.is_number_integer() || c.get<int>() < 1) return bad("/chunk_chars", "must be a positive integer");
      script.chunk_chars = c.get<int>();
    }
  } else if (!doc.is_array()) {
    return bad("", "must be a list of scenarios or an object with \"scenarios\"");
  }
  if (!list->is_array()) return bad(list_at, "must be a list of scenarios");
  std::set<std::string> names;
  for (size_t i = 0; i < list->size(); ++i) {
    std::string at = list_at + "/" + std::to_string(i);
    KDA_ASSIGN_OR_RETURN(Scenario sc, parse_scenario((*list)[i], at));
    if (!names.insert(sc.name).second) return bad(at + "/name", "duplicate scenario name \"" + sc.name + "\"");
    script.scenarios.push_back(std::move(sc));
  }
  return script;
}

const Scenario* match_scenario(const Script& script, const std::string& user_text) {
  for (const Scenario& sc : script.scenarios) {
    if (user_text.find(sc.match) != std::string::npos) return &sc;
  }
  return nullptr;
}

Step step_at(const Scenario& scenario, int index) {
  if (index >= 0 && index < static_cast<int>(scenario.steps.size())) return scenario.steps[index];
  for (auto it = scenario.steps.rbegin(); it != scenario.steps.rend(); ++it) {
    if (it->text && it->calls.empty()) {
      Step s;
      s.text = it->text;  // repeated without its faults: the run is over
      return s;
    }
  }
  Step s;
  s.text = "done";
  return s;
}

}  // namespace kda::fakellm
