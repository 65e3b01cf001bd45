#include "ncu/load.h"

#include "ncu/csv_pages.h"
#include "ncu/report_reader.h"
#include "util/fs.h"

namespace kda::ncu {

Result<Report> load_report(const std::filesystem::path& input) { return load_report(std::vector<std::filesystem::path>{input}); }

Result<Report> load_report(const std::vector<std::filesystem::path>& inputs) {
  if (inputs.empty()) return Status::bad_input("no report given");
  std::optional<Report> merged;
  for (const auto& path : inputs) {
    auto bytes = fs::read_file(path);
    if (!bytes.ok()) return bytes.status();
    Result<Report> one = looks_like_ncu_rep(*bytes) ? parse_ncu_rep(*bytes) : parse_csv_page(*bytes);
    if (!one.ok()) return one.status().with_context(path.string());
    if (!merged) {
      merged = std::move(one).value();
    } else {
      merge_report(*merged, std::move(one).value());
    }
  }
  return std::move(*merged);
}

}  // namespace kda::ncu
