// Bounded, deterministic mutation fuzzing of the readers: every mutated fixture must give a clean
// error or a report, never a crash, a hang or a sanitizer report (run once with -DKDA_SANITIZE=ON).
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>

#include "ncu/analyze.h"
#include "ncu/csv_pages.h"
#include "ncu/cubin.h"
#include "ncu/dwarf_line.h"
#include "ncu/native_source.h"
#include "ncu/sass_listing.h"
#include "ncu/report_reader.h"
#include "ncu/test_fixtures.h"
#include "ncu/wire.h"
#include "util/fs.h"

namespace kda::ncu {
namespace {

std::string read(const std::string& name) {
  auto bytes = fs::read_file(testing::fixture(name));
  EXPECT_TRUE(bytes.ok());
  return bytes.ok() ? *bytes : std::string();
}

enum class Mutation { kFlipBytes, kTruncate, kInsert, kBigLength, kZeroRun };

std::string mutate(const std::string& in, std::mt19937_64& rng, Mutation kind) {
  std::string s = in;
  if (s.empty()) return s;
  std::uniform_int_distribution<size_t> pos(0, s.size() - 1);
  switch (kind) {
    case Mutation::kFlipBytes:
      for (int i = 0; i < 8; ++i) s[pos(rng)] = static_cast<char>(rng());
      break;
    case Mutation::kTruncate: s.resize(pos(rng)); break;
    case Mutation::kInsert: s.insert(pos(rng), std::string(1 + rng() % 16, static_cast<char>(rng()))); break;
    case Mutation::kBigLength: {
      // A varint/length byte pattern that claims a huge size.
      size_t p = pos(rng);
      const char big[] = {'\xff', '\xff', '\xff', '\xff', '\x0f'};
      s.replace(p, std::min<size_t>(5, s.size() - p), big, std::min<size_t>(5, s.size() - p));
      break;
    }
    case Mutation::kZeroRun: {
      size_t p = pos(rng);
      size_t n = std::min<size_t>(1 + rng() % 64, s.size() - p);
      s.replace(p, n, std::string(n, '\0'));
      break;
    }
  }
  return s;
}

// Every length prefix of the container, corrupted in turn: the framing is where hostile sizes bite.
TEST(Fuzz, ContainerLengthPrefixes) {
  std::string rep = read("saxpy.ncu-rep");
  ASSERT_TRUE(parse_ncu_rep(rep).ok());
  // Walk the framing: file header size at 4, then per block its header size and, when the payload
  // is not empty, the size prefix of its first entry.
  size_t cases = 0;
  std::vector<size_t> prefixes = {4};
  size_t pos = 8 + load_le32(rep, 4);
  while (pos + 4 <= rep.size()) {
    prefixes.push_back(pos);
    uint32_t n = load_le32(rep, pos);
    WireReader r(std::string_view(rep).substr(pos + 4, n));
    WireField f;
    uint64_t payload = 0;
    while (true) {
      auto more = r.next(&f);
      if (!more.ok() || !*more) break;
      if (f.number == 5 && f.type == WireType::kVarint) payload = f.scalar;
    }
    pos += 4 + n;
    if (payload >= 4) prefixes.push_back(pos);
    pos += payload;
  }
  ASSERT_GT(prefixes.size(), 5u);
  for (size_t p : prefixes) {
    for (uint32_t bad : {0u, 1u, 0x7fffffffu, 0xffffffffu}) {
      std::string s = rep;
      for (int i = 0; i < 4; ++i) s[p + i] = static_cast<char>((bad >> (8 * i)) & 0xff);
      auto r = parse_ncu_rep(s);
      if (!r.ok()) {
        EXPECT_EQ(r.status().kind(), ErrorKind::kBadInput);
      }
      ++cases;
    }
  }
  EXPECT_EQ(cases, prefixes.size() * 4);
}

TEST(Fuzz, NativeReaderSurvivesMutations) {
  std::string rep = read("saxpy.ncu-rep");
  std::mt19937_64 rng(20261130);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  size_t ok = 0, errors = 0;
  for (int i = 0; i < 60 && std::chrono::steady_clock::now() < deadline; ++i) {
    std::string s = mutate(rep, rng, static_cast<Mutation>(i % 5));
    auto r = parse_ncu_rep(s);
    if (r.ok()) {
      ++ok;
      // Whatever decoded must also survive analysis.
      if (!r->kernels.empty()) (void)analyze(*r);
    } else {
      ++errors;
      EXPECT_EQ(r.status().kind(), ErrorKind::kBadInput);
      EXPECT_FALSE(r.status().message().empty());
    }
  }
  EXPECT_GT(ok + errors, 0u);
  EXPECT_GT(errors, 0u);  // truncations must be detected
}

// The cubin reader and the DWARF line decoder behind the native source view: mutations of the ELF
// header, the section table and .debug_line itself give errors or notes, never a crash or a hang.
TEST(Fuzz, CubinAndLineProgramSurviveMutations) {
  auto rep = parse_ncu_rep(read("multi.ncu-rep"));
  ASSERT_TRUE(rep.ok());
  ASSERT_EQ(rep->cubins.size(), 1u);
  const std::string image = rep->cubins[0].image;
  auto cubin = Cubin::parse(image);
  ASSERT_TRUE(cubin.ok());
  const size_t line_idx = *cubin->find_section(".debug_line");
  const ElfSection& line_sec = cubin->sections()[line_idx];
  const uint64_t shoff = load_le32(image, 40);  // the table sits well below 4 GiB in a fixture
  struct Region {
    size_t begin, size;
  };
  const Region regions[] = {{0, 64},
                            {static_cast<size_t>(shoff), image.size() - static_cast<size_t>(shoff)},
                            {static_cast<size_t>(line_sec.offset), static_cast<size_t>(line_sec.size)}};
  std::mt19937_64 rng(90);
  size_t parsed = 0, rejected = 0;
  for (int i = 0; i < 300; ++i) {
    const Region& r = regions[i % 3];
    std::string window = mutate(image.substr(r.begin, r.size), rng, static_cast<Mutation>(i % 5));
    std::string s = image.substr(0, r.begin) + window + image.substr(std::min(image.size(), r.begin + r.size));
    auto c = Cubin::parse(s);
    if (!c.ok()) {
      EXPECT_EQ(c.status().kind(), ErrorKind::kBadInput);
      ++rejected;
      continue;
    }
    ++parsed;
    Report copy = *rep;  // the whole join on the mutated image: notes, never a crash
    copy.cubins[0].image = s;
    for (auto& k : copy.kernels) k.source.clear();
    attach_native_lines(copy);
    for (const auto& k : copy.kernels)
      if (!k.source.empty()) (void)analyze(copy);
  }
  EXPECT_GT(parsed, 0u);
  EXPECT_GT(rejected, 0u);

  const std::string line_bytes(cubin->section_data(line_idx));
  size_t decoded = 0;
  for (int i = 0; i < 500; ++i) {
    auto t = decode_debug_line(mutate(line_bytes, rng, static_cast<Mutation>(i % 5)));
    if (!t.ok()) {
      EXPECT_EQ(t.status().kind(), ErrorKind::kBadInput);
      continue;
    }
    ++decoded;
    for (uint64_t pc = 0; pc < 0x400; pc += 16) (void)t->lookup(-1, pc);
  }
  EXPECT_GT(decoded, 0u);

  const std::string listing =
      "\t.section\t.text._Z4smemPf,\"ax\",@progbits\n        /*0000*/                   LDC R1, c[0x0][0x28] ;\n"
      "        /*0010*/              @!PT SHFL.IDX PT, RZ, RZ, RZ, RZ ;\n";
  for (int i = 0; i < 200; ++i) (void)parse_nvdisasm_listing(mutate(listing, rng, static_cast<Mutation>(i % 5)));
}

TEST(Fuzz, CsvReadersSurviveMutations) {
  std::mt19937_64 rng(7);
  for (const char* name : {"saxpy_source.csv", "multi_source.csv", "saxpy_details.csv"}) {
    std::string text = read(name);
    for (int i = 0; i < 40; ++i) {
      std::string s = mutate(text, rng, static_cast<Mutation>(i % 5));
      auto r = parse_csv_page(s);
      if (r.ok() && !r->kernels.empty()) (void)analyze(*r);
    }
  }
  // Tiny hostile inputs.
  for (std::string s : {std::string(""), std::string("\""), std::string("ID\n"), std::string("Address\n\"0x\",\"x\"\n"),
                        std::string("\"ID\",\"Kernel Name\"\n\"\"\n\"1\",\"k\",\"extra\"\n"), std::string("NVR")}) {
    auto r = parse_csv_page(s);
    (void)r;
    auto n = parse_ncu_rep(s);
    EXPECT_FALSE(n.ok());
  }
}

}  // namespace
}  // namespace kda::ncu
