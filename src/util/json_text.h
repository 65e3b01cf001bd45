// Looks at JSON text before a parser does: the parsers kda uses are iterative, but converting and
// dumping documents recurse, so hostile nesting is refused on the text (task files, safetensors headers).
#pragma once

#include <string_view>

namespace kda::util {

// The deepest [ / { nesting outside strings (escapes inside strings understood); 0 for a scalar.
int json_nesting_depth(std::string_view text);

}  // namespace kda::util
