#include "eval/protocol.h"

namespace kda::eval {

using json = nlohmann::json;

namespace {

// Reads the fields of one message: an absent (or null) field keeps its default, one of the wrong
// type is the message's error, naming the field.
class Fields {
 public:
  Fields(const char* message, const json& j) : message_(message), j_(j) {
    if (!j_.is_object()) error_ = std::string(message_) + ": not a JSON object";
  }
  template <class T>
  void get(const char* key, T& into) {
    if (error_ || !j_.contains(key) || j_[key].is_null()) return;
    try {
      into = j_[key].get<T>();
    } catch (const json::exception&) {
      error_ = std::string(message_) + ": field \"" + key + "\" has the wrong type (" + j_[key].type_name() + ")";
    }
  }
  template <class T>
  void get(const char* key, std::optional<T>& into) {
    T v{};
    const bool had = !error_ && j_.contains(key) && !j_[key].is_null();
    get(key, v);
    if (had && !error_) into = v;
  }
  Status status() const { return error_ ? Status::bad_input(*error_) : Status::ok_status(); }
  template <class T>
  Result<T> done(T value) const {
    if (error_) return Status::bad_input(*error_);
    return value;
  }

 private:
  const char* message_;
  const json& j_;
  std::optional<std::string> error_;
};

}  // namespace

json LoadRequest::to_json() const {
  json j{{"library", library}, {"symbol", symbol}};
  if (returns_outputs) j["returns_outputs"] = true;
  if (reload) {
    j["reload"] = true;
  } else {
    j["sandbox"] = sandbox;
    if (reload_root) j["reload_root"] = *reload_root;
    if (jit_dir) j["jit_dir"] = *jit_dir;
    if (python_module) j["python_module"] = *python_module;
  }
  return j;
}

Result<LoadRequest> LoadRequest::from_json(const json& j) {
  LoadRequest r;
  Fields f("load", j);
  f.get("library", r.library);
  f.get("symbol", r.symbol);
  f.get("sandbox", r.sandbox);
  f.get("reload_root", r.reload_root);
  f.get("jit_dir", r.jit_dir);
  f.get("python_module", r.python_module);
  f.get("reload", r.reload);
  f.get("returns_outputs", r.returns_outputs);
  KDA_RETURN_IF_ERROR(f.status());
  if (r.library.empty() || r.symbol.empty())
    return Status::bad_input("load: fields \"library\" and \"symbol\" are required");
  return r;
}

json CallRequest::to_json() const {
  json p = json::array();
  for (const auto& [index, seed] : poison) p.push_back({index, seed});
  return {{"seq", seq},
          {"flush", flush},
          {"upload", upload},
          {"upload_from", upload_from},
          {"download", download},
          {"download_outputs", download_outputs},
          {"timed", timed},
          {"profile_range", profile_range},
          {"defer_records", defer_records},
          {"poison", p},
          {"graph", graph == Graph::kCapture  ? "capture"
                    : graph == Graph::kReplay ? "replay"
                                              : ""}};
}

Result<CallRequest> CallRequest::from_json(const json& j) {
  CallRequest r;
  Fields f("call", j);
  f.get("seq", r.seq);
  f.get("flush", r.flush);
  f.get("upload", r.upload);
  f.get("upload_from", r.upload_from);
  f.get("download", r.download);
  f.get("download_outputs", r.download_outputs);
  f.get("timed", r.timed);
  f.get("profile_range", r.profile_range);
  f.get("defer_records", r.defer_records);
  f.get("poison", r.poison);  // [[index, seed], ...]
  std::string graph;
  f.get("graph", graph);
  if (graph == "capture") r.graph = CallRequest::Graph::kCapture;
  if (graph == "replay") r.graph = CallRequest::Graph::kReplay;
  if (!graph.empty() && r.graph == CallRequest::Graph::kNone)
    return Status::bad_input("call: graph '" + graph + "' is not capture or replay");
  return f.done(std::move(r));
}

json CallReply::to_json() const {
  json j{{"ok", ok}, {"rc", rc}, {"elapsed_ns", elapsed_ns}, {"extra", extra}, {"seq", seq}};
  if (!error.empty()) j["error"] = error;
  return j;
}

Result<CallReply> CallReply::from_json(const json& j) {
  CallReply r;
  Fields f("call reply", j);
  f.get("ok", r.ok);
  f.get("rc", r.rc);
  f.get("error", r.error);
  f.get("elapsed_ns", r.elapsed_ns);
  f.get("extra", r.extra);
  f.get("seq", r.seq);
  if (!r.extra.is_object()) r.extra = json::object();
  return f.done(std::move(r));
}

json PrepareRequest::to_json() const {
  json ins = json::array();
  for (const auto& in : inputs) {
    json spec{{"random", in.random}};
    if (in.random) {
      spec["seed"] = in.seed;
      spec["stream"] = in.stream;
      if (in.fingerprint_seed) spec["fingerprint_seed"] = *in.fingerprint_seed;
    }
    ins.push_back(std::move(spec));
  }
  return {{"inputs", ins}, {"digest_key", digest_key}};
}

Result<PrepareRequest> PrepareRequest::from_json(const json& j) {
  PrepareRequest r;
  Fields f("prepare", j);
  f.get("digest_key", r.digest_key);
  json ins = json::array();
  f.get("inputs", ins);
  KDA_RETURN_IF_ERROR(f.status());
  if (!ins.is_array())
    return Status::bad_input("prepare: field \"inputs\" has the wrong type (" + std::string(ins.type_name()) + ")");
  for (const auto& in : ins) {
    PrepareInput p;
    Fields g("prepare input", in);
    g.get("random", p.random);
    g.get("seed", p.seed);
    g.get("stream", p.stream);
    g.get("fingerprint_seed", p.fingerprint_seed);
    KDA_RETURN_IF_ERROR(g.status());
    r.inputs.push_back(p);
  }
  return r;
}

json PrepareReply::to_json() const {
  json j{{"ok", ok}, {"digests", digests}, {"elapsed_ns", elapsed_ns}};
  if (!error.empty()) j["error"] = error;
  return j;
}

Result<PrepareReply> PrepareReply::from_json(const json& j) {
  PrepareReply r;
  Fields f("prepare reply", j);
  f.get("ok", r.ok);
  f.get("error", r.error);
  f.get("digests", r.digests);
  f.get("elapsed_ns", r.elapsed_ns);
  return f.done(std::move(r));
}

json Hello::to_json() const { return {{"pid", pid}, {"backend", backend}, {"capabilities", capabilities}}; }

Result<Hello> Hello::from_json(const json& j) {
  Hello h;
  Fields f("hello", j);
  f.get("pid", h.pid);
  f.get("backend", h.backend);
  f.get("capabilities", h.capabilities);
  return f.done(std::move(h));
}

json CollectReply::to_json() const {
  json j{{"ok", ok}, {"calls", calls}};
  if (!error.empty()) j["error"] = error;
  return j;
}

Result<CollectReply> CollectReply::from_json(const json& j) {
  CollectReply r;
  Fields f("collect reply", j);
  f.get("ok", r.ok);
  f.get("error", r.error);
  f.get("calls", r.calls);
  return f.done(std::move(r));
}

}  // namespace kda::eval
