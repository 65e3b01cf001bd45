// Splits source files into searchable chunks: C/C++/CUDA by kernel, function and type (a brace-matching
// scanner over a copy with comments, strings and preprocessor lines blanked), Python by top-level def and
// class, markdown by section. Text between chunks is kept as "glue" chunks so that nothing is unsearchable.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kda::wiki {

struct Chunk {
  std::string title;                 // symbol, heading, or "" for glue
  std::vector<std::string> symbols;  // kernel/function/type names, PTX mnemonics
  std::string headings;              // markdown heading path ("A > B")
  std::string body;                  // original text
  int start_line = 1;                // 1-based, inclusive
  int end_line = 1;
  std::string unit;  // kernel | function | type | section | glue
};

inline constexpr int kMaxChunkLines = 200;  // longer units are split into windows
inline constexpr int kWindowLines = 120;
inline constexpr int kGlueWindowLines = 60;

std::vector<Chunk> chunk_cpp(std::string_view text);
std::vector<Chunk> chunk_python(std::string_view text);
// `first_line` is the line number of text[0] in its file (after front matter).
std::vector<Chunk> chunk_markdown(std::string_view text, int first_line = 1);
// Fixed windows of `lines` lines (JSON, diffs, unknown text).
std::vector<Chunk> chunk_lines(std::string_view text, int lines, int first_line = 1);

// PTX mnemonics at the start of string literals ("cp.async.bulk.tensor.2d.shared::cluster...").
std::vector<std::string> ptx_mnemonics(std::string_view code);

}  // namespace kda::wiki
