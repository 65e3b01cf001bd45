#include "ncu/cubin.h"

#include <cstring>

#include "util/bytes.h"

namespace kda::ncu {

namespace {

constexpr uint32_t kShtSymtab = 2, kShtRela = 4, kShtNobits = 8, kShtRel = 9;
constexpr uint8_t kSttFunc = 2;
constexpr size_t kShdrSize = 64, kSymSize = 24, kRelaSize = 24, kRelSize = 16;

using util::c_string;
using util::fits;
using util::load_le;  // after a fits() check

}  // namespace

Result<Cubin> Cubin::parse(std::string_view image) {
  Cubin c;
  c.image_ = std::string(image);
  std::string_view s = c.image_;
  if (s.size() < 64 || s.substr(0, 4) != std::string_view("\x7f"
                                                          "ELF",
                                                          4))
    return Status::bad_input("cubin: not an ELF image");
  if (s[4] != 2 || s[5] != 1) return Status::bad_input("cubin: only 64-bit little-endian ELF is supported");
  c.machine_ = load_le<uint16_t>(s, 18);
  const uint64_t shoff = load_le<uint64_t>(s, 40);
  const uint16_t shentsize = load_le<uint16_t>(s, 58);
  uint64_t shnum = load_le<uint16_t>(s, 60);
  uint32_t shstrndx = load_le<uint16_t>(s, 62);
  if (shoff == 0) return c;  // no section table
  if (shentsize != kShdrSize)
    return Status::bad_input("cubin: section header size " + std::to_string(shentsize) + " (expected 64)");
  if (!fits(s, shoff, kShdrSize)) return Status::bad_input("cubin: section table offset past the end");
  if (shnum == 0) shnum = load_le<uint64_t>(s, shoff + 32);             // extended numbering: count in section 0
  if (shstrndx == 0xffff) shstrndx = load_le<uint32_t>(s, shoff + 40);  // and the string table index
  if (shnum > (s.size() - shoff) / kShdrSize) return Status::bad_input("cubin: section table runs past the end");
  std::vector<uint32_t> name_offsets;
  for (uint64_t i = 0; i < shnum; ++i) {
    const uint64_t h = shoff + i * kShdrSize;
    ElfSection sec;
    name_offsets.push_back(load_le<uint32_t>(s, h));
    sec.type = load_le<uint32_t>(s, h + 4);
    sec.flags = load_le<uint64_t>(s, h + 8);
    sec.offset = load_le<uint64_t>(s, h + 24);
    sec.size = load_le<uint64_t>(s, h + 32);
    sec.link = load_le<uint32_t>(s, h + 40);
    sec.info = load_le<uint32_t>(s, h + 44);
    sec.entsize = load_le<uint64_t>(s, h + 56);
    if (sec.type != kShtNobits && !fits(s, sec.offset, sec.size))
      return Status::bad_input("cubin: section " + std::to_string(i) + " runs past the end of the image");
    c.sections_.push_back(std::move(sec));
  }
  if (shstrndx >= c.sections_.size()) return Status::bad_input("cubin: section name table index out of range");
  const std::string_view names = c.section_data(shstrndx);
  for (size_t i = 0; i < c.sections_.size(); ++i) {
    auto n = c_string(names, name_offsets[i]);
    if (!n) return Status::bad_input("cubin: section " + std::to_string(i) + " has a name outside the name table");
    c.sections_[i].name = std::move(*n);
  }
  for (size_t i = 0; i < c.sections_.size(); ++i) {
    const ElfSection& sym = c.sections_[i];
    if (sym.type != kShtSymtab) continue;
    if (sym.entsize != kSymSize)
      return Status::bad_input("cubin: symbol size " + std::to_string(sym.entsize) + " (expected 24)");
    if (sym.link >= c.sections_.size()) return Status::bad_input("cubin: symbol name table index out of range");
    const std::string_view table = c.section_data(i), strtab = c.section_data(sym.link);
    for (uint64_t off = 0; off + kSymSize <= table.size(); off += kSymSize) {
      ElfSymbol e;
      const uint32_t name = load_le<uint32_t>(table, off);
      const uint8_t info = load_le<uint8_t>(table, off + 4);
      e.type = info & 0xf;
      e.binding = info >> 4;
      e.section = load_le<uint16_t>(table, off + 6);
      e.value = load_le<uint64_t>(table, off + 8);
      e.size = load_le<uint64_t>(table, off + 16);
      auto n = c_string(strtab, name);
      if (!n)
        return Status::bad_input("cubin: symbol " + std::to_string(off / kSymSize) +
                                 " has a name outside its string table");
      e.name = std::move(*n);
      c.symbols_.push_back(std::move(e));
    }
    break;  // one symbol table per cubin
  }
  return c;
}

std::optional<size_t> Cubin::find_section(std::string_view name) const {
  for (size_t i = 0; i < sections_.size(); ++i)
    if (sections_[i].name == name) return i;
  return std::nullopt;
}

std::string_view Cubin::section_data(size_t index) const {
  if (index >= sections_.size() || sections_[index].type == kShtNobits) return {};
  return std::string_view(image_).substr(static_cast<size_t>(sections_[index].offset),
                                         static_cast<size_t>(sections_[index].size));
}

Result<std::vector<ElfRelocation>> Cubin::relocations_for(size_t target) const {
  std::vector<ElfRelocation> out;
  for (size_t i = 0; i < sections_.size(); ++i) {
    const ElfSection& r = sections_[i];
    if ((r.type != kShtRela && r.type != kShtRel) || r.info != target) continue;
    const bool rela = r.type == kShtRela;
    const size_t size = rela ? kRelaSize : kRelSize;
    if (r.entsize != 0 && r.entsize != size)
      return Status::bad_input("cubin: section " + r.name + " has entries of " + std::to_string(r.entsize) + " bytes");
    const std::string_view data = section_data(i);
    for (uint64_t off = 0; off + size <= data.size(); off += size) {
      ElfRelocation e;
      e.offset = load_le<uint64_t>(data, off);
      const uint64_t info = load_le<uint64_t>(data, off + 8);
      e.symbol = static_cast<uint32_t>(info >> 32);
      e.type = static_cast<uint32_t>(info & 0xffffffffu);
      if (rela) {
        e.addend = load_le<int64_t>(data, off + 16);
        e.has_addend = true;
      }
      if (e.symbol >= symbols_.size())
        return Status::bad_input("cubin: relocation in " + r.name + " names symbol " + std::to_string(e.symbol) +
                                 " of " + std::to_string(symbols_.size()));
      out.push_back(e);
    }
  }
  return out;
}

std::optional<size_t> Cubin::function_section(std::string_view mangled) const {
  for (const auto& sym : symbols_)
    if (sym.type == kSttFunc && sym.name == mangled && sym.section != 0 && sym.section < sections_.size())
      return sym.section;
  return find_section(".text." + std::string(mangled));
}

std::string Cubin::function_of_section(size_t index) const {
  for (const auto& sym : symbols_)
    if (sym.type == kSttFunc && sym.section == index && !sym.name.empty()) return sym.name;
  if (index < sections_.size() && sections_[index].name.starts_with(".text.")) return sections_[index].name.substr(6);
  return {};
}

}  // namespace kda::ncu
