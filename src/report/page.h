// The HTML page kda report writes: one self-contained file (inline CSS and SVG, no script, a
// Content-Security-Policy that forbids every fetch), in which every number read from the run's
// files carries where it came from, so a test (or a sceptical reader) can check it against them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kda::report {

std::string escape(std::string_view text);  // &, <, >, " and ' as entities

// Where a number came from: a JSON file relative to the report's root (or one line of a JSONL
// file, `line` counted from 1) and a JSON pointer into it. Written as file[:line]#pointer.
struct Source {
  std::string file;
  int line = 0;
  std::string pointer;
  std::string str() const;
};

// How a shown value follows from its sources: the value itself, or the first over the second.
enum class Derivation { kValue, kRatio };

// A number as shown: `<data value=exact data-src=... [data-op=ratio]>text</data>`.
std::string number(double value, std::string_view text, const Source& src);
std::string ratio(double value, std::string_view text, const Source& numerator, const Source& denominator);
// The same provenance as attributes, for SVG shapes (data-value, data-src, data-op).
std::string provenance_attrs(double value, const std::vector<Source>& srcs, Derivation d = Derivation::kValue);

// A page: title, sections of HTML, and the fixed style sheet.
class Page {
 public:
  explicit Page(std::string title) : title_(std::move(title)) {}
  void section(std::string_view id, std::string_view heading, std::string body);
  std::string html() const;

 private:
  std::string title_;
  std::string body_;
};

// A plain HTML table: header cells (escaped) and rows of cell HTML (already rendered).
std::string table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                  std::string_view css_class = "");

}  // namespace kda::report
