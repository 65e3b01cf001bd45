#include "task/definition.h"

#include <set>
#include <sstream>

#include "util/fs.h"

namespace kda::task {

namespace {

constexpr const char* kRoot = "";

void parse_axes(const ojson& j, JsonReader& r, Definition& def) {
  const ojson* axes = r.member(j, kRoot, "axes", true);
  if (axes == nullptr || !r.expect_object(*axes, "/axes")) return;
  for (const auto& [name, a] : axes->items()) {
    std::string p = child_pointer("/axes", name);
    if (name.empty()) r.error(p, "axis name must not be empty");
    if (!r.expect_object(a, p)) continue;
    AxisSpec axis{.name = name};
    auto type = r.string(a, p, "type", true);
    if (type == "const") {
      axis.kind = AxisSpec::Kind::kConst;
      auto v = r.integer(a, p, "value", true);
      if (v && *v < 0) r.error(child_pointer(p, "value"), "const axis value must be >= 0, got " + std::to_string(*v));
      axis.value = v.value_or(0);
    } else if (type == "var") {
      axis.kind = AxisSpec::Kind::kVar;
    } else if (type) {
      r.error(child_pointer(p, "type"), "axis type must be \"const\" or \"var\", got \"" + *type + "\"");
    }
    axis.description = r.string(a, p, "description", false).value_or("");
    def.axes.push_back(std::move(axis));
  }
}

void parse_tensors(const ojson& j, JsonReader& r, const char* key, const Definition& def,
                   std::vector<TensorSpec>& out) {
  const ojson* specs = r.member(j, kRoot, key, true);
  std::string base = child_pointer(kRoot, key);
  if (specs == nullptr || !r.expect_object(*specs, base)) return;
  for (const auto& [name, s] : specs->items()) {
    std::string p = child_pointer(base, name);
    if (name.empty()) r.error(p, "tensor name must not be empty");
    if (!r.expect_object(s, p)) continue;
    TensorSpec t{.name = name};
    const ojson* shape = r.member(s, p, "shape", true, /*null_ok=*/true);
    if (shape != nullptr && !shape->is_null()) {
      std::string sp = child_pointer(p, "shape");
      if (!shape->is_array()) {
        r.error(sp, "shape must be a list of axis names or null (a scalar), not " + json_type_name(*shape));
      } else {
        std::vector<std::string> dims;
        for (size_t i = 0; i < shape->size(); ++i) {
          const ojson& d = (*shape)[i];
          if (!d.is_string()) {
            r.error(child_pointer(sp, i), "axis name must be a string, not " + json_type_name(d));
            continue;
          }
          std::string axis = d.get<std::string>();
          if (def.axis(axis) == nullptr) r.error(child_pointer(sp, i), "axis '" + axis + "' is not declared in /axes");
          dims.push_back(std::move(axis));
        }
        t.shape = std::move(dims);
      }
    }
    if (auto dtype = r.string(s, p, "dtype", true)) {
      if (auto d = tensor::dtype_from_name(*dtype))
        t.dtype = *d;
      else
        r.error(child_pointer(p, "dtype"), "unknown dtype \"" + *dtype + "\"");
    }
    t.description = r.string(s, p, "description", false).value_or("");
    out.push_back(std::move(t));
  }
}

ojson tensors_to_json(const std::vector<TensorSpec>& specs) {
  ojson out = ojson::object();
  for (const auto& t : specs) {
    ojson s;
    s["shape"] = t.shape ? ojson(*t.shape) : ojson(nullptr);
    s["dtype"] = std::string(tensor::dtype_name(t.dtype));
    if (!t.description.empty()) s["description"] = t.description;
    out[t.name] = std::move(s);
  }
  return out;
}

}  // namespace

const AxisSpec* Definition::axis(const std::string& n) const {
  for (const auto& a : axes)
    if (a.name == n) return &a;
  return nullptr;
}

const TensorSpec* Definition::input(const std::string& n) const {
  for (const auto& t : inputs)
    if (t.name == n) return &t;
  return nullptr;
}

const TensorSpec* Definition::output(const std::string& n) const {
  for (const auto& t : outputs)
    if (t.name == n) return &t;
  return nullptr;
}

std::vector<std::string> Definition::var_axes() const {
  std::vector<std::string> v;
  for (const auto& a : axes)
    if (a.kind == AxisSpec::Kind::kVar) v.push_back(a.name);
  return v;
}

std::map<std::string, int64_t> Definition::const_axes() const {
  std::map<std::string, int64_t> m;
  for (const auto& a : axes)
    if (a.kind == AxisSpec::Kind::kConst) m[a.name] = a.value;
  return m;
}

ojson Definition::to_json() const {
  ojson j;
  j["name"] = name;
  j["op_type"] = op_type;
  if (!description.empty()) j["description"] = description;
  j["tags"] = tags;
  ojson ax = ojson::object();
  for (const auto& a : axes) {
    ojson o;
    o["type"] = a.kind == AxisSpec::Kind::kConst ? "const" : "var";
    if (a.kind == AxisSpec::Kind::kConst) o["value"] = a.value;
    if (!a.description.empty()) o["description"] = a.description;
    ax[a.name] = std::move(o);
  }
  j["axes"] = std::move(ax);
  j["constraints"] = constraints;
  j["inputs"] = tensors_to_json(inputs);
  j["outputs"] = tensors_to_json(outputs);
  j["reference"] = reference;
  return j;
}

bool has_top_level_run(const std::string& reference) {
  std::istringstream in(reference);
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with("def run(")) return true;
  return false;
}

std::optional<Definition> definition_from_json(const ojson& j, const std::string& file, Diagnostics& diags) {
  JsonReader r(file, 0, diags);
  if (!r.expect_object(j, kRoot)) return std::nullopt;
  Definition def;
  def.name = r.string(j, kRoot, "name", true, /*non_empty=*/true).value_or("");
  def.op_type = r.string(j, kRoot, "op_type", true).value_or("");
  parse_axes(j, r, def);
  parse_tensors(j, r, "inputs", def, def.inputs);
  parse_tensors(j, r, "outputs", def, def.outputs);
  for (const auto& o : def.outputs)
    if (def.input(o.name) != nullptr)
      r.error(child_pointer("/outputs", o.name), "output name '" + o.name + "' is also an input name");
  if (auto ref = r.string(j, kRoot, "reference", true)) {
    if (ref->find_first_not_of(" \t\r\n") == std::string::npos)
      r.error("/reference", "reference is empty");
    else if (!has_top_level_run(*ref))
      r.error("/reference", "reference must define a top-level 'def run(' function");
    def.reference = *ref;
  }
  def.tags = r.string_list(j, kRoot, "tags", false).value_or(std::vector<std::string>{});
  def.description = r.string(j, kRoot, "description", false).value_or("");
  def.constraints = r.string_list(j, kRoot, "constraints", false).value_or(std::vector<std::string>{});
  if (r.errors() > 0) return std::nullopt;
  return def;
}

std::optional<Definition> load_definition(const std::filesystem::path& path, Diagnostics& diags) {
  auto text = fs::read_file(path);
  if (!text.ok()) {
    diags.add(path.string(), 0, "", text.status().message());
    return std::nullopt;
  }
  auto j = parse_json_text(*text, path.string(), 0, diags);
  if (!j) return std::nullopt;
  return definition_from_json(*j, path.string(), diags);
}

Result<Definition> load_definition(const std::filesystem::path& path) {
  Diagnostics diags;
  auto def = load_definition(path, diags);
  if (!def) return diagnostics_status(diags);
  return std::move(*def);
}

Result<std::vector<int64_t>> resolve_shape(const Definition& def, const TensorSpec& spec,
                                           const std::map<std::string, int64_t>& axes) {
  std::vector<int64_t> shape;
  if (!spec.shape) return shape;
  for (const auto& name : *spec.shape) {
    const AxisSpec* a = def.axis(name);
    if (a == nullptr) return Status::bad_input("tensor '" + spec.name + "': axis '" + name + "' is not declared");
    auto it = axes.find(name);
    if (a->kind == AxisSpec::Kind::kConst) {
      if (it != axes.end() && it->second != a->value)
        return Status::bad_input("axis '" + name + "' is const " + std::to_string(a->value) + " but was given " +
                                 std::to_string(it->second));
      shape.push_back(a->value);
    } else {
      if (it == axes.end())
        return Status::bad_input("tensor '" + spec.name + "': var axis '" + name + "' has no value");
      if (it->second < 0) return Status::bad_input("axis '" + name + "' is negative");
      shape.push_back(it->second);
    }
  }
  return shape;
}

Result<std::map<std::string, int64_t>> bind_var_axes(const Definition& def,
                                                     const std::map<std::string, std::vector<int64_t>>& input_shapes) {
  std::map<std::string, int64_t> axes = def.const_axes();
  std::map<std::string, std::string> bound_by;  // var axis -> the input that bound it
  for (const auto& t : def.inputs) {
    auto it = input_shapes.find(t.name);
    if (it == input_shapes.end()) continue;
    const auto& shape = it->second;
    size_t rank = t.shape ? t.shape->size() : 0;
    if (shape.size() != rank)
      return Status::bad_input("input '" + t.name + "' has rank " + std::to_string(shape.size()) + ", expected " +
                               std::to_string(rank));
    for (size_t i = 0; i < rank; ++i) {
      const std::string& name = (*t.shape)[i];
      const AxisSpec* a = def.axis(name);
      if (a == nullptr) return Status::bad_input("input '" + t.name + "': axis '" + name + "' is not declared");
      if (a->kind == AxisSpec::Kind::kConst) {
        if (shape[i] != a->value)
          return Status::bad_input("input '" + t.name + "' dimension " + std::to_string(i) + " ('" + name + "') is " +
                                   std::to_string(shape[i]) + ", but the const axis is " + std::to_string(a->value));
        continue;
      }
      auto [pos, inserted] = axes.emplace(name, shape[i]);
      if (inserted) {
        bound_by[name] = t.name;
      } else if (pos->second != shape[i]) {
        return Status::bad_input("var axis '" + name + "' is " + std::to_string(pos->second) + " from input '" +
                                 bound_by[name] + "' but " + std::to_string(shape[i]) + " from input '" + t.name + "'");
      }
    }
  }
  return axes;
}

Status diagnostics_status(const Diagnostics& diags) {
  if (diags.empty()) return Status::internal("diagnostics_status called without problems");
  std::string msg;
  for (const auto& d : diags.items()) msg += (msg.empty() ? "" : "; ") + d.to_string();
  return Status::bad_input(msg);
}

}  // namespace kda::task
