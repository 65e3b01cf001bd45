#include "ncu/csv_pages.h"

#include <algorithm>
#include <array>
#include <map>
#include <unordered_set>

#include "ncu/csv.h"
#include "ncu/metric_units.h"

namespace kda::ncu {

namespace {

constexpr std::array<std::string_view, 11> kIdentityColumns = {
    "ID",     "Process ID", "Process Name", "Host Name", "Kernel Name", "Context",
    "Stream", "Block Size", "Grid Size",    "Device",    "CC"};

int column(const CsvRow& header, std::string_view name) {
  for (size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return static_cast<int>(i);
  return -1;
}

std::string cell(const CsvRow& row, int col) {
  return col >= 0 && static_cast<size_t>(col) < row.size() ? row[col] : std::string();
}

// "(256, 1, 1)" -> {256, 1, 1}
Dim3 parse_dim3(const std::string& s) {
  Dim3 d;
  uint64_t* parts[3] = {&d.x, &d.y, &d.z};
  size_t i = 0, k = 0;
  while (i < s.size() && k < 3) {
    if (s[i] >= '0' && s[i] <= '9') {
      uint64_t v = 0;
      while (i < s.size() && s[i] >= '0' && s[i] <= '9') v = v * 10 + static_cast<uint64_t>(s[i++] - '0');
      *parts[k++] = v;
    } else {
      ++i;
    }
  }
  return d;
}

uint64_t to_u64(const std::string& s) {
  auto v = parse_ncu_number(s);
  return v && *v >= 0 && *v < 1.8e19 ? static_cast<uint64_t>(*v) : 0;
}

// A cell in the unit it was printed in -> a Value in base units; `unit` is updated to the base unit.
Value cell_value(const std::string& text, std::string* unit) {
  if (text.empty() || text == "no data") return Value::none();
  auto n = parse_ncu_number(text);
  if (!n) return Value::of_string(text);
  if (auto scale = unit_scale(*unit)) {
    *unit = scale->base_unit;
    return Value::of_double(*n * scale->factor);
  }
  return Value::of_double(*n);
}

KernelResult identity_of(const CsvRow& header, const CsvRow& row) {
  KernelResult k;
  k.id = static_cast<int>(to_u64(cell(row, column(header, "ID"))));
  k.process_id = to_u64(cell(row, column(header, "Process ID")));
  k.name = cell(row, column(header, "Kernel Name"));
  k.context_id = to_u64(cell(row, column(header, "Context")));
  k.stream_id = to_u64(cell(row, column(header, "Stream")));
  k.block = parse_dim3(cell(row, column(header, "Block Size")));
  k.grid = parse_dim3(cell(row, column(header, "Grid Size")));
  return k;
}

Result<std::vector<CsvRow>> rows_without_prof_lines(std::string_view text) {
  // A profiling run mixes "==PROF==" lines into its output ahead of the CSV.
  std::string kept;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos + 1);
    if (!line.starts_with("==")) kept += line;
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
  }
  return parse_csv(kept);
}

KernelResult& kernel_for(Report& report, std::map<int, size_t>& by_id, const CsvRow& header, const CsvRow& row) {
  KernelResult ident = identity_of(header, row);
  auto it = by_id.find(ident.id);
  if (it != by_id.end()) return report.kernels[it->second];
  by_id[ident.id] = report.kernels.size();
  report.kernels.push_back(std::move(ident));
  return report.kernels.back();
}

}  // namespace

std::string_view csv_page_name(CsvPage page) {
  switch (page) {
    case CsvPage::kRaw: return "raw";
    case CsvPage::kDetails: return "details";
    case CsvPage::kLong: return "metrics";
    case CsvPage::kSource: return "source";
    case CsvPage::kUnknown: break;
  }
  return "unknown";
}

CsvPage detect_csv_page(std::string_view text) {
  auto rows = rows_without_prof_lines(text.substr(0, std::min<size_t>(text.size(), 1 << 20)));
  if (!rows.ok() || rows->empty() || rows->front().empty()) return CsvPage::kUnknown;
  const CsvRow& first = rows->front();
  if (first[0] == "ID") {
    if (column(first, "Rule Name") >= 0) return CsvPage::kDetails;
    if (column(first, "Metric Name") >= 0 && column(first, "Metric Value") >= 0) return CsvPage::kLong;
    return CsvPage::kRaw;
  }
  static const std::unordered_set<std::string> kSourceStarts = {"File Path", "Function Name", "Kernel Name", "Line No",
                                                                "Address"};
  if (kSourceStarts.contains(first[0])) return CsvPage::kSource;
  return CsvPage::kUnknown;
}

Result<Report> parse_raw_page(std::string_view text) {
  KDA_ASSIGN_OR_RETURN(auto rows, rows_without_prof_lines(text));
  if (rows.size() < 2) return Status::bad_input("raw page: expected a header and a units row");
  const CsvRow& header = rows[0];
  const CsvRow& units = rows[1];
  if (column(header, "ID") != 0 || column(header, "Kernel Name") < 0)
    return Status::bad_input("raw page: header lacks ID / Kernel Name");
  std::vector<bool> identity(header.size(), false);
  for (auto name : kIdentityColumns)
    if (int c = column(header, name); c >= 0) identity[c] = true;
  Report report;
  report.origin = "csv:raw";
  for (size_t r = 2; r < rows.size(); ++r) {
    const CsvRow& row = rows[r];
    if (row.empty() || (row.size() == 1 && row[0].empty())) continue;
    if (row.size() != header.size())
      return Status::bad_input("raw page: row " + std::to_string(r + 1) + " has " + std::to_string(row.size()) +
                               " fields, the header " + std::to_string(header.size()));
    KernelResult k = identity_of(header, row);
    k.metrics.reserve(header.size());
    for (size_t c = 0; c < header.size(); ++c) {
      if (identity[c]) continue;
      Metric m;
      m.name = header[c];
      m.unit = c < units.size() ? units[c] : "";
      m.value = cell_value(row[c], &m.unit);
      k.metrics.push_back(std::move(m));
    }
    k.reindex();
    report.kernels.push_back(std::move(k));
  }
  return report;
}

std::string_view metric_for_label(std::string_view section, std::string_view label) {
  struct Entry {
    std::string_view section, label, metric;
  };
  static constexpr std::array<Entry, 24> kMap = {{
      {"GPU Speed Of Light Throughput", "Duration", "gpu__time_duration.sum"},
      {"GPU Speed Of Light Throughput", "Compute (SM) Throughput", "sm__throughput.avg.pct_of_peak_sustained_elapsed"},
      {"GPU Speed Of Light Throughput", "Memory Throughput",
       "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"},
      {"GPU Speed Of Light Throughput", "DRAM Throughput", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"},
      {"GPU Speed Of Light Throughput", "L1/TEX Cache Throughput",
       "l1tex__throughput.avg.pct_of_peak_sustained_active"},
      {"GPU Speed Of Light Throughput", "L2 Cache Throughput", "lts__throughput.avg.pct_of_peak_sustained_elapsed"},
      {"GPU Speed Of Light Throughput", "SM Frequency", "sm__cycles_elapsed.avg.per_second"},
      {"GPU Speed Of Light Throughput", "DRAM Frequency", "dram__cycles_elapsed.avg.per_second"},
      {"Occupancy", "Theoretical Occupancy", "sm__maximum_warps_per_active_cycle_pct"},
      {"Occupancy", "Achieved Occupancy", "sm__warps_active.avg.pct_of_peak_sustained_active"},
      {"Occupancy", "Block Limit Registers", "launch__occupancy_limit_registers"},
      {"Occupancy", "Block Limit Shared Mem", "launch__occupancy_limit_shared_mem"},
      {"Occupancy", "Block Limit Warps", "launch__occupancy_limit_warps"},
      {"Occupancy", "Block Limit SM", "launch__occupancy_limit_blocks"},
      {"Occupancy", "Block Limit Barriers", "launch__occupancy_limit_barriers"},
      {"Launch Statistics", "Registers Per Thread", "launch__registers_per_thread"},
      {"Launch Statistics", "Waves Per SM", "launch__waves_per_multiprocessor"},
      {"Launch Statistics", "# SMs", "launch__sm_count"},
      {"Launch Statistics", "Block Size", "launch__block_size"},
      {"Launch Statistics", "Grid Size", "launch__grid_size"},
      {"Memory Workload Analysis", "L1/TEX Hit Rate", "l1tex__t_sector_hit_rate.pct"},
      {"Memory Workload Analysis", "L2 Hit Rate", "lts__t_sector_hit_rate.pct"},
      {"Memory Workload Analysis", "Local Memory Spilling Requests", "derived__local_spilling_requests"},
      {"Warp State Statistics", "Warp Cycles Per Issued Instruction",
       "smsp__average_warp_latency_per_inst_issued.ratio"},
  }};
  for (const auto& e : kMap)
    if (e.section == section && e.label == label) return e.metric;
  return {};
}

namespace {

// Shared by the details page and the long per-metric format.
Result<Report> parse_long_rows(std::string_view text, bool details) {
  KDA_ASSIGN_OR_RETURN(auto rows, rows_without_prof_lines(text));
  if (rows.empty()) return Status::bad_input("empty CSV page");
  const CsvRow& header = rows[0];
  int c_section = column(header, "Section Name"), c_name = column(header, "Metric Name"),
      c_unit = column(header, "Metric Unit"), c_value = column(header, "Metric Value"),
      c_rule = column(header, "Rule Name"), c_type = column(header, "Rule Type"),
      c_desc = column(header, "Rule Description"), c_sp_type = column(header, "Estimated Speedup Type"),
      c_sp = column(header, "Estimated Speedup");
  if (c_name < 0 || c_value < 0) return Status::bad_input("page lacks Metric Name / Metric Value columns");
  Report report;
  report.origin = details ? "csv:details" : "csv:metrics";
  std::map<int, size_t> by_id;
  for (size_t r = 1; r < rows.size(); ++r) {
    const CsvRow& row = rows[r];
    if (row.size() < 2) continue;
    KernelResult& k = kernel_for(report, by_id, header, row);
    std::string rule = cell(row, c_rule);
    if (!rule.empty()) {
      auto it = std::find_if(k.rules.begin(), k.rules.end(), [&](const RuleResult& x) { return x.id == rule; });
      if (it == k.rules.end()) {
        k.rules.push_back({.id = rule, .section = cell(row, c_section)});
        it = k.rules.end() - 1;
      }
      RuleMessage msg;
      msg.type = message_type_from_name(cell(row, c_type));
      msg.text = cell(row, c_desc);
      msg.speedup_type = cell(row, c_sp_type);
      if (auto v = parse_ncu_number(cell(row, c_sp))) msg.speedup_pct = *v;
      it->messages.push_back(std::move(msg));
      continue;
    }
    Metric m;
    std::string label = cell(row, c_name);
    m.unit = cell(row, c_unit);
    m.value = cell_value(cell(row, c_value), &m.unit);
    std::string_view mapped = details ? metric_for_label(cell(row, c_section), label) : std::string_view();
    m.name = mapped.empty() ? label : std::string(mapped);
    if (std::none_of(k.metrics.begin(), k.metrics.end(), [&](const Metric& x) { return x.name == m.name; }))
      k.metrics.push_back(std::move(m));
  }
  for (auto& k : report.kernels) k.reindex();
  return report;
}

}  // namespace

Result<Report> parse_details_page(std::string_view text) { return parse_long_rows(text, true); }

Result<Report> parse_source_page(std::string_view text) {
  KDA_ASSIGN_OR_RETURN(auto rows, rows_without_prof_lines(text));
  KernelResult k;
  size_t r = 0;
  std::string file_path;
  for (; r < rows.size(); ++r) {
    const CsvRow& row = rows[r];
    if (row.empty()) continue;
    if (row[0] == "Line No" || row[0] == "Address") break;
    if ((row[0] == "Kernel Name" || row[0] == "Function Name") && row.size() >= 2) k.name = row[1];
    if (row[0] == "File Path" && row.size() >= 2) file_path = row[1];
  }
  if (r >= rows.size()) return Status::bad_input("source page: no header row (\"Line No\" or \"Address\")");
  const CsvRow header = rows[r];
  int c_line = column(header, "Line No"), c_addr = column(header, "Address");
  // "Source" appears twice in the cuda,sass view: the first is the CUDA line, the second the SASS text.
  int c_cuda = -1, c_sass = -1;
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] != "Source") continue;
    if (c_line >= 0 && c_cuda < 0 && static_cast<int>(i) < c_addr)
      c_cuda = static_cast<int>(i);
    else
      c_sass = static_cast<int>(i);
  }
  std::unordered_set<uint64_t> seen;
  int current_line = 0;
  for (++r; r < rows.size(); ++r) {
    const CsvRow& row = rows[r];
    if (row.size() < 2) continue;
    std::string addr = cell(row, c_addr);
    if (addr == "...") continue;  // separator before a repeated listing
    SourceRow out;
    if (c_line >= 0 && !cell(row, c_line).empty()) {
      out.line = static_cast<int>(to_u64(cell(row, c_line)));
      out.cuda = cell(row, c_cuda);
      current_line = out.line;
    }
    if (!addr.empty() && addr != "-") {
      out.address = std::strtoull(addr.c_str(), nullptr, 16);
      if (!seen.insert(out.address).second) continue;  // the listing can repeat: de-duplicate by address
      out.sass = cell(row, c_sass);
      if (out.line == 0) out.line = current_line;
    }
    for (size_t c = 0; c < header.size() && c < row.size(); ++c) {
      if (static_cast<int>(c) == c_line || static_cast<int>(c) == c_addr || header[c] == "Source") continue;
      if (auto v = parse_ncu_number(row[c])) out.counters[header[c]] = *v;
    }
    k.source.push_back(std::move(out));
  }
  Report report;
  report.origin = "csv:source";
  if (!file_path.empty()) report.source_files.push_back({file_path, ""});
  k.reindex();
  report.kernels.push_back(std::move(k));
  return report;
}

Result<Report> parse_csv_page(std::string_view text) {
  switch (detect_csv_page(text)) {
    case CsvPage::kRaw: return parse_raw_page(text);
    case CsvPage::kDetails: return parse_details_page(text);
    case CsvPage::kLong: return parse_long_rows(text, false);
    case CsvPage::kSource: return parse_source_page(text);
    case CsvPage::kUnknown: break;
  }
  return Status::bad_input("not a recognised ncu CSV page (expected --page raw, details or source output)");
}

namespace {
// Rows the native reader derived (no counters): ncu's own source page replaces them.
bool native_rows(const KernelResult& k) {
  return std::all_of(k.source.begin(), k.source.end(), [](const SourceRow& r) { return r.counters.empty(); });
}
}  // namespace

void merge_report(Report& base, Report extra) {
  for (auto& e : extra.kernels) {
    KernelResult* target = nullptr;
    if (extra.origin == "csv:source") {
      for (auto& k : base.kernels)
        if (k.name == e.name && native_rows(k)) {
          target = &k;
          break;
        }
    } else {
      for (auto& k : base.kernels)
        if (k.id == e.id) {
          target = &k;
          break;
        }
    }
    if (target == nullptr) {
      e.id = static_cast<int>(base.kernels.size());
      base.kernels.push_back(std::move(e));
      continue;
    }
    for (auto& m : e.metrics)
      if (target->find(m.name) == nullptr) target->metrics.push_back(std::move(m));
    if (target->rules.empty()) target->rules = std::move(e.rules);
    if (!e.source.empty() && native_rows(*target)) {
      target->source = std::move(e.source);
      target->source_note.clear();
    }
    target->reindex();
  }
  for (auto& f : extra.source_files) base.source_files.push_back(std::move(f));
  if (base.origin.find(extra.origin) == std::string::npos) base.origin += "+" + extra.origin;
}

}  // namespace kda::ncu
