// Facts about an ingested source tree: its git commit and its licence.
#pragma once

#include <filesystem>
#include <string>

namespace kda::wiki {

// `git -C <dir> rev-parse HEAD` (argv, no shell; stdin /dev/null; stderr discarded); "" when not a checkout
// or git is missing.
std::string git_head(const std::filesystem::path& dir);

// The first non-empty line of the first LICENSE* / COPYING* file in `dir` (e.g. "Apache License"), or "".
std::string license_of(const std::filesystem::path& dir);

}  // namespace kda::wiki
