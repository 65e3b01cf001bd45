// The native source view of an .ncu-rep: per-PC data joined to CUDA source lines and SASS without
// ncu. Each kernel's code section is found in the embedded cubin, its load address in the report's
// RelocationData, and every instruction gets a SourceRow (absolute PC, file and line from the
// cubin's DWARF .debug_line, the line's text from the imported source files, SASS text from
// nvdisasm when available), so analyze's hotspot join works as it does for ncu's CSV source page.
#pragma once

#include <filesystem>
#include <string>

#include "ncu/report.h"
#include "util/status.h"

namespace kda::ncu {

// Fills `source` (and `source_note` where something is missing, e.g. no .debug_line: "build with
// -lineinfo") for every kernel of a native report that has no source rows yet, and `code_bytes` for
// every kernel whose cubin the report embeds. A cubin that cannot be decoded becomes a note, never an
// error. parse_ncu_rep calls it.
void attach_native_lines(Report& report);

// Disassembles each embedded cubin once with `nvdisasm` and sets SourceRow::sass on the native
// rows. A failing nvdisasm is an error (the rows keep their lines); kernels it does not list get a note.
Status attach_sass_text(Report& report, const std::filesystem::path& nvdisasm, double timeout_s = 60);

}  // namespace kda::ncu
