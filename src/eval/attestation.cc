#include "eval/attestation.h"

#include <algorithm>
#include <iterator>

namespace kda::eval {

std::vector<std::string> foreign_kernels(const std::set<std::string>& seen, const std::set<std::string>& own) {
  std::vector<std::string> out;
  std::set_difference(seen.begin(), seen.end(), own.begin(), own.end(), std::back_inserter(out));
  return out;
}

}  // namespace kda::eval
