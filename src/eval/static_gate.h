// Static gates on a built candidate library: the dynamic-import audit against the task's policy and
// resource sanity (registers, shared memory) against device limits.
#pragma once

#include <vector>

#include "eval/evaluator.h"
#include "eval/solution_build.h"
#include "task/settings.h"

namespace kda::eval {

std::vector<Gate> static_gates(const BuiltLibrary& lib, const task::TaskSettings& settings);

}  // namespace kda::eval
