// Checks a report page against the files it was drawn from: every element with data-src must show
// the value its sources hold (data-op="ratio": the first over the second), and a <data> element's
// text must read as that value at the precision shown (units us, ms, %, x understood). kda report
// runs it on every page it writes; the tests run it on the DOM a real browser rendered.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace kda::report {

struct ProvenanceCheck {
  int checked = 0;                    // elements with provenance
  std::vector<std::string> problems;  // one line each: the element's source and what is wrong
  bool ok() const { return problems.empty(); }
};

ProvenanceCheck check_provenance(const std::string& html, const std::filesystem::path& root);

}  // namespace kda::report
