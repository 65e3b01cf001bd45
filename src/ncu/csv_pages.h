// Readers for ncu's CSV exports (`ncu -i r.ncu-rep --csv --page raw|details|source`, and the long
// per-metric format of `ncu --metrics ... --csv`), producing the same Report model as the native
// reader. Columns are located by header name. Auto-scaled units ("us", "Mbyte", "Ghz") are
// converted back to base units, so values compare with the native reader's.
#pragma once

#include <filesystem>
#include <string_view>

#include "ncu/report.h"
#include "util/status.h"

namespace kda::ncu {

enum class CsvPage { kRaw, kDetails, kLong, kSource, kUnknown };
std::string_view csv_page_name(CsvPage page);

// Which page a CSV export is, from its first rows.
CsvPage detect_csv_page(std::string_view text);

Result<Report> parse_raw_page(std::string_view text);      // wide: header, units row, one row per result
Result<Report> parse_details_page(std::string_view text);  // labels per section, plus rule rows
Result<Report> parse_source_page(std::string_view text);   // one kernel's source/SASS rows
Result<Report> parse_csv_page(std::string_view text);      // detects the page, then parses it

// Merges `extra` into `base`: kernels are matched by ID (or, for a source page, by name);
// metrics missing from base are added, rules and source rows are taken when base has none.
void merge_report(Report& base, Report extra);

// Maps a details-page label ("Duration", "DRAM Throughput", ...) within its section display name to
// the metric name it shows, for the metrics the analysis uses; "" when unknown.
std::string_view metric_for_label(std::string_view section, std::string_view label);

}  // namespace kda::ncu
