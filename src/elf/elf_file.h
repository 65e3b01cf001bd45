// A small ELF64 reader for the static gate: what a shared library needs from the dynamic loader
// (DT_NEEDED, imported symbols with versions), what it exports, and its hardening flags.
//
// It reads the loader's view (program headers and the dynamic segment), not the section headers,
// which the loader ignores. Every offset, size and count is bounds-checked: malformed input gives
// an error, never a crash.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace kda::elf {

enum class SymbolType { kNoType, kObject, kFunc, kTls, kIfunc, kOther };
enum class SymbolBinding { kLocal, kGlobal, kWeak, kUnique, kOther };

struct DynamicSymbol {
  std::string name;
  std::string version;  // "GLIBC_2.34" for versioned imports/exports; empty when unversioned
  SymbolType type = SymbolType::kNoType;
  SymbolBinding binding = SymbolBinding::kGlobal;
  bool defined = false;  // st_shndx != SHN_UNDEF
};

struct ElfInfo {
  uint16_t machine = 0;        // e_machine (62 = x86-64, 183 = aarch64)
  bool shared_object = false;  // e_type == ET_DYN
  std::string soname;
  std::vector<std::string> needed;     // DT_NEEDED, in order
  std::vector<std::string> rpath;      // DT_RPATH and DT_RUNPATH entries
  std::vector<DynamicSymbol> exports;  // defined, global/weak/unique, default or protected visibility
  std::vector<DynamicSymbol> imports;  // undefined dynamic symbols (what the library calls out to)
  bool has_dynamic = false;
  bool relro = false;             // PT_GNU_RELRO present
  bool bind_now = false;          // DT_BIND_NOW, DF_BIND_NOW or DF_1_NOW
  bool text_relocations = false;  // DT_TEXTREL
  bool exec_stack = false;        // PT_GNU_STACK with PF_X (or missing, which means executable)
  size_t init_functions = 0;      // DT_INIT + DT_INIT_ARRAY entries: code that runs at dlopen

  const DynamicSymbol* find_export(std::string_view name) const;
  const DynamicSymbol* find_import(std::string_view name) const;
};

// Parses an ELF64 little-endian image held in memory.
Result<ElfInfo> parse_elf(std::string_view image);

// Reads and parses a file (kNotFound if missing, kBadInput if not a well-formed ELF64).
Result<ElfInfo> read_elf_file(const std::filesystem::path& path);

// SHA-256 (hex) of what the loader maps: each PT_LOAD segment's address, sizes, flags and file bytes,
// in program-header order, with the bytes of PT_NOTE segments (the GNU build ID, which also hashes
// non-loaded sections such as the symbol table's file names) and the ELF header's section-table fields
// zeroed. Two libraries with the same digest run the same instructions on the same data; a change
// that reaches neither code nor data (a comment, a renamed source directory) leaves it unchanged.
Result<std::string> loaded_image_digest(std::string_view image);
Result<std::string> loaded_image_digest_file(const std::filesystem::path& path);

}  // namespace kda::elf
