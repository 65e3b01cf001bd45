#include "ncu/native_source.h"

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_map>

#include "ncu/cubin.h"
#include "ncu/dwarf_line.h"
#include "ncu/sass_listing.h"

namespace kda::ncu {

namespace {

constexpr uint64_t kInstructionBytes = 16;       // every SASS instruction since Volta
constexpr uint64_t kMaxRowsPerKernel = 1 << 20;  // bounds a hostile section size

struct DecodedCubin {
  std::optional<Cubin> cubin;
  std::optional<LineTable> lines;
  std::string problem;  // why lines is empty
};

DecodedCubin decode(const EmbeddedCubin& embedded) {
  DecodedCubin d;
  auto c = Cubin::parse(embedded.image);
  if (!c.ok()) {
    d.problem = "the embedded cubin cannot be read (" + c.status().message() + ")";
    return d;
  }
  d.cubin = std::move(c).value();
  auto debug_line = d.cubin->find_section(".debug_line");
  if (!debug_line) {
    d.problem = "the cubin has no .debug_line: build with -lineinfo for source lines";
    return d;
  }
  std::unordered_map<uint64_t, AddressRelocation> relocs;
  auto r = d.cubin->relocations_for(*debug_line);
  if (!r.ok()) {
    d.problem = "the cubin's .debug_line relocations cannot be read (" + r.status().message() + ")";
    return d;
  }
  for (const auto& rel : *r) {
    const ElfSymbol& sym = d.cubin->symbols()[rel.symbol];
    relocs[rel.offset] = {sym.section, sym.value + static_cast<uint64_t>(rel.addend), !rel.has_addend};
  }
  DwarfStrings strings;
  if (auto s = d.cubin->find_section(".debug_str")) strings.debug_str = d.cubin->section_data(*s);
  if (auto s = d.cubin->find_section(".debug_line_str")) strings.debug_line_str = d.cubin->section_data(*s);
  auto lines = decode_debug_line(d.cubin->section_data(*debug_line), relocs, strings);
  if (!lines.ok()) {
    d.problem = "the cubin's .debug_line cannot be decoded (" + lines.status().message() + ")";
    return d;
  }
  d.lines = std::move(lines).value();
  return d;
}

uint64_t pc_value(const Value& v) { return v.is_integer() ? v.integer : static_cast<uint64_t>(v.number); }

// The lowest PC any per-PC metric mentions: the kernel's entry when the report lacks its load address.
std::optional<uint64_t> lowest_pc(const KernelResult& k) {
  std::optional<uint64_t> low;
  for (const char* name : {"smsp__pcsamp_sample_count", "inst_executed", "derived__avg_thread_executed"}) {
    const Metric* m = k.find(name);
    if (m == nullptr) continue;
    for (const auto& inst : m->instances) {
      if (!inst.correlation.is_number()) continue;
      const uint64_t pc = pc_value(inst.correlation);
      low = low ? std::min(*low, pc) : pc;
    }
  }
  return low;
}

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    if (line.ends_with('\r')) line.remove_suffix(1);
    out.push_back(line);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

void add_note(KernelResult& k, const std::string& note) {
  if (k.source_note.find(note) != std::string::npos) return;
  k.source_note += (k.source_note.empty() ? "" : "; ") + note;
}

// Which cubin holds the kernel: one with its Reference first, then any that defines the function.
std::optional<size_t> cubin_of(const KernelResult& k, const Report& report,
                               std::vector<std::optional<DecodedCubin>>& cache) {
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < report.cubins.size(); ++i) {
      if (pass == 0 && report.cubins[i].reference != k.source_reference) continue;
      if (!cache[i]) cache[i] = decode(report.cubins[i]);
      if (cache[i]->cubin && cache[i]->cubin->function_section(k.mangled_name)) return i;
    }
  }
  return std::nullopt;
}

}  // namespace

void attach_native_lines(Report& report) {
  std::vector<std::optional<DecodedCubin>> cache(report.cubins.size());
  std::unordered_map<std::string, std::vector<std::string_view>> file_lines;
  for (const auto& f : report.source_files)
    if (!f.content.empty()) file_lines[f.path] = split_lines(f.content);
  for (auto& k : report.kernels) {
    const bool has_rows = !k.source.empty();  // from a CSV source page: only the code size is added
    if (k.mangled_name.empty()) {
      if (!has_rows) add_note(k, "the report does not name the kernel's function");
      continue;
    }
    auto which = cubin_of(k, report, cache);
    size_t section = 0;  // the kernel's .text in that cubin
    if (which) {
      const Cubin& cubin = *cache[*which]->cubin;
      section = *cubin.function_section(k.mangled_name);
      k.code_bytes = cubin.sections()[section].size;
    }
    if (has_rows) continue;
    if (!which) {
      add_note(k, "the report embeds no cubin defining " + k.mangled_name);
      continue;
    }
    const DecodedCubin& d = *cache[*which];
    std::optional<uint64_t> base;
    for (int pass = 0; pass < 2 && !base; ++pass)
      for (const auto& l : report.function_loads)
        if (l.function == k.mangled_name && (pass == 1 || l.reference == report.cubins[*which].reference)) {
          base = l.address;
          break;
        }
    if (!base) {
      base = lowest_pc(k);
      if (!base) {
        add_note(k, "the report has neither the kernel's load address nor per-PC data");
        continue;
      }
      add_note(k, "load address not in the report: PCs are placed from the lowest sampled PC");
    }
    if (!d.lines) add_note(k, d.problem);
    const uint64_t size =
        std::min<uint64_t>(d.cubin->section_data(section).size(), kMaxRowsPerKernel * kInstructionBytes);
    bool any_line = false;
    for (uint64_t off = 0; off + kInstructionBytes <= size; off += kInstructionBytes) {
      SourceRow row;
      row.address = *base + off;
      if (d.lines) {
        if (auto loc = d.lines->lookup(static_cast<int>(section), off)) {
          row.line = loc->line;
          row.file = std::string(loc->file);
          any_line = true;
          if (auto it = file_lines.find(row.file);
              it != file_lines.end() && row.line <= static_cast<int>(it->second.size()))
            row.cuda = std::string(it->second[static_cast<size_t>(row.line - 1)]);
        }
      }
      k.source.push_back(std::move(row));
    }
    if (d.lines && !any_line) add_note(k, "the cubin's line table does not cover " + k.mangled_name);
  }
}

Status attach_sass_text(Report& report, const std::filesystem::path& nvdisasm, double timeout_s) {
  std::vector<std::optional<SassListing>> listings(report.cubins.size());
  std::vector<std::optional<DecodedCubin>> cache(report.cubins.size());
  for (auto& k : report.kernels) {
    if (k.source.empty() || k.mangled_name.empty() || k.source.front().address == 0) continue;
    if (std::any_of(k.source.begin(), k.source.end(), [](const SourceRow& r) { return !r.sass.empty(); })) continue;
    auto which = cubin_of(k, report, cache);
    if (!which) continue;
    if (!listings[*which]) {
      auto l = disassemble_cubin(report.cubins[*which].image, nvdisasm, timeout_s);
      if (!l.ok()) return l.status().with_context("disassembling the cubin of " + k.mangled_name);
      listings[*which] = std::move(l).value();
    }
    auto fn = listings[*which]->find(k.mangled_name);
    if (fn == listings[*which]->end()) {
      add_note(k, "nvdisasm did not list " + k.mangled_name);
      continue;
    }
    const uint64_t base = k.source.front().address;
    for (auto& row : k.source)
      if (auto it = fn->second.find(row.address - base); it != fn->second.end()) row.sass = it->second;
  }
  return Status::ok_status();
}

}  // namespace kda::ncu
