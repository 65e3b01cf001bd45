// A section-level reader for the CUDA ELF images (cubins) that .ncu-rep reports embed: the section
// table, the symbol table and the relocations, which is what the DWARF line join needs (which
// .text section is which kernel, and which section a .debug_line address refers to).
//
// ELF64 little-endian only (every cubin is). Every offset, size and count is bounds-checked:
// malformed input is a kBadInput error, never a crash.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace kda::ncu {

struct ElfSection {
  std::string name;
  uint32_t type = 0;  // SHT_*
  uint64_t flags = 0;
  uint64_t offset = 0, size = 0;  // file extent (NOBITS sections have no bytes)
  uint32_t link = 0, info = 0;
  uint64_t entsize = 0;
};

struct ElfSymbol {
  std::string name;
  uint64_t value = 0, size = 0;
  uint16_t section = 0;  // st_shndx
  uint8_t type = 0;      // STT_* (2 = FUNC, 3 = SECTION)
  uint8_t binding = 0;   // STB_*
};

struct ElfRelocation {
  uint64_t offset = 0;  // within the section the relocations apply to
  uint32_t symbol = 0;  // index into symbols()
  uint32_t type = 0;
  int64_t addend = 0;  // 0 for SHT_REL
  bool has_addend = false;
};

class Cubin {
 public:
  // Copies `image`; kBadInput when it is not a well-formed ELF64 LE image.
  static Result<Cubin> parse(std::string_view image);

  const std::vector<ElfSection>& sections() const { return sections_; }
  const std::vector<ElfSymbol>& symbols() const { return symbols_; }
  uint16_t machine() const { return machine_; }  // 190 = EM_CUDA

  // The first section with this name, as an index into sections().
  std::optional<size_t> find_section(std::string_view name) const;
  // A section's bytes (empty for NOBITS or an out-of-range index).
  std::string_view section_data(size_t index) const;
  // The relocations of every SHT_REL/SHT_RELA section whose sh_info names `target`; symbol
  // indices are checked against symbols().
  Result<std::vector<ElfRelocation>> relocations_for(size_t target) const;
  // The code section of a kernel: the section of its FUNC symbol, else ".text.<mangled>".
  std::optional<size_t> function_section(std::string_view mangled) const;
  // The function a code section holds: the FUNC symbol defined in it, else the name after ".text.".
  std::string function_of_section(size_t index) const;

 private:
  std::string image_;
  uint16_t machine_ = 0;
  std::vector<ElfSection> sections_;
  std::vector<ElfSymbol> symbols_;
};

}  // namespace kda::ncu
