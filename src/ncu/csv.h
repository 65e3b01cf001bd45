// RFC 4180 CSV reading and ncu's number format, for the CSV fallback readers (csv_pages.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace kda::ncu {

using CsvRow = std::vector<std::string>;

// Parses quoted/unquoted fields, "" escapes, CRLF or LF line ends; embedded newlines inside quotes
// are kept. Blank lines become empty rows (the session page uses them as separators).
// An unterminated quote is a kBadInput error naming the line.
Result<std::vector<CsvRow>> parse_csv(std::string_view text);

// Parses an ncu number: thousands separators (','), optional sign, decimals, exponent, "nan",
// "inf". Returns nullopt for anything else ("", "no data", "-", "(256, 1, 1)", text).
std::optional<double> parse_ncu_number(std::string_view cell);

}  // namespace kda::ncu
