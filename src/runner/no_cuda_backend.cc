// Built when CUDA is not available at configure time: the runner serves the host backend only.
#include "runner/backend.h"

namespace kda::runner {
std::unique_ptr<Backend> make_cuda_backend() { return nullptr; }
}  // namespace kda::runner
