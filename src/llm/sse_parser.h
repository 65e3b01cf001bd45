// Incremental Server-Sent Events parser (the WHATWG event-stream format): feed bytes as they
// arrive, split anywhere; get whole events. Handles LF, CRLF and CR line ends, multi-line data,
// comments (":..."), "event:", "data:", "id:"; "retry:" and unknown fields are ignored.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kda::llm {

struct SseEvent {
  std::string event;  // "" when the stream named none ("message" by the spec)
  std::string data;   // data lines joined with "\n"
  std::string id;
};

class SseParser {
 public:
  // Parses what `bytes` completes; events are appended to the result.
  std::vector<SseEvent> feed(std::string_view bytes);
  // End of stream: a final event without its blank line is NOT dispatched (per the spec, an
  // unterminated event is discarded); returns true if such a partial event was pending.
  bool finish();
  size_t bytes_seen() const { return bytes_seen_; }

 private:
  void process_line(std::string_view line, std::vector<SseEvent>& out);

  std::string line_;
  bool last_was_cr_ = false;
  bool first_line_ = true;
  SseEvent current_;
  bool has_data_ = false;
  bool pending_ = false;
  size_t bytes_seen_ = 0;
};

}  // namespace kda::llm
