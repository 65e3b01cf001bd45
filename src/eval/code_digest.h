// What a solution's build runs, as one digest: equal digests run the same code, so a loop round whose
// candidate has the incumbent's digest (a comment edit, a reformatting) cannot be faster than it.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "task/solution.h"

namespace kda::eval {

// A compiled library: the SHA-256 (hex) of its loaded image (elf::loaded_image_digest: code and data
// the loader maps, the build ID zeroed), the entry symbol, the binding and the calling convention;
// "" where the file is not a readable ELF.
std::string compiled_code_digest(const std::filesystem::path& library, std::string_view symbol,
                                 std::string_view binding, bool returns_outputs);

// A Python or Triton solution: the SHA-256 (hex) of each source's path and text, where a .py file's
// text is python_code_text's (comments, trailing blanks and blank lines dropped), with the entry point
// and the calling convention.
std::string python_code_digest(const std::vector<task::SourceFile>& sources, std::string_view entry_point,
                               bool returns_outputs);

// A Python source without what the interpreter ignores: `#` comments outside string literals (single,
// triple-quoted, with any r/b/f/u/t prefix), trailing spaces and tabs, and lines left empty; \r\n and
// a lone \r read as \n. String literals, docstrings and indentation are kept; an f-string's
// replacement fields are code (nested literals, Python 3.12's reused quotes included) and their
// format specs text. Nesting deeper than CPython allows keeps the rest of the file as it is.
std::string python_code_text(std::string_view source);

}  // namespace kda::eval
