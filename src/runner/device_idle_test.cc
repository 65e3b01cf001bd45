#include "runner/device_idle.h"

#include <gtest/gtest.h>

namespace kda::runner {
namespace {

TEST(DeviceIdle, GapsBetweenLaunchesInAnyOrder) {
  // Two 1.2 us and 1.6 us kernels with 7.7 us between them (mma_radix's two launches on an H100, roughly).
  EXPECT_EQ(idle_within_span({{10'000, 11'200}, {18'900, 20'500}}), 7'700u);
  EXPECT_EQ(idle_within_span({{18'900, 20'500}, {10'000, 11'200}}), 7'700u);  // records arrive in any order
  EXPECT_EQ(idle_within_span({{0, 5}, {7, 9}, {12, 20}}), 5u);
}

TEST(DeviceIdle, OverlapsAndContainedRecordsCountOnce) {
  EXPECT_EQ(idle_within_span({{0, 10}, {5, 15}, {15, 20}}), 0u);                 // concurrent streams, back to back
  EXPECT_EQ(idle_within_span({{0, 100}, {10, 20}, {30, 40}, {120, 130}}), 20u);  // short ones inside a long one
}

TEST(DeviceIdle, NothingOrOneRecord) {
  EXPECT_EQ(idle_within_span({}), 0u);
  EXPECT_EQ(idle_within_span({{3, 9}}), 0u);
  EXPECT_EQ(idle_within_span({{3, 3}, {3, 3}}), 0u);
}

}  // namespace
}  // namespace kda::runner
