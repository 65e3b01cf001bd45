// What every backend shares: loading the entry point and describing the arena's tensors.
#include "runner/backend.h"

#include <dlfcn.h>

namespace kda::runner {

Status Backend::load(const std::filesystem::path& library, const std::string& symbol) {
  handle_ = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) return Status::failed(std::string("dlopen: ") + ::dlerror());
  void* sym = ::dlsym(handle_, symbol.c_str());
  if (sym == nullptr) return Status::failed("entry point '" + symbol + "' not found in " + library.string());
  entry_ = reinterpret_cast<EntryFn>(sym);
  return {};
}

void Backend::describe_tensors(const eval::ArenaLayout& layout,
                               const std::function<std::pair<void*, DLDevice>(const eval::Slot&)>& place) {
  inputs_.clear();
  outputs_.clear();
  shapes_.clear();
  shapes_.reserve(layout.inputs.size() + layout.outputs.size());  // no reallocation: pointers stay valid
  auto make = [&](const eval::Slot& s) {
    shapes_.push_back(s.shape);
    auto [data, device] = place(s);
    DLTensor t{};
    t.data = data;
    t.device = device;
    t.ndim = static_cast<int32_t>(s.shape.size());
    t.dtype = tensor::to_dlpack(s.dtype);
    t.shape = shapes_.back().data();
    return t;
  };
  for (const auto& s : layout.inputs) inputs_.push_back(make(s));
  for (const auto& s : layout.outputs) outputs_.push_back(make(s));
}

}  // namespace kda::runner
