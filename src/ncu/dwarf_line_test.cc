#include "ncu/dwarf_line.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kda::ncu {
namespace {

// Builds .debug_line bytes by hand.
struct Bytes {
  std::string s;
  Bytes& u8(uint64_t v) {
    s.push_back(static_cast<char>(v));
    return *this;
  }
  Bytes& u16(uint64_t v) { return u8(v & 0xff).u8(v >> 8); }
  Bytes& u32(uint64_t v) { return u16(v & 0xffff).u16(v >> 16); }
  Bytes& u64(uint64_t v) { return u32(v & 0xffffffffu).u32(v >> 32); }
  Bytes& uleb(uint64_t v) {
    do {
      uint8_t b = v & 0x7f;
      v >>= 7;
      u8(b | (v ? 0x80 : 0));
    } while (v);
    return *this;
  }
  Bytes& sleb(int64_t v) {
    bool more = true;
    while (more) {
      uint8_t b = v & 0x7f;
      v >>= 7;
      more = !((v == 0 && !(b & 0x40)) || (v == -1 && (b & 0x40)));
      u8(b | (more ? 0x80 : 0));
    }
    return *this;
  }
  Bytes& str(const std::string& t) {
    s += t;
    s.push_back('\0');
    return *this;
  }
  Bytes& raw(const std::string& t) {
    s += t;
    return *this;
  }
};

constexpr int kOpcodeBase = 10, kLineBase = -5, kLineRange = 14;

std::string header_fields_v2() {  // after header_length: what nvcc emits (DWARF 2)
  Bytes h;
  h.u8(1).u8(1).u8(static_cast<uint8_t>(kLineBase)).u8(kLineRange).u8(kOpcodeBase);
  for (int n : {0, 1, 1, 1, 1, 0, 0, 0, 1}) h.u8(n);
  h.str("/src/dir").u8(0);                          // include directories
  h.str("kernel.cu").uleb(1).uleb(0).uleb(0);       // file 1 in dir 1
  h.str("/abs/other.cuh").uleb(0).uleb(0).uleb(0);  // file 2, absolute
  h.u8(0);
  return h.s;
}

std::string unit(int version, const std::string& header, const std::string& program, size_t* program_offset = nullptr) {
  Bytes body;
  body.u16(static_cast<uint64_t>(version));
  if (version >= 5) body.u8(8).u8(0);
  body.u32(header.size()).raw(header);
  Bytes out;
  out.u32(body.s.size() + program.size());
  if (program_offset) *program_offset = 4 + body.s.size();
  return out.raw(body.s).raw(program).s;
}

uint8_t special(int address_advance, int line_advance, int opcode_base = kOpcodeBase) {
  return static_cast<uint8_t>((line_advance - kLineBase) + kLineRange * address_advance + opcode_base);
}

// The smem kernel's sequence from the multi fixture, plus a richer one: set_address (relocated),
// advance_line, copy, special opcodes, advance_pc, set_file, a vendor extended opcode, end_sequence.
std::string two_sequences(size_t* first_operand, size_t* second_operand) {
  Bytes p;
  p.u8(0).uleb(9).u8(2);
  const size_t op1 = p.s.size();
  p.u64(0);
  p.u8(4).uleb(1).u8(3).sleb(1).u8(1);      // file 1, line 2, copy
  p.u8(2).uleb(0x280).u8(0).uleb(1).u8(1);  // advance to 0x280, end_sequence

  p.u8(0).uleb(9).u8(2);
  const size_t op2 = p.s.size();
  p.u64(0);
  p.u8(4).uleb(1).u8(3).sleb(92).u8(1);        // line 93 at 0
  p.u8(special(16, 7));                        // 0x10: line 100
  p.u8(special(16, 4));                        // 0x20: line 104
  p.u8(3).sleb(-3).u8(2).uleb(32).u8(1);       // 0x40: line 101
  p.u8(0).uleb(3).u8(0x90).u8(0x2e).u8(0x01);  // NVIDIA extension (skipped)
  p.u8(4).uleb(2).u8(special(16, 0));          // 0x50: other.cuh line 101
  p.u8(4).uleb(1).u8(3).sleb(-50).u8(1);       // 0x50 again: kernel.cu line 51 (the later row wins)
  p.u8(9).u16(0x30).u8(1);                     // fixed_advance_pc to 0x80, line 51
  p.u8(2).uleb(0x40).u8(0).uleb(1).u8(1);      // end at 0xc0
  size_t header_at = 0;
  std::string u = unit(2, header_fields_v2(), p.s, &header_at);
  *first_operand = header_at + op1;
  *second_operand = header_at + op2;
  return u;
}

TEST(DwarfLine, DecodesSequencesAndResolvesRelocatedAddresses) {
  size_t op1 = 0, op2 = 0;
  std::string section = two_sequences(&op1, &op2);
  std::unordered_map<uint64_t, AddressRelocation> relocs{{op1, {19, 0}}, {op2, {20, 0}}};
  auto t = decode_debug_line(section, relocs);
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->sequences.size(), 2u);
  EXPECT_EQ(t->sequences[0].section, 19);
  EXPECT_EQ(t->sequences[0].end, 0x280u);
  EXPECT_EQ(t->sequences[1].section, 20);
  EXPECT_EQ(t->sequences[1].end, 0xc0u);

  for (uint64_t pc = 0; pc < 0x280; pc += 16) {
    auto loc = t->lookup(19, pc);
    ASSERT_TRUE(loc.has_value()) << pc;
    EXPECT_EQ(loc->line, 2);
    EXPECT_EQ(loc->file, "/src/dir/kernel.cu");
  }
  EXPECT_FALSE(t->lookup(19, 0x280).has_value());  // past the end of the sequence
  struct Want {
    uint64_t pc;
    int line;
    const char* file;
  };
  for (const Want& w : {Want{0, 93, "/src/dir/kernel.cu"}, Want{0x10, 100, "/src/dir/kernel.cu"},
                        Want{0x20, 104, "/src/dir/kernel.cu"}, Want{0x30, 104, "/src/dir/kernel.cu"},
                        Want{0x40, 101, "/src/dir/kernel.cu"}, Want{0x50, 51, "/src/dir/kernel.cu"},
                        Want{0x90, 51, "/src/dir/kernel.cu"}, Want{0xb0, 51, "/src/dir/kernel.cu"}}) {
    auto loc = t->lookup(20, w.pc);
    ASSERT_TRUE(loc.has_value()) << w.pc;
    EXPECT_EQ(loc->line, w.line) << w.pc;
    EXPECT_EQ(loc->file, w.file) << w.pc;
  }
  EXPECT_FALSE(t->lookup(21, 0).has_value());  // no sequence for that section
}

TEST(DwarfLine, RelRelocationsAddTheStoredAddress) {
  size_t op1 = 0, op2 = 0;
  std::string section = two_sequences(&op1, &op2);
  section[op2] = 0x40;  // stored operand 0x40 (the implicit addend of an SHT_REL entry)
  auto t = decode_debug_line(section, {{op1, {19, 0, true}}, {op2, {20, 0x1000, true}}});
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->sequences[1].begin, 0x1040u);
  auto loc = t->lookup(20, 0x1040);
  ASSERT_TRUE(loc.has_value());
  EXPECT_EQ(loc->line, 93);
}

TEST(DwarfLine, WithoutRelocationsTheStoredAddressIsUsed) {
  size_t op1 = 0, op2 = 0;
  auto t = decode_debug_line(two_sequences(&op1, &op2));
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->sequences[0].section, -1);
  auto loc = t->lookup(5, 0x10);  // sequences without a section match any
  ASSERT_TRUE(loc.has_value());
  EXPECT_EQ(loc->line, 2);  // the first sequence covering the address
}

TEST(DwarfLine, DecodesDwarf5FileTables) {
  const std::string line_str = std::string("/v5/dir\0k5.cu\0", 14);
  Bytes h;
  h.u8(1).u8(1).u8(1).u8(static_cast<uint8_t>(kLineBase)).u8(kLineRange).u8(13);  // v4+ has max ops; opcode_base 13
  for (int n : {0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1}) h.u8(n);
  h.u8(1).uleb(1).uleb(0x1f);  // directories: path as line_strp
  h.uleb(1).u32(0);
  h.u8(3).uleb(1).uleb(0x1f).uleb(2).uleb(0x0b).uleb(5).uleb(0x1e);  // files: path, dir index (data1), MD5
  h.uleb(1).u32(8).u8(0).raw(std::string(16, 'm'));
  Bytes p;
  p.u8(0).uleb(9).u8(2).u64(0x100);
  p.u8(3).sleb(6).u8(1);                   // line 7 at 0x100 (file register 1: not in this table)
  p.u8(4).uleb(0).u8(special(16, 1, 13));  // DWARF 5 numbers files from 0: line 8 of k5.cu at 0x110
  p.u8(12).uleb(0);                        // set_isa (opcode 12 exists with opcode_base 13)
  p.u8(2).uleb(16).u8(0).uleb(1).u8(1);
  auto t = decode_debug_line(unit(5, h.s, p.s), {}, DwarfStrings{{}, line_str});
  ASSERT_TRUE(t.ok()) << t.status().message();
  auto loc = t->lookup(0, 0x110);
  ASSERT_TRUE(loc.has_value());
  EXPECT_EQ(loc->line, 8);
  EXPECT_EQ(loc->file, "/v5/dir/k5.cu");
}

TEST(DwarfLine, MalformedInputIsAnError) {
  size_t op1 = 0, op2 = 0;
  const std::string good = two_sequences(&op1, &op2);
  for (size_t cut = 4; cut < good.size(); ++cut)  // the unit length then runs past the end
    EXPECT_FALSE(decode_debug_line(good.substr(0, cut)).ok()) << cut;
  std::string v9 = good;
  v9[4] = 9;
  EXPECT_NE(decode_debug_line(v9).status().message().find("version 9"), std::string::npos);
  std::string zero_range = good;
  zero_range[4 + 2 + 4 + 3] = 0;  // line_range
  EXPECT_NE(decode_debug_line(zero_range).status().message().find("line_range"), std::string::npos);
  std::string long_unit = good;
  long_unit[3] = 0x7f;
  EXPECT_EQ(decode_debug_line(long_unit).status().kind(), ErrorKind::kBadInput);
  Bytes ext;  // an extended opcode claiming more bytes than the unit has
  ext.u8(0).uleb(1000).u8(2);
  EXPECT_EQ(decode_debug_line(unit(2, header_fields_v2(), ext.s)).status().kind(), ErrorKind::kBadInput);
}

}  // namespace
}  // namespace kda::ncu
