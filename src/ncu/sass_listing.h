// SASS instruction text for the kernels of a cubin, from NVIDIA's nvdisasm (CUDA toolkit) run as a
// child process: the report embeds the cubin but no disassembly. Where nvdisasm is missing the
// caller goes without SASS text; nothing else depends on it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "util/status.h"

namespace kda::ncu {

// Function (mangled name, from the ".text.<name>" section) -> offset in its section -> text
// ("LDG.E R2, desc[UR4][R2.64]", the ';' and encoding comments stripped).
using SassListing = std::map<std::string, std::map<uint64_t, std::string>>;

// Parses nvdisasm's text listing ("/*0040*/  IMAD R0, R3, c[0x0][0x0], R0 ;" under ".section .text.<name>").
SassListing parse_nvdisasm_listing(std::string_view text);

// nvdisasm from PATH, else /usr/local/cuda/bin/nvdisasm; nullopt when neither exists.
std::optional<std::filesystem::path> find_nvdisasm();

// Writes the cubin to a private temporary file and runs `nvdisasm -c <file>` (argv, no shell)
// for at most `timeout_s`. A tool that fails, times out or prints no instructions is an error.
Result<SassListing> disassemble_cubin(std::string_view cubin, const std::filesystem::path& nvdisasm,
                                      double timeout_s = 60);

// The opcode of an instruction text: the first word after an optional "@P0"/"@!PT" predicate
// ("@P0 LDG.E.64 R2, [R4]" -> "LDG.E.64").
std::string sass_opcode(std::string_view text);

}  // namespace kda::ncu
