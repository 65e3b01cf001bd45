// Safetensors checks of workload inputs: the blob exists (relative to the dataset root / pack directory) and
// holds the tensor key with exactly the shape (axes bound from the workload) and the dtype of the definition.
#include <system_error>

#include "task/workload.h"
#include "tensor/safetensors.h"
#include "tensor/tensor.h"

namespace kda::task {

void check_safetensors_blob(const BlobCheck& blobs, const InputSpec& spec, const std::vector<int64_t>& shape,
                            tensor::DType dtype, const std::string& file, int line, const std::string& pointer,
                            Diagnostics& diags) {
  std::filesystem::path path = blobs.root / spec.path;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    diags.add(file, line, child_pointer(pointer, "path"), "blob " + path.string() + " does not exist");
    return;
  }
  auto header = tensor::read_safetensors_header(path);
  if (!header.ok()) {
    diags.add(file, line, child_pointer(pointer, "path"), "blob " + path.string() + ": " + header.status().message());
    return;
  }
  std::string names;
  for (const auto& e : header->tensors) {
    if (e.name != spec.tensor_key) {
      names += (names.empty() ? "" : ", ") + e.name;
      continue;
    }
    if (e.dtype != dtype)
      diags.add(file, line, child_pointer(pointer, "tensor_key"),
                "tensor '" + e.name + "' in " + path.string() + " is " + std::string(tensor::dtype_name(e.dtype)) +
                    ", the definition says " + std::string(tensor::dtype_name(dtype)));
    if (e.shape != shape)
      diags.add(file, line, child_pointer(pointer, "tensor_key"),
                "tensor '" + e.name + "' in " + path.string() + " has shape " + tensor::shape_string(e.shape) +
                    ", the workload needs " + tensor::shape_string(shape));
    return;
  }
  diags.add(file, line, child_pointer(pointer, "tensor_key"),
            "blob " + path.string() + " has no tensor '" + spec.tensor_key + "' (it has: " + names + ")");
}

}  // namespace kda::task
