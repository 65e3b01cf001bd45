#include "llm/sse_parser.h"

namespace kda::llm {

std::vector<SseEvent> SseParser::feed(std::string_view bytes) {
  std::vector<SseEvent> out;
  bytes_seen_ += bytes.size();
  for (char c : bytes) {
    if (last_was_cr_) {
      last_was_cr_ = false;
      if (c == '\n') continue;  // the LF of a CRLF pair
    }
    if (c == '\r' || c == '\n') {
      last_was_cr_ = c == '\r';
      process_line(line_, out);
      line_.clear();
      continue;
    }
    line_ += c;
  }
  return out;
}

void SseParser::process_line(std::string_view line, std::vector<SseEvent>& out) {
  if (first_line_) {
    first_line_ = false;
    if (line.size() >= 3 && line.substr(0, 3) == "\xEF\xBB\xBF") line.remove_prefix(3);  // BOM
  }
  if (line.empty()) {  // dispatch
    if (has_data_) out.push_back(std::move(current_));
    current_ = SseEvent{};
    has_data_ = false;
    pending_ = false;
    return;
  }
  pending_ = true;
  if (line.front() == ':') return;  // comment
  std::string_view field = line;
  std::string_view value;
  if (auto colon = line.find(':'); colon != std::string_view::npos) {
    field = line.substr(0, colon);
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "event") {
    current_.event = std::string(value);
  } else if (field == "data") {
    if (has_data_) current_.data += '\n';
    current_.data += value;
    has_data_ = true;
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos) current_.id = std::string(value);
  }
}

bool SseParser::finish() {
  bool partial = pending_ || !line_.empty();
  line_.clear();
  current_ = SseEvent{};
  has_data_ = false;
  pending_ = false;
  return partial;
}

}  // namespace kda::llm
