#include "ncu/dwarf_line.h"

#include <algorithm>
#include <cstring>

namespace kda::ncu {

namespace {

// DWARF constants (DWARF 5 standard, section 6.2 and 7.22).
constexpr uint8_t kLnsCopy = 1, kLnsAdvancePc = 2, kLnsAdvanceLine = 3, kLnsSetFile = 4, kLnsSetColumn = 5,
                  kLnsNegateStmt = 6, kLnsSetBasicBlock = 7, kLnsConstAddPc = 8, kLnsFixedAdvancePc = 9,
                  kLnsSetPrologueEnd = 10, kLnsSetEpilogueBegin = 11, kLnsSetIsa = 12;
constexpr uint8_t kLneEndSequence = 1, kLneSetAddress = 2, kLneDefineFile = 3;
constexpr uint64_t kLnctPath = 1, kLnctDirectoryIndex = 2;
constexpr uint64_t kFormBlock = 0x09, kFormData1 = 0x0b, kFormData2 = 0x05, kFormData4 = 0x06, kFormData8 = 0x07,
                   kFormData16 = 0x1e, kFormString = 0x08, kFormStrp = 0x0e, kFormLineStrp = 0x1f, kFormUdata = 0x0f;

Status bad(const std::string& what, uint64_t at) {
  return Status::bad_input(".debug_line: " + what + " at byte " + std::to_string(at));
}

// Bounds-checked little-endian reads over [pos, end).
class Cursor {
 public:
  Cursor(std::string_view data, uint64_t pos, uint64_t end) : data_(data), pos_(pos), end_(end) {}
  uint64_t pos() const { return pos_; }
  uint64_t end() const { return end_; }
  bool done() const { return pos_ >= end_; }

  Result<uint64_t> fixed(size_t n) {
    if (end_ - pos_ < n) return bad("truncated value", pos_);
    uint64_t v = 0;
    std::memcpy(&v, data_.data() + pos_, n);  // little-endian host
    pos_ += n;
    return v;
  }
  Result<uint64_t> uleb() {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      if (pos_ >= end_) return bad("truncated LEB128", pos_);
      const uint8_t b = static_cast<uint8_t>(data_[pos_++]);
      if (shift < 64) v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return v;
      if (shift > 70) return bad("LEB128 too long", pos_);
    }
  }
  Result<int64_t> sleb() {
    uint64_t v = 0;
    int shift = 0;
    uint8_t b = 0;
    do {
      if (pos_ >= end_) return bad("truncated LEB128", pos_);
      if (shift > 70) return bad("LEB128 too long", pos_);
      b = static_cast<uint8_t>(data_[pos_++]);
      if (shift < 64) v |= static_cast<uint64_t>(b & 0x7f) << shift;
      shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40)) v |= ~uint64_t{0} << shift;
    return static_cast<int64_t>(v);
  }
  Result<std::string_view> cstring() {
    const std::string_view rest = data_.substr(static_cast<size_t>(pos_), static_cast<size_t>(end_ - pos_));
    const size_t nul = rest.find('\0');
    if (nul == std::string_view::npos) return bad("unterminated string", pos_);
    pos_ += nul + 1;
    return rest.substr(0, nul);
  }
  Status skip(uint64_t n) {
    if (end_ - pos_ < n) return bad("skip past the end", pos_);
    pos_ += n;
    return Status::ok_status();
  }

 private:
  std::string_view data_;
  uint64_t pos_, end_;
};

std::string join_path(std::string_view dir, std::string_view name) {
  if (name.starts_with('/') || dir.empty()) return std::string(name);
  std::string out(dir);
  if (!out.ends_with('/')) out += '/';
  return out + std::string(name);
}

Result<std::string_view> string_at(std::string_view table, uint64_t off, const char* which, uint64_t at) {
  if (off >= table.size()) return bad(std::string("string offset outside ") + which, at);
  const size_t nul = table.find('\0', static_cast<size_t>(off));
  if (nul == std::string_view::npos) return bad(std::string("unterminated string in ") + which, at);
  return table.substr(static_cast<size_t>(off), nul - static_cast<size_t>(off));
}

struct EntryFormat {
  uint64_t content = 0, form = 0;
};

// One DWARF 5 directory or file entry: its path and directory index.
Status read_entry(Cursor& c, const std::vector<EntryFormat>& formats, size_t offset_size, const DwarfStrings& strings,
                  std::string_view* path, uint64_t* dir) {
  for (const auto& f : formats) {
    const uint64_t at = c.pos();
    uint64_t number = 0;
    std::string_view text;
    bool is_text = false;
    switch (f.form) {
      case kFormString: {
        KDA_ASSIGN_OR_RETURN(text, c.cstring());
        is_text = true;
        break;
      }
      case kFormStrp:
      case kFormLineStrp: {
        KDA_ASSIGN_OR_RETURN(uint64_t off, c.fixed(offset_size));
        const bool line_str = f.form == kFormLineStrp;
        KDA_ASSIGN_OR_RETURN(text, string_at(line_str ? strings.debug_line_str : strings.debug_str, off,
                                             line_str ? ".debug_line_str" : ".debug_str", at));
        is_text = true;
        break;
      }
      case kFormUdata: {
        KDA_ASSIGN_OR_RETURN(number, c.uleb());
        break;
      }
      case kFormData1: {
        KDA_ASSIGN_OR_RETURN(number, c.fixed(1));
        break;
      }
      case kFormData2: {
        KDA_ASSIGN_OR_RETURN(number, c.fixed(2));
        break;
      }
      case kFormData4: {
        KDA_ASSIGN_OR_RETURN(number, c.fixed(4));
        break;
      }
      case kFormData8: {
        KDA_ASSIGN_OR_RETURN(number, c.fixed(8));
        break;
      }
      case kFormData16: KDA_RETURN_IF_ERROR(c.skip(16)); break;
      case kFormBlock: {
        KDA_ASSIGN_OR_RETURN(uint64_t n, c.uleb());
        KDA_RETURN_IF_ERROR(c.skip(n));
        break;
      }
      default: return bad("unsupported form 0x" + std::to_string(f.form) + " in an entry format", at);
    }
    if (f.content == kLnctPath && is_text) *path = text;
    if (f.content == kLnctDirectoryIndex && !is_text) *dir = number;
  }
  return Status::ok_status();
}

Result<std::vector<EntryFormat>> read_formats(Cursor& c) {
  KDA_ASSIGN_OR_RETURN(uint64_t count, c.fixed(1));
  std::vector<EntryFormat> out;
  for (uint64_t i = 0; i < count; ++i) {
    EntryFormat f;
    KDA_ASSIGN_OR_RETURN(f.content, c.uleb());
    KDA_ASSIGN_OR_RETURN(f.form, c.uleb());
    out.push_back(f);
  }
  return out;
}

// A line-number program unit's header (DWARF 2-5, section 6.2.4): what the program needs to run.
struct LineHeader {
  uint64_t unit_end = 0, program_start = 0, version = 0;
  size_t offset_size = 4;
  uint64_t min_inst_length = 0, line_range = 0, opcode_base = 0;
  int line_base = 0;
  std::vector<uint8_t> std_lengths;  // operands of each standard opcode
};

// Reads the header of the unit at `start`; leaves `c` bounded by the unit, at its file tables.
Result<LineHeader> read_line_header(Cursor& c, std::string_view data, uint64_t start) {
  LineHeader h;
  KDA_ASSIGN_OR_RETURN(uint64_t length, c.fixed(4));
  if (length == 0xffffffffu) {
    KDA_ASSIGN_OR_RETURN(length, c.fixed(8));
    h.offset_size = 8;
  } else if (length >= 0xfffffff0u) {
    return bad("reserved unit length", start);
  }
  if (length > data.size() - c.pos()) return bad("unit length past the end of the section", start);
  h.unit_end = c.pos() + length;
  c = Cursor(data, c.pos(), h.unit_end);
  KDA_ASSIGN_OR_RETURN(h.version, c.fixed(2));
  if (h.version < 2 || h.version > 5) return bad("unsupported DWARF version " + std::to_string(h.version), start);
  if (h.version >= 5) {
    KDA_ASSIGN_OR_RETURN(uint64_t address_size, c.fixed(1));
    KDA_ASSIGN_OR_RETURN(uint64_t selector_size, c.fixed(1));
    (void)address_size;
    (void)selector_size;
  }
  KDA_ASSIGN_OR_RETURN(uint64_t header_length, c.fixed(h.offset_size));
  if (header_length > h.unit_end - c.pos()) return bad("header length past the end of the unit", start);
  h.program_start = c.pos() + header_length;
  KDA_ASSIGN_OR_RETURN(h.min_inst_length, c.fixed(1));
  if (h.version >= 4) KDA_RETURN_IF_ERROR(c.skip(1));  // maximum_operations_per_instruction (VLIW only)
  KDA_ASSIGN_OR_RETURN(uint64_t default_is_stmt, c.fixed(1));
  (void)default_is_stmt;
  KDA_ASSIGN_OR_RETURN(uint64_t line_base_raw, c.fixed(1));
  h.line_base = static_cast<int8_t>(line_base_raw);
  KDA_ASSIGN_OR_RETURN(h.line_range, c.fixed(1));
  KDA_ASSIGN_OR_RETURN(h.opcode_base, c.fixed(1));
  if (h.line_range == 0) return bad("line_range is 0", start);
  if (h.opcode_base == 0) return bad("opcode_base is 0", start);
  h.std_lengths.assign(h.opcode_base, 0);
  for (uint64_t i = 1; i < h.opcode_base; ++i) {
    KDA_ASSIGN_OR_RETURN(uint64_t n, c.fixed(1));
    h.std_lengths[i] = static_cast<uint8_t>(n);
  }
  return h;
}

// The unit's file numbers as indices into table->files, and its include directories.
struct FileTable {
  std::vector<uint32_t> ids;
  std::vector<std::string> dirs;
  void add(LineTable* table, std::string_view name, uint64_t dir) {
    std::string_view d = dir < dirs.size() ? std::string_view(dirs[dir]) : std::string_view();
    table->files.push_back(join_path(d, name));
    ids.push_back(static_cast<uint32_t>(table->files.size() - 1));
  }
};

// The directory and file tables after the header (DWARF 2-4: null-terminated lists; 5: entry formats
// and counted lists).
Status read_file_table(Cursor& c, const LineHeader& h, const DwarfStrings& strings, LineTable* table,
                       FileTable& files) {
  auto add_file = [&](std::string_view name, uint64_t dir) { files.add(table, name, dir); };
  if (h.version <= 4) {
    files.dirs.emplace_back();  // directory 0: the compilation directory, not recorded here
    while (true) {
      KDA_ASSIGN_OR_RETURN(std::string_view d, c.cstring());
      if (d.empty()) break;
      files.dirs.emplace_back(d);
    }
    files.ids.push_back(0);  // file numbers start at 1
    while (true) {
      KDA_ASSIGN_OR_RETURN(std::string_view name, c.cstring());
      if (name.empty()) break;
      KDA_ASSIGN_OR_RETURN(uint64_t dir, c.uleb());
      KDA_RETURN_IF_ERROR(c.uleb().status());  // modification time
      KDA_RETURN_IF_ERROR(c.uleb().status());  // length
      add_file(name, dir);
    }
  } else {
    // DWARF 5: a directory table, then a file table, each an entry format list and a counted list.
    auto read_table = [&](const std::string& what, const auto& take) -> Status {
      KDA_ASSIGN_OR_RETURN(auto formats, read_formats(c));
      KDA_ASSIGN_OR_RETURN(uint64_t count, c.uleb());
      for (uint64_t i = 0; i < count; ++i) {
        if (c.done()) return bad(what + " table past the end of the header", c.pos());
        std::string_view path;
        uint64_t dir = 0;
        KDA_RETURN_IF_ERROR(read_entry(c, formats, h.offset_size, strings, &path, &dir));
        take(path, dir);
      }
      return {};
    };
    KDA_RETURN_IF_ERROR(
        read_table("directory", [&](std::string_view path, uint64_t) { files.dirs.emplace_back(path); }));
    KDA_RETURN_IF_ERROR(read_table("file", add_file));
  }
  return {};
}

// Decodes one unit starting at `start`; returns the offset after it.
Result<uint64_t> decode_unit(std::string_view data, uint64_t start,
                             const std::unordered_map<uint64_t, AddressRelocation>& relocs, const DwarfStrings& strings,
                             LineTable* table) {
  Cursor c(data, start, data.size());
  KDA_ASSIGN_OR_RETURN(const LineHeader h, read_line_header(c, data, start));
  const uint64_t unit_end = h.unit_end, min_inst_length = h.min_inst_length, line_range = h.line_range,
                 opcode_base = h.opcode_base, version = h.version;
  const int line_base = h.line_base;
  const std::vector<uint8_t>& std_lengths = h.std_lengths;

  // File table: unit file number -> index into table->files.
  FileTable files;
  KDA_RETURN_IF_ERROR(read_file_table(c, h, strings, table, files));
  std::vector<uint32_t>& file_ids = files.ids;
  auto add_file = [&](std::string_view name, uint64_t dir) { files.add(table, name, dir); };

  // The line program (DWARF 5 section 6.2.5).
  Cursor p(data, h.program_start, unit_end);
  LineSequence seq;
  uint64_t address = 0;
  uint32_t file = 1;
  int64_t line = 1;
  auto reset = [&] {
    seq = LineSequence{};
    address = 0;
    file = 1;
    line = 1;
  };
  auto emit = [&] {
    LineRow row;
    row.address = address;
    row.file = file < file_ids.size() ? file_ids[file] : 0;
    row.line = line > 0 && line < (int64_t{1} << 31) ? static_cast<int>(line) : 0;
    if (seq.rows.empty()) seq.begin = address;
    seq.rows.push_back(row);
  };
  while (!p.done()) {
    const uint64_t at = p.pos();
    KDA_ASSIGN_OR_RETURN(uint64_t opcode, p.fixed(1));
    if (opcode >= opcode_base) {  // special opcode: advance address and line, then emit a row
      const uint64_t adjusted = opcode - opcode_base;
      address += (adjusted / line_range) * min_inst_length;
      line += line_base + static_cast<int64_t>(adjusted % line_range);
      emit();
      continue;
    }
    if (opcode == 0) {  // extended opcode
      KDA_ASSIGN_OR_RETURN(uint64_t len, p.uleb());
      if (len == 0) continue;
      if (len > p.end() - p.pos()) return bad("extended opcode longer than the unit", at);
      const uint64_t next = p.pos() + len;
      KDA_ASSIGN_OR_RETURN(uint64_t sub, p.fixed(1));
      if (sub == kLneEndSequence) {
        seq.end = address;
        if (seq.rows.empty()) seq.begin = address;
        table->sequences.push_back(std::move(seq));
        reset();
      } else if (sub == kLneSetAddress) {
        const uint64_t operand = p.pos(), size = len - 1;
        if (auto it = relocs.find(operand); it != relocs.end()) {
          seq.section = it->second.section;
          address = it->second.value;
          if (it->second.add_stored && (size == 4 || size == 8)) {
            KDA_ASSIGN_OR_RETURN(uint64_t stored, p.fixed(size));
            address += stored;
          }
        } else if (size == 4 || size == 8) {
          KDA_ASSIGN_OR_RETURN(address, p.fixed(size));
        } else {
          return bad("set_address with a " + std::to_string(size) + "-byte operand", at);
        }
      } else if (sub == kLneDefineFile && version <= 4) {
        KDA_ASSIGN_OR_RETURN(std::string_view name, p.cstring());
        KDA_ASSIGN_OR_RETURN(uint64_t dir, p.uleb());
        add_file(name, dir);
      }  // set_discriminator and vendor extensions (e.g. NVIDIA's inlining records): skipped
      if (p.pos() > next) return bad("extended opcode overruns its length", at);
      p = Cursor(data, next, unit_end);
      continue;
    }
    switch (opcode) {
      case kLnsCopy: emit(); break;
      case kLnsAdvancePc: {
        KDA_ASSIGN_OR_RETURN(uint64_t n, p.uleb());
        address += n * min_inst_length;
        break;
      }
      case kLnsAdvanceLine: {
        KDA_ASSIGN_OR_RETURN(int64_t n, p.sleb());
        line += n;
        break;
      }
      case kLnsSetFile: {
        KDA_ASSIGN_OR_RETURN(uint64_t n, p.uleb());
        file = n < file_ids.size() ? static_cast<uint32_t>(n) : 0;
        break;
      }
      case kLnsSetColumn: KDA_RETURN_IF_ERROR(p.uleb().status()); break;
      case kLnsNegateStmt:
      case kLnsSetBasicBlock:
      case kLnsSetPrologueEnd:
      case kLnsSetEpilogueBegin: break;
      case kLnsConstAddPc: address += ((255 - opcode_base) / line_range) * min_inst_length; break;
      case kLnsFixedAdvancePc: {
        KDA_ASSIGN_OR_RETURN(uint64_t n, p.fixed(2));
        address += n;
        break;
      }
      case kLnsSetIsa: KDA_RETURN_IF_ERROR(p.uleb().status()); break;
      default:  // an opcode this decoder does not know: skip its ULEB operands
        for (uint8_t i = 0; i < std_lengths[opcode]; ++i) KDA_RETURN_IF_ERROR(p.uleb().status());
    }
  }
  if (!seq.rows.empty()) {  // a unit that ends without end_sequence: keep what it said
    seq.end = seq.rows.back().address;
    table->sequences.push_back(std::move(seq));
  }
  return unit_end;
}

}  // namespace

Result<LineTable> decode_debug_line(std::string_view section,
                                    const std::unordered_map<uint64_t, AddressRelocation>& address_sections,
                                    const DwarfStrings& strings) {
  LineTable table;
  table.files.emplace_back();  // index 0: unknown file
  uint64_t pos = 0;
  while (pos < section.size()) {
    // Trailing padding (zeros shorter than a unit header) ends the section.
    if (section.size() - pos < 4) break;
    KDA_ASSIGN_OR_RETURN(pos, decode_unit(section, pos, address_sections, strings, &table));
  }
  return table;
}

std::optional<LineTable::Location> LineTable::lookup(int section, uint64_t address) const {
  bool any_section = false;
  for (const auto& s : sequences) any_section = any_section || s.section >= 0;
  for (const auto& s : sequences) {
    if (any_section ? s.section != section : false) continue;
    if (s.rows.empty() || address < s.begin || address >= s.end) continue;
    auto it = std::upper_bound(s.rows.begin(), s.rows.end(), address,
                               [](uint64_t a, const LineRow& r) { return a < r.address; });
    if (it == s.rows.begin()) continue;
    const LineRow& r = *std::prev(it);
    if (r.line <= 0) return std::nullopt;
    return Location{r.file < files.size() ? std::string_view(files[r.file]) : std::string_view(), r.line};
  }
  return std::nullopt;
}

}  // namespace kda::ncu
