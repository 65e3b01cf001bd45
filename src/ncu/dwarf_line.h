// A decoder for DWARF line-number programs (.debug_line, versions 2 to 5), which is what nvcc
// -lineinfo puts in a cubin: SASS address -> (file, line). Standard, extended and special opcodes;
// vendor extended opcodes (NVIDIA's inlining records) are skipped by their length.
//
// In a relocatable cubin every sequence starts with DW_LNE_set_address 0 plus a relocation against
// the kernel's symbol; `address_sections` maps the file offset of such an operand (within
// .debug_line) to the section it points into, so each sequence knows which .text section it
// describes. Malformed input is a kBadInput error, never a crash or an endless loop.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "util/status.h"

namespace kda::ncu {

struct LineRow {
  uint64_t address = 0;
  uint32_t file = 0;  // index into LineTable::files
  int line = 0;
};

// One contiguous address range: rows in program order, ending at `end` (DW_LNE_end_sequence).
struct LineSequence {
  int section = -1;  // ELF section the addresses are relative to (-1: no relocation seen)
  uint64_t begin = 0, end = 0;
  std::vector<LineRow> rows;
};

struct LineTable {
  std::vector<std::string> files;  // full paths ("dir/name"); one entry per (unit, file number)
  std::vector<LineSequence> sequences;

  struct Location {
    std::string_view file;
    int line = 0;
  };
  // The row in force at `address` of `section`: the last row at or below it in the sequence that
  // covers it. A sequence without a section matches any section when no sequence has one.
  std::optional<Location> lookup(int section, uint64_t address) const;
};

struct DwarfStrings {
  std::string_view debug_str;       // for DW_FORM_strp (DWARF 5 file tables)
  std::string_view debug_line_str;  // for DW_FORM_line_strp
};

// A set_address operand's relocation target: the section and the symbol value plus addend.
struct AddressRelocation {
  int section = -1;
  uint64_t value = 0;
  bool add_stored = false;  // SHT_REL: the operand's stored bytes are the addend
};

// Decodes every unit of a .debug_line section.
Result<LineTable> decode_debug_line(std::string_view section,
                                    const std::unordered_map<uint64_t, AddressRelocation>& address_sections = {},
                                    const DwarfStrings& strings = {});

}  // namespace kda::ncu
