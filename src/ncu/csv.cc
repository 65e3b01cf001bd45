#include "ncu/csv.h"

#include <cmath>
#include <cstdlib>
#include <limits>

namespace kda::ncu {

Result<std::vector<CsvRow>> parse_csv(std::string_view text) {
  std::vector<CsvRow> rows;
  CsvRow row;
  std::string field;
  bool in_quotes = false, field_started = false, row_has_content = false;
  size_t line = 1, quote_line = 0;
  auto end_field = [&] {
    row.push_back(std::move(field));
    field.clear();
    field_started = false;
  };
  auto end_row = [&] {
    if (row_has_content || field_started || !field.empty()) end_field();
    rows.push_back(std::move(row));
    row.clear();
    row_has_content = false;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_quotes) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          in_quotes = false;
        }
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_quotes = true;
        quote_line = line;
        field_started = true;
        row_has_content = true;
        break;
      case ',':
        end_field();
        row_has_content = true;
        break;
      case '\r': break;
      case '\n':
        end_row();
        ++line;
        break;
      default:
        field += c;
        field_started = true;
        row_has_content = true;
    }
  }
  if (in_quotes) return Status::bad_input("unterminated quoted field starting on line " + std::to_string(quote_line));
  if (row_has_content || field_started || !field.empty()) end_row();
  return rows;
}

std::optional<double> parse_ncu_number(std::string_view cell) {
  if (cell == "nan" || cell == "-nan") return std::numeric_limits<double>::quiet_NaN();
  if (cell == "inf") return std::numeric_limits<double>::infinity();
  if (cell == "-inf") return -std::numeric_limits<double>::infinity();
  std::string clean;
  clean.reserve(cell.size());
  bool digit = false;
  for (size_t i = 0; i < cell.size(); ++i) {
    char c = cell[i];
    if (c == ',') {
      // A separator sits between digits of the integer part.
      if (!digit || i + 1 >= cell.size() || cell[i + 1] < '0' || cell[i + 1] > '9') return std::nullopt;
      continue;
    }
    if (c >= '0' && c <= '9')
      digit = true;
    else if (c != '.' && c != '-' && c != '+' && c != 'e' && c != 'E')
      return std::nullopt;
    clean += c;
  }
  if (!digit) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(clean.c_str(), &end);
  if (end == nullptr || *end != '\0') return std::nullopt;
  return v;
}

}  // namespace kda::ncu
