// Where the tests find the fixture reports (src/ncu/testdata, copied from shared/data/ncu).
#pragma once

#include <string>

namespace kda::ncu::testing {

inline std::string fixture(const std::string& name) {
  return std::string(KDA_SOURCE_DIR) + "/src/ncu/testdata/" + name;
}

}  // namespace kda::ncu::testing
