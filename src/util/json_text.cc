// JSON text checks before parsing (json_text.h).
#include "util/json_text.h"

#include <algorithm>

namespace kda::util {

int json_nesting_depth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '[' || c == '{')
      deepest = std::max(deepest, ++depth);
    else if (c == ']' || c == '}')
      --depth;
  }
  return deepest;
}

}  // namespace kda::util
