// Renders the fake's reply in each wire format: SSE event sequences for streaming requests,
// whole JSON bodies otherwise, and the formats' error bodies.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fakellm/conversation.h"
#include "fakellm/resolve.h"

namespace kda::fakellm {

struct Reply {
  std::string text;  // may be empty when there are calls
  std::vector<ToolCall> calls;
};

struct RenderContext {
  std::string model;
  int step = 0;              // ids derive from this (all assistant turns so far), so a retried
                             // request gets the same ids and every turn gets new ones
  int seq = 0;               // request sequence number (message/response ids)
  size_t request_bytes = 0;  // usage: input_tokens = request_bytes / 4
  int chunk_chars = 24;
  bool responses_full = false;
  bool include_usage = false;
  // Responses "minimal": still begin with response.created (set when a cut fault fires, so the
  // cut happens before any output item reaches the client).
  bool responses_created = false;
};

struct SseEvent {
  std::string event;  // "event:" line; empty for chat completions (data only)
  std::string data;   // the serialized data line
};

// The whole stream. Index 0 is the "start" event (message_start, the role chunk,
// response.created or the first item); *first_delta is the index of the first delta event
// (the one a "malformed" fault corrupts).
std::vector<SseEvent> render_stream(Format format, const Reply& reply, const RenderContext& ctx, int* first_delta);
nlohmann::json render_body(Format format, const Reply& reply, const RenderContext& ctx);
nlohmann::json error_body(Format format, int status, const std::string& message);
// "event: x\ndata: y\n\n" (or "data: y\n\n").
std::string sse_text(const SseEvent& event);

// Splits text into pieces of at most n characters, never inside a UTF-8 sequence.
std::vector<std::string> split_utf8(const std::string& text, int n);

}  // namespace kda::fakellm
