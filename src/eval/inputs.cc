#include "eval/inputs.h"

#include <cstring>

#include <fmt/format.h>

#include "contest/generators.h"
#include "contest/stress.h"
#include "eval/fingerprint.h"
#include "tensor/generate.h"
#include "tensor/safetensors.h"
#include "util/sha256.h"

namespace kda::eval {

uint64_t derive_seed(uint64_t master, const std::string& uuid, uint64_t trial, uint64_t purpose) {
  Sha256 h;
  h.update(&master, sizeof(master)).update_field(uuid).update(&trial, sizeof(trial)).update(&purpose, sizeof(purpose));
  auto d = h.digest();
  uint64_t s = 0;
  std::memcpy(&s, d.data(), sizeof(s));
  return s;
}

ArenaLayout workload_layout(const task::Definition& def, const ResolvedWorkload& rw) {
  auto slots = [](const auto& specs, const auto& shapes, bool inputs) {
    std::vector<Slot> out;
    for (size_t i = 0; i < specs.size(); ++i) {
      Slot s{specs[i].name, specs[i].dtype, shapes[i], inputs && !specs[i].shape.has_value()};
      s.nbytes = static_cast<uint64_t>(
          tensor::dtype_storage_bytes(specs[i].dtype, tensor::checked_numel(s.shape).value_or(0)));
      out.push_back(s);
    }
    return out;
  };
  return plan_layout(slots(def.inputs, rw.input_shapes, true), slots(def.outputs, rw.output_shapes, false));
}

Result<ResolvedWorkload> resolve_workload(const task::TaskPack& pack, const task::Workload& w) {
  ResolvedWorkload rw;
  rw.workload = &w;
  KDA_ASSIGN_OR_RETURN(rw.axes, task::workload_axes(pack.definition, w));
  for (const auto& spec : pack.definition.inputs) {
    KDA_ASSIGN_OR_RETURN(auto shape, task::resolve_shape(pack.definition, spec, rw.axes));
    rw.input_shapes.push_back(std::move(shape));
  }
  for (const auto& spec : pack.definition.outputs) {
    KDA_ASSIGN_OR_RETURN(auto shape, task::resolve_shape(pack.definition, spec, rw.axes));
    rw.output_shapes.push_back(std::move(shape));
  }
  return rw;
}

Result<tensor::Tensor> BlobCache::get(const std::filesystem::path& file, const std::string& key) {
  std::string id = file.string() + "\n" + key;
  if (auto it = cache_.find(id); it != cache_.end()) return it->second;
  KDA_ASSIGN_OR_RETURN(tensor::Tensor t, tensor::read_safetensors_tensor(file, key));
  cache_.emplace(id, t);
  return t;
}

namespace {

Status set_scalar(tensor::Tensor& t, const nlohmann::json& v, const std::string& name) {
  double x = 0;
  if (v.is_boolean())
    x = v.get<bool>() ? 1 : 0;
  else if (v.is_number())
    x = v.get<double>();
  else
    return Status::bad_input(fmt::format("input '{}': scalar value is not a number", name));
  t.set_from_double(0, x);
  return {};
}

}  // namespace

std::optional<std::vector<std::string>> generator_stresses(std::string_view generator) {
  if (contest::find_generator(generator) == nullptr) return std::nullopt;
  return contest::stress_names(generator);
}

std::string unknown_stress(const task::TaskPack& pack, std::string_view name) {
  const std::string& g = pack.settings.inputs_generator;
  std::string known;
  for (const auto& n : contest::stress_names(g)) known += (known.empty() ? "" : ", ") + n;
  return fmt::format("{}: task.toml [inputs] stress '{}' is not a stress of generator '{}' ({})",
                     (pack.root / "task.toml").string(), name, g, known.empty() ? "it has none" : "known: " + known);
}

Result<MaterializedInputs> materialize_inputs(const task::TaskPack& pack, const ResolvedWorkload& rw,
                                              uint64_t trial_seed, BlobCache& blobs, bool host_values,
                                              std::optional<uint64_t> generator_seed, std::string_view stress) {
  const auto& def = pack.definition;
  const auto& w = *rw.workload;
  MaterializedInputs out;
  out.host_values = host_values;
  std::map<std::string, tensor::Tensor> generated;
  if (!pack.settings.inputs_generator.empty()) {
    const contest::Generator* gen = contest::find_generator(pack.settings.inputs_generator);
    if (gen == nullptr)
      return Status::bad_input(fmt::format("{}: task.toml [inputs] generator '{}' is unknown", pack.root.string(),
                                           pack.settings.inputs_generator));
    KDA_RETURN_IF_ERROR(
        (*gen)(rw.axes, contest::workload_seed_from_uuid(w.uuid), generator_seed.value_or(trial_seed), generated)
            .with_context("generator " + pack.settings.inputs_generator + " for workload " + w.uuid));
  }
  if (!stress.empty()) {
    const contest::Stress* st = contest::find_stress(pack.settings.inputs_generator, stress);
    if (st == nullptr) return Status::bad_input(unknown_stress(pack, stress));
    // Fixed per uuid where the generator's draws are (the fresh-inputs knock-out), fresh otherwise.
    KDA_RETURN_IF_ERROR(
        st->apply(rw.axes, derive_seed(generator_seed.value_or(trial_seed), w.uuid, 0, 0x57E55), generated)
            .with_context(fmt::format("stress {} for workload {}", stress, w.uuid)));
  }
  for (size_t i = 0; i < def.inputs.size(); ++i) {
    const auto& spec = def.inputs[i];
    const auto& shape = rw.input_shapes[i];
    auto it = w.inputs.find(spec.name);
    task::InputSpec::Kind kind = it == w.inputs.end() ? task::InputSpec::Kind::kRandom : it->second.kind;
    const bool plain_kind = kind == task::InputSpec::Kind::kRandom && !generated.contains(spec.name) && !shape.empty();
    tensor::Tensor t = plain_kind && !host_values ? tensor::Tensor() : tensor::Tensor(spec.dtype, shape);
    bool plain = false;
    switch (kind) {
      case task::InputSpec::Kind::kScalar: KDA_RETURN_IF_ERROR(set_scalar(t, it->second.value, spec.name)); break;
      case task::InputSpec::Kind::kSafetensors: {
        KDA_ASSIGN_OR_RETURN(t, blobs.get(pack.root / it->second.path, it->second.tensor_key));
        if (t.shape() != shape || t.dtype() != spec.dtype)
          return Status::bad_input(fmt::format(
              "workload {}: blob {} tensor '{}' is {} {} but the definition needs {} {}", w.uuid, it->second.path,
              it->second.tensor_key, tensor::dtype_name(t.dtype()), tensor::shape_string(t.shape()),
              tensor::dtype_name(spec.dtype), tensor::shape_string(shape)));
        break;
      }
      case task::InputSpec::Kind::kRandom:
        if (auto g = generated.find(spec.name); g != generated.end()) {
          if (g->second.shape() != shape || g->second.dtype() != spec.dtype)
            return Status::internal(
                fmt::format("generator {} produced '{}' as {} {}, expected {} {}", pack.settings.inputs_generator,
                            spec.name, tensor::dtype_name(g->second.dtype()), tensor::shape_string(g->second.shape()),
                            tensor::dtype_name(spec.dtype), tensor::shape_string(shape)));
          t = std::move(g->second);
        } else {
          if (host_values || shape.empty()) tensor::fill_random(t, trial_seed, static_cast<uint64_t>(i));
          plain = !shape.empty();
        }
        break;
    }
    out.tensors.push_back(std::move(t));
    out.plain_random.push_back(plain);
    out.random.push_back(RandomSpec{trial_seed, static_cast<uint64_t>(i), std::nullopt});
  }
  return out;
}

void copy_fingerprint(const MaterializedInputs& from, MaterializedInputs& to) {
  for (size_t i = 0; i < from.tensors.size() && i < to.tensors.size(); ++i) {
    if (!from.plain_random[i] || !to.plain_random[i]) continue;
    to.random[i].fingerprint_seed = from.random[i].seed;
    if (!from.host_values || !to.host_values) continue;
    const auto& a = from.tensors[i];
    auto& b = to.tensors[i];
    int64_t n = a.numel();
    for (int64_t k = 0; k < n; ++k) {
      if (is_fingerprint_position(k, n)) b.set_bits(k, a.get_bits(k));
    }
  }
}

}  // namespace kda::eval
