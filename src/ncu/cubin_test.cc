#include "ncu/cubin.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "ncu/report_reader.h"
#include "ncu/test_fixtures.h"

namespace kda::ncu {
namespace {

// The sm_90 cubin embedded in the multi fixture (saxpy and smem, built with -lineinfo).
const std::string& multi_cubin() {
  static const std::string image = [] {
    auto rep = read_ncu_rep(testing::fixture("multi.ncu-rep"));
    EXPECT_TRUE(rep.ok()) << rep.status().message();
    return rep.ok() && !rep->cubins.empty() ? rep->cubins[0].image : std::string();
  }();
  return image;
}

TEST(Cubin, ReadsSectionsSymbolsAndRelocationsOfARealCubin) {
  auto c = Cubin::parse(multi_cubin());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->machine(), 190);  // EM_CUDA
  auto text = c->function_section("_Z4smemPf");
  ASSERT_TRUE(text.has_value());
  EXPECT_EQ(c->sections()[*text].name, ".text._Z4smemPf");
  EXPECT_EQ(c->section_data(*text).size(), 0x280u);  // 40 instructions, as ncu's source page lists
  EXPECT_EQ(c->function_of_section(*text), "_Z4smemPf");
  auto saxpy = c->function_section("_Z5saxpyifPfS_");
  ASSERT_TRUE(saxpy.has_value());
  EXPECT_EQ(c->section_data(*saxpy).size(), 0x380u);
  EXPECT_FALSE(c->function_section("_Z7missingv").has_value());

  auto line = c->find_section(".debug_line");
  ASSERT_TRUE(line.has_value());
  auto relocs = c->relocations_for(*line);
  ASSERT_TRUE(relocs.ok()) << relocs.status().message();
  ASSERT_EQ(relocs->size(), 2u);  // one set_address per kernel
  EXPECT_EQ((*relocs)[0].offset, 0x31u);
  EXPECT_EQ(c->symbols()[(*relocs)[0].symbol].name, "_Z4smemPf");
  EXPECT_EQ(c->symbols()[(*relocs)[0].symbol].section, *text);
  EXPECT_EQ(c->symbols()[(*relocs)[1].symbol].section, *saxpy);
}

TEST(Cubin, MalformedImagesAreErrorsNotCrashes) {
  EXPECT_EQ(Cubin::parse("").status().kind(), ErrorKind::kBadInput);
  EXPECT_EQ(Cubin::parse("not an elf image at all, just some text that is long enough....").status().kind(),
            ErrorKind::kBadInput);
  std::string image = multi_cubin();
  ASSERT_GT(image.size(), 64u);
  std::string elf32 = image;
  elf32[4] = 1;  // ELFCLASS32
  EXPECT_NE(Cubin::parse(elf32).status().message().find("64-bit"), std::string::npos);
  std::string far = image;
  const uint64_t shoff = uint64_t{1} << 40;
  std::memcpy(far.data() + 40, &shoff, 8);
  EXPECT_EQ(Cubin::parse(far).status().kind(), ErrorKind::kBadInput);
  EXPECT_EQ(Cubin::parse(image.substr(0, image.size() / 2)).status().kind(), ErrorKind::kBadInput);  // table cut off
  std::string bad_strndx = image;
  const uint16_t idx = 999;
  std::memcpy(bad_strndx.data() + 62, &idx, 2);
  EXPECT_EQ(Cubin::parse(bad_strndx).status().kind(), ErrorKind::kBadInput);
}

}  // namespace
}  // namespace kda::ncu
