#include "elf/elf_file.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "util/bytes.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace kda::elf {

const DynamicSymbol* ElfInfo::find_export(std::string_view name) const {
  for (const auto& s : exports)
    if (s.name == name) return &s;
  return nullptr;
}

const DynamicSymbol* ElfInfo::find_import(std::string_view name) const {
  for (const auto& s : imports)
    if (s.name == name) return &s;
  return nullptr;
}

namespace {

// ELF constants (from the System V gABI and the GNU extensions), spelled out to need no <elf.h>.
constexpr uint16_t kEtDyn = 3;
constexpr uint32_t kPtLoad = 1, kPtDynamic = 2, kPtNote = 4, kPtGnuStack = 0x6474e551, kPtGnuRelro = 0x6474e552;
constexpr uint32_t kPfX = 1;
constexpr int64_t kDtNull = 0, kDtNeeded = 1, kDtHash = 4, kDtStrtab = 5, kDtSymtab = 6, kDtStrsz = 10, kDtSyment = 11,
                  kDtInit = 12, kDtSoname = 14, kDtRpath = 15, kDtTextrel = 22, kDtBindNow = 24, kDtInitArraySz = 27,
                  kDtRunpath = 29, kDtFlags = 30, kDtGnuHash = 0x6ffffef5, kDtVersym = 0x6ffffff0,
                  kDtFlags1 = 0x6ffffffb, kDtVerdef = 0x6ffffffc, kDtVerdefnum = 0x6ffffffd, kDtVerneed = 0x6ffffffe,
                  kDtVerneednum = 0x6fffffff;
constexpr uint64_t kDfBindNow = 0x8, kDf1Now = 0x1;
constexpr size_t kSymSize = 24;
// Caps that keep a hostile file from making us loop or allocate without bound.
constexpr uint64_t kMaxSymbols = 1u << 22;
constexpr uint64_t kMaxDynEntries = 1u << 16;
constexpr uint64_t kMaxVersionEntries = 1u << 16;

class Image {
 public:
  explicit Image(std::string_view b) : b_(b) {}
  size_t size() const { return b_.size(); }
  bool has(uint64_t off, uint64_t len) const { return util::fits(b_, off, len); }
  template <typename T>
  std::optional<T> get(uint64_t off) const {
    if (!has(off, sizeof(T))) return std::nullopt;
    return util::load_le<T>(b_, off);  // host is little-endian (checked at load)
  }
  // NUL-terminated string starting at off, not crossing `limit`.
  std::optional<std::string> cstr(uint64_t off, uint64_t limit) const { return util::c_string(b_, off, limit); }

 private:
  std::string_view b_;
};

struct Segment {
  uint64_t offset, vaddr, filesz;
};

struct Parser {
  Image img;
  std::vector<Segment> loads;
  uint64_t strtab_off = 0, strtab_size = 0;
  bool have_strtab = false;

  // Virtual address -> file offset through the PT_LOAD segments; nullopt if unmapped.
  std::optional<uint64_t> to_offset(uint64_t vaddr, uint64_t len = 1) const {
    for (const auto& s : loads) {
      if (vaddr >= s.vaddr && vaddr - s.vaddr < s.filesz && len <= s.filesz - (vaddr - s.vaddr)) {
        uint64_t off = s.offset + (vaddr - s.vaddr);
        if (img.has(off, len)) return off;
      }
    }
    return std::nullopt;
  }
  std::optional<std::string> str(uint64_t index) const {
    if (!have_strtab || index >= strtab_size) return std::nullopt;
    return img.cstr(strtab_off + index, strtab_off + strtab_size);
  }
};

Status bad(const std::string& what) { return Status::bad_input("malformed ELF: " + what); }

// Number of dynamic symbols from DT_GNU_HASH (highest symbol index reachable through the chains).
std::optional<uint64_t> gnu_hash_count(const Parser& p, uint64_t vaddr) {
  auto off = p.to_offset(vaddr, 16);
  if (!off) return std::nullopt;
  uint32_t nbuckets = *p.img.get<uint32_t>(*off);
  uint32_t symoffset = *p.img.get<uint32_t>(*off + 4);
  uint32_t bloom_size = *p.img.get<uint32_t>(*off + 8);
  uint64_t buckets = *off + 16 + uint64_t{bloom_size} * 8;
  if (!p.img.has(buckets, uint64_t{nbuckets} * 4)) return std::nullopt;
  uint64_t chains = buckets + uint64_t{nbuckets} * 4;
  uint32_t max_sym = 0;
  for (uint32_t i = 0; i < nbuckets; ++i) max_sym = std::max(max_sym, *p.img.get<uint32_t>(buckets + uint64_t{i} * 4));
  if (max_sym == 0) return symoffset;  // no hashed symbols
  if (max_sym < symoffset) return std::nullopt;
  for (uint64_t idx = max_sym; idx - max_sym < kMaxSymbols; ++idx) {
    auto h = p.img.get<uint32_t>(chains + (idx - symoffset) * 4);
    if (!h) return std::nullopt;
    if (*h & 1u) return idx + 1;
  }
  return std::nullopt;
}

SymbolType sym_type(uint8_t info) {
  switch (info & 0xf) {
    case 0: return SymbolType::kNoType;
    case 1: return SymbolType::kObject;
    case 2: return SymbolType::kFunc;
    case 6: return SymbolType::kTls;
    case 10: return SymbolType::kIfunc;
    default: return SymbolType::kOther;
  }
}

SymbolBinding sym_binding(uint8_t info) {
  switch (info >> 4) {
    case 0: return SymbolBinding::kLocal;
    case 1: return SymbolBinding::kGlobal;
    case 2: return SymbolBinding::kWeak;
    case 10: return SymbolBinding::kUnique;
    default: return SymbolBinding::kOther;
  }
}

}  // namespace

namespace {

// The first value of a dynamic tag, if the segment has it.
std::optional<uint64_t> first_tag(const std::vector<std::pair<int64_t, uint64_t>>& dyn, int64_t tag) {
  for (const auto& [t, v] : dyn)
    if (t == tag) return v;
  return std::nullopt;
}

// The string table, then what the dynamic tags say: needed libraries, soname, run paths, binding,
// text relocations and initialisers.
Status read_dynamic_tags(Parser& p, const std::vector<std::pair<int64_t, uint64_t>>& dyn, ElfInfo& info) {
  auto strtab = first_tag(dyn, kDtStrtab);
  auto strsz = first_tag(dyn, kDtStrsz);
  if (strtab && strsz) {
    auto off = p.to_offset(*strtab, *strsz);
    if (!off) return bad("DT_STRTAB out of bounds");
    p.strtab_off = *off;
    p.strtab_size = *strsz;
    p.have_strtab = true;
  }
  auto need_str = [&](uint64_t idx, const char* what) -> Result<std::string> {
    auto s = p.str(idx);
    if (!s) return bad(std::string(what) + " string out of bounds");
    return *s;
  };
  for (const auto& [tag, val] : dyn) {
    if (tag == kDtNeeded) {
      KDA_ASSIGN_OR_RETURN(std::string s, need_str(val, "DT_NEEDED"));
      info.needed.push_back(std::move(s));
    } else if (tag == kDtSoname) {
      KDA_ASSIGN_OR_RETURN(info.soname, need_str(val, "DT_SONAME"));
    } else if (tag == kDtRpath || tag == kDtRunpath) {
      KDA_ASSIGN_OR_RETURN(std::string s, need_str(val, "DT_RUNPATH"));
      info.rpath.push_back(std::move(s));
    } else if (tag == kDtBindNow) {
      info.bind_now = true;
    } else if (tag == kDtFlags && (val & kDfBindNow)) {
      info.bind_now = true;
    } else if (tag == kDtFlags1 && (val & kDf1Now)) {
      info.bind_now = true;
    } else if (tag == kDtTextrel) {
      info.text_relocations = true;
    } else if (tag == kDtInit) {
      info.init_functions += 1;
    } else if (tag == kDtInitArraySz) {
      info.init_functions += val / 8;
    }
  }
  return Status::ok_status();
}

// Symbol version index -> name, from DT_VERNEED (imports) and DT_VERDEF (exports), visiting at most
// kMaxVersionEntries entries in all.
Result<std::map<uint16_t, std::string>> read_version_names(const Parser& p,
                                                           const std::vector<std::pair<int64_t, uint64_t>>& dyn) {
  const Image& img = p.img;
  std::map<uint16_t, std::string> version_names;
  uint64_t budget = kMaxVersionEntries;  // total entries visited, outer and aux together
  if (auto vn = first_tag(dyn, kDtVerneed)) {
    uint64_t count = std::min<uint64_t>(first_tag(dyn, kDtVerneednum).value_or(0), kMaxVersionEntries);
    auto off = p.to_offset(*vn, 16);
    for (uint64_t i = 0; off && i < count; ++i) {
      auto cnt = img.get<uint16_t>(*off + 2);
      auto aux = img.get<uint32_t>(*off + 8);
      auto next = img.get<uint32_t>(*off + 12);
      if (!cnt || !aux || !next) return bad("DT_VERNEED entry out of bounds");
      uint64_t a = *off + *aux;
      for (uint16_t j = 0; j < *cnt; ++j) {
        if (budget-- == 0) return bad("too many DT_VERNEED entries");
        auto other = img.get<uint16_t>(a + 6);
        auto name = img.get<uint32_t>(a + 8);
        auto anext = img.get<uint32_t>(a + 12);
        if (!other || !name || !anext) return bad("DT_VERNEED aux entry out of bounds");
        if (auto s = p.str(*name)) version_names[*other & 0x7fff] = *s;
        if (*anext == 0) break;
        a += *anext;
      }
      if (*next == 0) break;
      *off += *next;
    }
  }
  if (auto vd = first_tag(dyn, kDtVerdef)) {
    uint64_t count = std::min<uint64_t>(first_tag(dyn, kDtVerdefnum).value_or(0), kMaxVersionEntries);
    auto off = p.to_offset(*vd, 20);
    for (uint64_t i = 0; off && i < count; ++i) {
      auto ndx = img.get<uint16_t>(*off + 4);
      auto cnt = img.get<uint16_t>(*off + 6);
      auto aux = img.get<uint32_t>(*off + 12);
      auto next = img.get<uint32_t>(*off + 16);
      if (!ndx || !cnt || !aux || !next) return bad("DT_VERDEF entry out of bounds");
      if (budget-- == 0) return bad("too many DT_VERDEF entries");
      if (*cnt > 0) {
        auto name = img.get<uint32_t>(*off + *aux);
        if (!name) return bad("DT_VERDEF aux entry out of bounds");
        if (auto s = p.str(*name)) version_names[*ndx & 0x7fff] = *s;
      }
      if (*next == 0) break;
      *off += *next;
    }
  }
  return version_names;
}

}  // namespace

namespace {

// The ELF64 little-endian identification and the program-header table, bounds-checked as a table
// (each segment's own range is the caller's to check).
struct ProgramHeader {
  uint32_t type, flags;
  uint64_t offset, vaddr, filesz, memsz;
};
Result<std::vector<ProgramHeader>> program_headers(const Image& img, std::string_view bytes) {
  if (!img.has(0, 64) || std::memcmp(bytes.data(),
                                     "\x7f"
                                     "ELF",
                                     4) != 0)
    return bad("not an ELF file");
  if (bytes[4] != 2) return bad("not a 64-bit ELF (EI_CLASS)");
  if (bytes[5] != 1) return bad("not little-endian (EI_DATA)");
  const uint64_t phoff = *img.get<uint64_t>(32);
  const uint16_t phentsize = *img.get<uint16_t>(54), phnum = *img.get<uint16_t>(56);
  if (phnum == 0) return bad("no program headers");
  if (phentsize < 56) return bad("program header entry size " + std::to_string(phentsize));
  if (!img.has(phoff, uint64_t{phnum} * phentsize)) return bad("program headers out of bounds");
  std::vector<ProgramHeader> out;
  for (uint16_t i = 0; i < phnum; ++i) {
    const uint64_t ph = phoff + uint64_t{i} * phentsize;
    out.push_back({*img.get<uint32_t>(ph), *img.get<uint32_t>(ph + 4), *img.get<uint64_t>(ph + 8),
                   *img.get<uint64_t>(ph + 16), *img.get<uint64_t>(ph + 32), *img.get<uint64_t>(ph + 40)});
  }
  return out;
}

}  // namespace

Result<ElfInfo> parse_elf(std::string_view bytes) {
  Parser p{Image(bytes)};
  const Image& img = p.img;
  KDA_ASSIGN_OR_RETURN(const std::vector<ProgramHeader> headers, program_headers(img, bytes));
  ElfInfo info;
  info.shared_object = *img.get<uint16_t>(16) == kEtDyn;
  info.machine = *img.get<uint16_t>(18);

  std::optional<Segment> dynamic;
  bool saw_stack = false;
  for (const ProgramHeader& h : headers) {
    const uint32_t type = h.type, flags = h.flags;
    const Segment s{h.offset, h.vaddr, h.filesz};
    if (type == kPtLoad) p.loads.push_back(s);
    if (type == kPtDynamic) dynamic = s;
    if (type == kPtGnuRelro) info.relro = true;
    if (type == kPtGnuStack) {
      saw_stack = true;
      info.exec_stack = (flags & kPfX) != 0;
    }
  }
  if (!saw_stack) info.exec_stack = true;
  if (!dynamic) return info;  // a static executable or an object file: nothing dynamic to audit
  info.has_dynamic = true;
  if (!img.has(dynamic->offset, dynamic->filesz)) return bad("PT_DYNAMIC out of bounds");

  // Pass 1: collect the dynamic entries.
  std::vector<std::pair<int64_t, uint64_t>> dyn;
  for (uint64_t i = 0; i < dynamic->filesz / 16 && i < kMaxDynEntries; ++i) {
    int64_t tag = *img.get<int64_t>(dynamic->offset + i * 16);
    uint64_t val = *img.get<uint64_t>(dynamic->offset + i * 16 + 8);
    if (tag == kDtNull) break;
    dyn.emplace_back(tag, val);
  }
  auto first = [&](int64_t tag) { return first_tag(dyn, tag); };
  KDA_RETURN_IF_ERROR(read_dynamic_tags(p, dyn, info));

  // Version names: index -> name, from DT_VERNEED (imports) and DT_VERDEF (exports).
  KDA_ASSIGN_OR_RETURN(const auto version_names, read_version_names(p, dyn));

  // The dynamic symbol table. Its length is not recorded in the dynamic segment: take it from the
  // hash tables the loader itself uses.
  auto symtab = first(kDtSymtab);
  if (!symtab) return info;
  if (first(kDtSyment).value_or(kSymSize) != kSymSize) return bad("DT_SYMENT is not 24");
  std::optional<uint64_t> nsyms;
  if (auto gh = first(kDtGnuHash)) nsyms = gnu_hash_count(p, *gh);
  if (!nsyms) {
    if (auto h = first(kDtHash)) {
      if (auto off = p.to_offset(*h, 8)) nsyms = *img.get<uint32_t>(*off + 4);
    }
  }
  if (!nsyms) return bad("no usable DT_GNU_HASH or DT_HASH to size the dynamic symbol table");
  if (*nsyms > kMaxSymbols) return bad("implausible dynamic symbol count " + std::to_string(*nsyms));
  auto sym_off = p.to_offset(*symtab, *nsyms * kSymSize);
  if (!sym_off) return bad("DT_SYMTAB out of bounds");
  std::optional<uint64_t> versym_off;
  if (auto vs = first(kDtVersym)) versym_off = p.to_offset(*vs, *nsyms * 2);

  for (uint64_t i = 1; i < *nsyms; ++i) {  // symbol 0 is the reserved null symbol
    uint64_t s = *sym_off + i * kSymSize;
    uint32_t name_idx = *img.get<uint32_t>(s);
    uint8_t st_info = *img.get<uint8_t>(s + 4);
    uint8_t st_other = *img.get<uint8_t>(s + 5);
    uint16_t shndx = *img.get<uint16_t>(s + 6);
    DynamicSymbol sym;
    auto name = p.str(name_idx);
    if (!name) return bad("symbol " + std::to_string(i) + " name out of bounds");
    sym.name = std::move(*name);
    if (sym.name.empty()) continue;
    sym.type = sym_type(st_info);
    sym.binding = sym_binding(st_info);
    sym.defined = shndx != 0;
    if (versym_off) {
      uint16_t v = *img.get<uint16_t>(*versym_off + i * 2) & 0x7fff;
      if (v > 1) {
        auto it = version_names.find(v);
        if (it != version_names.end()) sym.version = it->second;
      }
    }
    if (!sym.defined) {
      info.imports.push_back(std::move(sym));
    } else {
      unsigned vis = st_other & 3;  // 0 default, 3 protected export; 1 internal, 2 hidden do not
      bool global = sym.binding == SymbolBinding::kGlobal || sym.binding == SymbolBinding::kWeak ||
                    sym.binding == SymbolBinding::kUnique;
      if (global && (vis == 0 || vis == 3)) info.exports.push_back(std::move(sym));
    }
  }
  return info;
}

Result<std::string> loaded_image_digest(std::string_view bytes) {
  const Image img(bytes);
  KDA_ASSIGN_OR_RETURN(const std::vector<ProgramHeader> headers, program_headers(img, bytes));
  std::vector<ProgramHeader> loads;
  std::vector<std::pair<uint64_t, uint64_t>> notes;  // file [offset, end)
  for (size_t i = 0; i < headers.size(); ++i) {
    const ProgramHeader& l = headers[i];
    if (!img.has(l.offset, l.filesz)) return bad("segment " + std::to_string(i) + " out of bounds");
    if (l.type == kPtLoad) loads.push_back(l);
    if (l.type == kPtNote) notes.emplace_back(l.offset, l.offset + l.filesz);
  }
  Sha256 h;
  for (const ProgramHeader& l : loads) {
    h.update_field(fmt::format("{:x} {:x} {:x} {:x}", l.vaddr, l.filesz, l.memsz, l.flags));
    std::string seg(bytes.substr(l.offset, l.filesz));
    // The ELF header's section-table fields (e_shoff, e_shnum, e_shstrndx) describe what is not
    // loaded; a longer source file name moves them. Zeroed where the segment maps the header.
    auto zero = [&](uint64_t begin, uint64_t end) {
      const uint64_t from = std::max(begin, l.offset), to = std::min(end, l.offset + l.filesz);
      if (from < to) std::fill(seg.begin() + (from - l.offset), seg.begin() + (to - l.offset), '\0');
    };
    for (const auto& [begin, end] : notes) zero(begin, end);
    zero(0x28, 0x30);  // e_shoff
    zero(0x3c, 0x40);  // e_shnum, e_shstrndx
    h.update_field(seg);
  }
  return h.hex_digest();
}

Result<std::string> loaded_image_digest_file(const std::filesystem::path& path) {
  KDA_ASSIGN_OR_RETURN(std::string bytes, fs::read_file(path));
  auto r = loaded_image_digest(bytes);
  if (!r.ok()) return r.status().with_context(path.string());
  return r;
}

Result<ElfInfo> read_elf_file(const std::filesystem::path& path) {
  KDA_ASSIGN_OR_RETURN(std::string bytes, fs::read_file(path));
  auto r = parse_elf(bytes);
  if (!r.ok()) return r.status().with_context(path.string());
  return r;
}

}  // namespace kda::elf
