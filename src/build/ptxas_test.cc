#include "build/ptxas.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace kda::build {
namespace {

// Recorded from nvcc 13.0 (-Xptxas -v, sm_90a).
constexpr const char* kLog = R"(ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z2k2Pf' for 'sm_90a'
ptxas info    : Function properties for _Z2k2Pf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers
ptxas info    : Compile time = 47.924 ms
ptxas info    : Function properties for _Z6helperf
    16 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Compiling entry function '_Z2tkILi200EEvPf' for 'sm_90a'
ptxas info    : Function properties for _Z2tkILi200EEvPf
    800 bytes stack frame, 24 bytes spill stores, 32 bytes spill loads
ptxas info    : Used 40 registers, used 0 barriers, 800 bytes cumulative stack size
ptxas info    : Compile time = 863.254 ms
ptxas info    : Compiling entry function '_Z3addPKfS0_Pfi' for 'sm_90a'
ptxas info    : Function properties for _Z3addPKfS0_Pfi
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 1 barriers, 256 bytes smem, 368 bytes cmem[0]
ptxas info    : Compile time = 12.896 ms
)";

TEST(Ptxas, ParsesEntryFunctionsOnly) {
  auto ks = parse_ptxas_log(kLog);
  ASSERT_EQ(ks.size(), 3u);
  EXPECT_EQ(ks[0].name, "_Z2k2Pf");
  EXPECT_EQ(ks[0].demangled, "k2(float*)");
  EXPECT_EQ(ks[0].arch, "sm_90a");
  EXPECT_EQ(ks[0].registers, 8);
  EXPECT_EQ(ks[0].spill_stores, 0);  // the helper's spills are not k2's
  EXPECT_EQ(ks[1].demangled, "void tk<200>(float*)");
  EXPECT_EQ(ks[1].registers, 40);
  EXPECT_EQ(ks[1].stack, 800);
  EXPECT_EQ(ks[1].spill_stores, 24);
  EXPECT_EQ(ks[1].spill_loads, 32);
  EXPECT_EQ(ks[2].registers, 10);
  EXPECT_EQ(ks[2].barriers, 1);
  EXPECT_EQ(ks[2].shared_mem_static, 256);
}

TEST(Ptxas, EmptyAndGarbage) {
  EXPECT_TRUE(parse_ptxas_log("").empty());
  EXPECT_TRUE(parse_ptxas_log("error: something\nUsed 9 registers\n").empty());
}

TEST(Ptxas, JsonRoundTrip) {
  auto ks = parse_ptxas_log(kLog);
  nlohmann::json j = ks;
  auto back = j.get<std::vector<KernelResources>>();
  ASSERT_EQ(back.size(), ks.size());
  EXPECT_EQ(back[1].name, ks[1].name);
  EXPECT_EQ(back[1].spill_loads, 32);
  EXPECT_EQ(back[2].shared_mem_static, 256);
}

}  // namespace
}  // namespace kda::build
