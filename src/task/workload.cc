#include "task/workload.h"

namespace kda::task {

nlohmann::json InputSpec::to_json() const {
  switch (kind) {
    case Kind::kRandom: return {{"type", "random"}};
    case Kind::kScalar: return {{"type", "scalar"}, {"value", value}};
    case Kind::kSafetensors: return {{"type", "safetensors"}, {"path", path}, {"tensor_key", tensor_key}};
  }
  return nullptr;
}

nlohmann::json Workload::to_json() const {
  nlohmann::json in = nlohmann::json::object();
  for (const auto& [name, spec] : inputs) in[name] = spec.to_json();
  return {{"uuid", uuid}, {"axes", axes}, {"inputs", std::move(in)}};
}

InputSpec Workload::input(const std::string& name) const {
  auto it = inputs.find(name);
  return it == inputs.end() ? InputSpec{} : it->second;
}

bool is_safe_relative_path(const std::string& path) {
  if (path.empty() || path.front() == '/' || path.find('\\') != std::string::npos) return false;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string_view part(path.data() + start, end - start);
    if (part == ".." || part.empty()) return false;
    if (end == path.size()) break;
    start = end + 1;
  }
  return true;
}

std::optional<Workload> workload_from_json(const ojson& j, const std::string& file, int line,
                                           const std::string& pointer, Diagnostics& diags) {
  JsonReader r(file, line, diags);
  if (!r.expect_object(j, pointer)) return std::nullopt;
  Workload w;
  w.uuid = r.string(j, pointer, "uuid", true, /*non_empty=*/true).value_or("");
  std::string ap = child_pointer(pointer, "axes");
  if (const ojson* axes = r.member(j, pointer, "axes", true); axes != nullptr && r.expect_object(*axes, ap)) {
    for (const auto& [name, v] : axes->items()) {
      if (auto n = r.integer(*axes, ap, name.c_str(), true)) {
        if (*n < 0) r.error(child_pointer(ap, name), "axis value must be >= 0, got " + std::to_string(*n));
        w.axes[name] = *n;
      }
    }
  }
  std::string ip = child_pointer(pointer, "inputs");
  if (const ojson* inputs = r.member(j, pointer, "inputs", true); inputs != nullptr && r.expect_object(*inputs, ip)) {
    for (const auto& [name, s] : inputs->items()) {
      std::string p = child_pointer(ip, name);
      if (!r.expect_object(s, p)) continue;
      InputSpec spec;
      auto type = r.string(s, p, "type", true);
      if (!type) continue;
      if (*type == "random") {
        spec.kind = InputSpec::Kind::kRandom;
      } else if (*type == "scalar") {
        spec.kind = InputSpec::Kind::kScalar;
        const ojson* v = r.member(s, p, "value", true);
        if (v != nullptr && !v->is_number() && !v->is_boolean()) {
          r.error(child_pointer(p, "value"), "scalar value must be a number or a bool, not " + json_type_name(*v));
        } else if (v != nullptr) {
          spec.value = nlohmann::json(*v);
        }
      } else if (*type == "safetensors") {
        spec.kind = InputSpec::Kind::kSafetensors;
        spec.path = r.string(s, p, "path", true, /*non_empty=*/true).value_or("");
        spec.tensor_key = r.string(s, p, "tensor_key", true, /*non_empty=*/true).value_or("");
        if (!spec.path.empty() && !is_safe_relative_path(spec.path))
          r.error(child_pointer(p, "path"), "blob path must be relative, without '..': \"" + spec.path + "\"");
      } else {
        r.error(child_pointer(p, "type"),
                "input type must be \"random\", \"scalar\" or \"safetensors\", got \"" + *type + "\"");
        continue;
      }
      w.inputs[name] = std::move(spec);
    }
  }
  if (r.errors() > 0) return std::nullopt;
  return w;
}

Result<std::map<std::string, int64_t>> workload_axes(const Definition& def, const Workload& w) {
  std::map<std::string, int64_t> axes = def.const_axes();
  for (const auto& name : def.var_axes()) {
    auto it = w.axes.find(name);
    if (it == w.axes.end()) return Status::bad_input("workload " + w.uuid + ": var axis '" + name + "' has no value");
    axes[name] = it->second;
  }
  return axes;
}

void check_workload(const Definition& def, const Workload& w, const std::string& file, int line,
                    const std::string& pointer, Diagnostics& diags, const BlobCheck* blobs) {
  JsonReader r(file, line, diags);
  std::string ap = child_pointer(pointer, "axes");
  for (const auto& [name, value] : w.axes) {
    const AxisSpec* a = def.axis(name);
    if (a == nullptr) {
      r.error(child_pointer(ap, name), "axis '" + name + "' is not declared by definition '" + def.name + "'");
    } else if (a->kind == AxisSpec::Kind::kConst && a->value != value) {
      r.error(child_pointer(ap, name), "axis '" + name + "' is const " + std::to_string(a->value) + " in '" + def.name +
                                           "', got " + std::to_string(value));
    }
  }
  for (const auto& name : def.var_axes())
    if (!w.axes.contains(name)) r.error(ap, "var axis '" + name + "' of definition '" + def.name + "' has no value");

  std::string ip = child_pointer(pointer, "inputs");
  for (const auto& [name, spec] : w.inputs) {
    std::string p = child_pointer(ip, name);
    const TensorSpec* t = def.input(name);
    if (t == nullptr) {
      r.error(p, "'" + name + "' is not an input of definition '" + def.name + "'");
      continue;
    }
    switch (spec.kind) {
      case InputSpec::Kind::kRandom: break;
      case InputSpec::Kind::kScalar:
        if (!t->is_scalar()) {
          r.error(child_pointer(p, "type"),
                  "input '" + name + "' is a tensor; a \"scalar\" spec is only for shape-null inputs");
        } else if (tensor::is_integer(t->dtype) && t->dtype != tensor::DType::kBool &&
                   !spec.value.is_number_integer()) {
          r.error(child_pointer(p, "value"), "scalar '" + name + "' is " + std::string(tensor::dtype_name(t->dtype)) +
                                                 " but the value is not an integer");
        } else if (t->dtype == tensor::DType::kBool && !spec.value.is_boolean() && !spec.value.is_number_integer()) {
          r.error(child_pointer(p, "value"), "scalar '" + name + "' is bool but the value is not a bool");
        }
        break;
      case InputSpec::Kind::kSafetensors: {
        if (t->is_scalar()) {
          r.error(child_pointer(p, "type"),
                  "input '" + name + "' is a scalar; scalars are passed by value (\"scalar\" spec)");
          break;
        }
        if (blobs == nullptr || !is_safe_relative_path(spec.path)) break;
        auto shape = resolve_shape(def, *t, w.axes);
        if (!shape.ok()) break;  // a missing axis is reported above
        check_safetensors_blob(*blobs, spec, *shape, t->dtype, file, line, p, diags);
        break;
      }
    }
  }
}

}  // namespace kda::task
