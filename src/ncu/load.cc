#include "ncu/load.h"

#include <algorithm>
#include <optional>

#include "ncu/csv_pages.h"
#include "ncu/native_source.h"
#include "ncu/sass_listing.h"
#include "ncu/report_reader.h"
#include "util/fs.h"

namespace kda::ncu {

namespace {

// SASS text is an extra: without nvdisasm, or when it fails, the analysis says so and goes on.
void add_sass(Report& report, const LoadOptions& options) {
  const bool wanted = std::any_of(report.kernels.begin(), report.kernels.end(), [](const KernelResult& k) {
    return !k.source.empty() && std::all_of(k.source.begin(), k.source.end(),
                                            [](const SourceRow& r) { return r.sass.empty() && r.counters.empty(); });
  });
  if (!wanted) return;
  std::optional<std::filesystem::path> tool =
      options.nvdisasm.empty() ? find_nvdisasm() : std::optional(options.nvdisasm);
  std::string note;
  if (!tool) {
    note = "no SASS text: nvdisasm (CUDA toolkit) is not on PATH";
  } else if (Status st = attach_sass_text(report, *tool, options.nvdisasm_timeout_s); !st.ok()) {
    note = "no SASS text: " + st.message();
  }
  if (note.empty()) return;
  for (auto& k : report.kernels)
    if (!k.source.empty() && k.source.front().sass.empty() && k.source.front().counters.empty())
      k.source_note += (k.source_note.empty() ? "" : "; ") + note;
}

}  // namespace

Result<Report> load_report(const std::filesystem::path& input) {
  return load_report(std::vector<std::filesystem::path>{input});
}

Result<Report> load_report(const std::vector<std::filesystem::path>& inputs) {
  return load_report(inputs, LoadOptions{});
}

Result<Report> load_report(const std::vector<std::filesystem::path>& inputs, const LoadOptions& options) {
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
  if (options.sass && !merged->cubins.empty()) add_sass(*merged, options);
  return std::move(*merged);
}

}  // namespace kda::ncu
