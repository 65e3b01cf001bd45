// The in-memory model of an Nsight Compute report, filled by the native .ncu-rep reader
// (report_reader.h) or by the CSV page readers (csv_pages.h). Values keep their stored type;
// numbers are in ncu's base units (ns, byte, hz, cycle, %, ...).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kda::ncu {

// One metric value as stored: absent, text, or a number of a given width.
struct Value {
  enum class Kind : uint8_t { kNone, kString, kFloat, kDouble, kUint32, kUint64 };
  Kind kind = Kind::kNone;
  double number = 0;     // kFloat / kDouble (kUint* also mirrored here as a double)
  uint64_t integer = 0;  // kUint32 / kUint64
  std::string text;      // kString

  static Value none() { return {}; }
  static Value of_string(std::string s) {
    Value v;
    v.kind = Kind::kString;
    v.text = std::move(s);
    return v;
  }
  static Value of_double(double d) {
    Value v;
    v.kind = Kind::kDouble;
    v.number = d;
    return v;
  }
  static Value of_float(float f) {
    Value v;
    v.kind = Kind::kFloat;
    v.number = f;
    return v;
  }
  static Value of_uint(uint64_t u, bool wide = true) {
    Value v;
    v.kind = wide ? Kind::kUint64 : Kind::kUint32;
    v.integer = u;
    v.number = static_cast<double>(u);
    return v;
  }

  bool is_number() const { return kind != Kind::kNone && kind != Kind::kString; }
  bool is_integer() const { return kind == Kind::kUint32 || kind == Kind::kUint64; }
  std::optional<double> as_number() const { return is_number() ? std::optional<double>(number) : std::nullopt; }
};

// One element of an instanced metric: its correlation id (a PC, an opcode name, an index, a
// timestamp, depending on the metric) and its value.
struct Instance {
  Value correlation;
  Value value;
};

struct Metric {
  std::string name;
  std::string unit;  // from the CSV units row; natively inferred from the name (see metric_units.h), may be ""
  Value value;       // the aggregate; kNone when the metric has only instances or no data
  std::vector<Instance> instances;
  int category = -1;  // native only: 0 = PM counter, 1 = sampler, -1 = not stored
};

struct Dim3 {
  uint64_t x = 0, y = 0, z = 0;
  uint64_t volume() const { return x * y * z; }
  bool operator==(const Dim3&) const = default;
};

// Stored codes 0..4; ncu's CSV prints 1 as "INF".
enum class MessageType : uint8_t { kNone = 0, kInfo = 1, kWarning = 2, kError = 3, kOptimization = 4 };
std::string_view message_type_name(MessageType t);  // "OPT", "WRN", "ERR", "INF", ""
MessageType message_type_from_name(std::string_view name);

struct SourceMarker {
  int kind = 0;  // 0 = SASS address, 1 = source line
  uint64_t address = 0;
  int line = 0;
  std::string file;
  std::string tooltip;
};

// One message of a guided-analysis rule, with the speedup estimate that followed it (if any).
struct RuleMessage {
  MessageType type = MessageType::kNone;
  std::string title;
  std::string text;
  std::string speedup_type;  // "local", "global" or ""
  std::optional<double> speedup_pct;
  std::vector<std::pair<std::string, double>> focus_metrics;  // (metric name, value)
};

struct RuleResult {
  std::string id;            // e.g. SharedMemoryConflicts
  std::string display_name;  // e.g. Shared Memory Conflicts
  std::string section;       // section identifier, e.g. MemoryWorkloadAnalysis_Tables
  std::vector<RuleMessage> messages;
  std::vector<SourceMarker> markers;
};

// One row of the source view: a SASS instruction (address set) or a CUDA line (line set).
struct SourceRow {
  uint64_t address = 0;                              // 0 for a CUDA-line row
  int line = 0;                                      // 0 when unknown
  std::string sass;                                  // instruction text ("" when unknown)
  std::string cuda;                                  // source text of the line ("" when unknown)
  std::string file;                                  // source file of the line (native join only; "" when unknown)
  std::unordered_map<std::string, double> counters;  // column label -> value
};

// One profiled kernel launch (ncu calls it a result or an action).
struct KernelResult {
  int id = 0;                 // index of the result in the report (the CSV "ID")
  std::string name;           // demangled, e.g. "saxpy(int, float, float *, float *)"
  std::string mangled_name;   // e.g. "_Z5saxpyifPfS_" ("" when absent)
  std::string function_name;  // e.g. "saxpy"
  Dim3 grid, block;
  uint64_t context_id = 0, stream_id = 0, process_id = 0;
  std::optional<bool> clock_locked;  // ClockStatus.ExecutedLocked when stored
  std::vector<Metric> metrics;
  std::vector<RuleResult> rules;
  // Source view rows: from a CSV source page, or natively one row per SASS instruction of the
  // kernel (address, file and line from the cubin's .debug_line, SASS text from nvdisasm).
  std::vector<SourceRow> source;
  uint64_t source_reference = 0;       // native: ProfileResult.Source's Reference (which SourceData)
  std::string source_note;             // native: why rows lack lines or SASS ("" when complete)
  std::optional<uint64_t> code_bytes;  // native: the size of the kernel's code (its .text in the embedded cubin)

  const Metric* find(std::string_view metric_name) const;
  std::optional<double> number(std::string_view metric_name) const;
  // Rebuilds the name index; call after filling `metrics`.
  void reindex();

 private:
  std::unordered_map<std::string, size_t> index_;
};

struct SourceFile {
  std::string path;
  std::string content;
};

// A SourceData of an .ncu-rep that carries a cubin (Binary).
struct EmbeddedCubin {
  uint64_t reference = 0;
  std::string image;
};

// Where the driver loaded a kernel's code (SourceData.RelocationData): absolute PC of offset 0.
struct FunctionLoad {
  uint64_t reference = 0;
  std::string function;  // mangled
  uint64_t address = 0;
};

struct Report {
  std::string origin;  // "ncu-rep" or "csv:<page>"
  int version = 0;     // FileHeader.Version for .ncu-rep
  std::vector<std::string> command_lines;
  std::vector<std::pair<std::string, std::string>> versions;  // (provider, version)
  std::vector<KernelResult> kernels;
  std::vector<SourceFile> source_files;
  size_t cubin_bytes = 0;
  std::vector<EmbeddedCubin> cubins;         // native only
  std::vector<FunctionLoad> function_loads;  // native only
  std::vector<std::string> string_table;     // native only
};

// ncu's base-units CSV rendering of a value: integers and integral doubles without decimals,
// other doubles with exactly two, thousands separators, "nan", strings verbatim, "" for kNone.
std::string format_base(const Value& v);

}  // namespace kda::ncu
