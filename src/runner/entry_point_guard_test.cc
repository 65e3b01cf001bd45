#include "runner/entry_point_guard.h"

#include <gtest/gtest.h>

namespace kda::runner {
namespace {

// Only the tensor-map encoders are handed out; what T1 fetched (cuStreamCreate) and anything that
// launches, synchronises or allocates is refused, and every refusal is reported once.
TEST(EntryPointGuard, OnlyTensorMapEncodersAreAllowedAndRefusalsAreReportedOnce) {
  for (const char* ok : {"cuTensorMapEncodeTiled", "cuTensorMapEncodeIm2col", "cuTensorMapReplaceAddress"})
    EXPECT_TRUE(allowed_driver_entry_point(ok)) << ok;
  for (const char* no : {"cuStreamCreate", "cuLaunchKernel", "cuMemAlloc", "cuCtxSynchronize",
                         "cuTensorMapEncodeTiledX", "cuTensorMap", "", "cuGetProcAddress"})
    EXPECT_FALSE(allowed_driver_entry_point(no)) << no;
  EXPECT_TRUE(take_refused_entry_points().empty());
  record_refused_entry_point("cuStreamCreate");
  record_refused_entry_point("cuLaunchKernel");
  EXPECT_EQ(take_refused_entry_points(), (std::vector<std::string>{"cuStreamCreate", "cuLaunchKernel"}));
  EXPECT_TRUE(take_refused_entry_points().empty());
}

}  // namespace
}  // namespace kda::runner
