#include "fakellm/conversation.h"

namespace kda::fakellm {
namespace {

using nlohmann::json;

const json kNull;

const json& field(const json& j, const char* key) {
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

std::string str(const json& j, const char* key) {
  const json& v = field(j, key);
  return v.is_string() ? v.get<std::string>() : std::string();
}

// Text of a content value: a string, or a list of blocks with "text" (text, input_text,
// output_text). Tool results and other blocks are skipped.
std::string content_text(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string out;
  if (!content.is_array()) return out;
  for (const json& block : content) {
    if (block.is_string()) {
      out += (out.empty() ? "" : "\n") + block.get<std::string>();
      continue;
    }
    std::string type = str(block, "type");
    if (type == "text" || type == "input_text" || type == "output_text" ||
        (type.empty() && field(block, "text").is_string())) {
      out += (out.empty() ? "" : "\n") + str(block, "text");
    }
  }
  return out;
}

// Every string in a JSON value, concatenated (workdir search).
void all_strings(const json& j, std::string& out) {
  if (j.is_string()) {
    out += j.get_ref<const std::string&>();
    out += '\n';
  } else if (j.is_structured()) {
    for (const json& v : j) all_strings(v, out);
  }
}

void append(std::string& acc, const std::string& text) {
  if (text.empty()) return;
  if (!acc.empty()) acc += '\n';
  acc += text;
}

void read_tools(Format format, const json& tools, std::vector<OfferedTool>& out) {
  if (!tools.is_array()) return;
  for (const json& t : tools) {
    if (format == Format::kResponses && str(t, "type") == "namespace") {
      // {"type":"namespace","name":ns,"tools":[functions]}: each member is called as ns + name.
      std::vector<OfferedTool> members;
      read_tools(format, field(t, "tools"), members);
      for (OfferedTool& m : members) {
        m.ns = str(t, "name");
        m.call_name = m.name;
        m.name = m.ns + (!m.ns.empty() && m.ns.back() == '_' ? "" : "__") + m.name;  // mcp__kda__finish_round
        out.push_back(std::move(m));
      }
      continue;
    }
    OfferedTool o;
    if (format == Format::kAnthropic) {
      o.name = str(t, "name");
      o.schema = field(t, "input_schema");
    } else if (format == Format::kChat) {
      const json& fn = field(t, "function");
      o.name = str(fn, "name");
      if (o.name.empty()) o.name = str(t, "name");
      o.schema = field(fn, "parameters");
    } else {
      o.name = str(t, "name");
      if (o.name.empty()) o.name = str(t, "type");  // web_search and other built-ins
      o.custom = str(t, "type") == "custom";
      o.search = str(t, "type") == "tool_search";
      o.schema = field(t, "parameters");
    }
    if (format == Format::kAnthropic && o.name == "ToolSearch") o.search = true;
    if (!o.schema.is_object()) o.schema = json::object();
    bool known = false;
    for (const OfferedTool& e : out) known = known || e.name == o.name;
    if (!o.name.empty() && !known) out.push_back(std::move(o));
  }
}

// Counts runs of assistant items; a run made only of tool-search calls is not a turn.
struct RunCounter {
  bool in_run = false, has_search = false, has_other = false;
  int count = 0, all = 0;
  void item(bool search) {
    if (!in_run) in_run = true, has_search = false, has_other = false;
    (search ? has_search : has_other) = true;
  }
  void end() {
    if (in_run && !(has_search && !has_other)) ++count;
    if (in_run) ++all;
    in_run = false;
  }
};

void read_anthropic(const json& body, Conversation& c) {
  const json& messages = field(body, "messages");
  if (!messages.is_array()) return;
  RunCounter runs;
  for (const json& m : messages) {
    std::string role = str(m, "role");
    if (role == "assistant") {
      const json& content = field(m, "content");
      bool search = content.is_array() && !content.empty();
      if (content.is_array()) {
        for (const json& b : content) {
          std::string type = str(b, "type");
          if (type == "thinking" || type == "redacted_thinking") continue;
          if (!(type == "tool_use" && str(b, "name") == "ToolSearch")) search = false;
        }
      } else {
        search = false;
      }
      runs.item(search);
      c.last_results.clear();
    } else if (role == "user") {
      runs.end();
      const json& content = field(m, "content");
      append(c.user_text, content_text(content));
      if (content.is_array()) {
        for (const json& block : content) {
          if (str(block, "type") != "tool_result") continue;
          ToolResult r;
          r.id = str(block, "tool_use_id");
          r.text = content_text(field(block, "content"));
          r.is_error = field(block, "is_error") == true;
          c.last_results.push_back(std::move(r));
        }
      }
    }
    // role "system" (Claude Code's environment block) neither counts nor ends a run.
  }
  runs.end();
  c.assistant_turns = runs.count;
  c.all_turns = runs.all;
}

void read_chat(const json& body, Conversation& c) {
  const json& messages = field(body, "messages");
  if (!messages.is_array()) return;
  RunCounter runs;
  for (const json& m : messages) {
    std::string role = str(m, "role");
    if (role == "assistant") {
      runs.item(false);
      c.last_results.clear();
    } else if (role == "tool" || role == "function") {
      runs.end();
      ToolResult r;
      r.id = str(m, "tool_call_id");
      r.text = content_text(field(m, "content"));
      c.last_results.push_back(std::move(r));
    } else if (role == "user") {
      runs.end();
      append(c.user_text, content_text(field(m, "content")));
    }
  }
  runs.end();
  c.assistant_turns = runs.count;
  c.all_turns = runs.all;
  const json& opts = field(body, "stream_options");
  c.include_usage = field(opts, "include_usage") == true;
}

void read_responses(const json& body, Conversation& c) {
  const json& input = field(body, "input");
  if (input.is_string()) {
    c.user_text = input.get<std::string>();
    return;
  }
  if (!input.is_array()) return;
  RunCounter runs;
  for (const json& item : input) {
    std::string type = str(item, "type");
    std::string role = str(item, "role");
    bool is_message = type == "message" || (type.empty() && !role.empty());
    bool assistant = (is_message && role == "assistant") || type == "reasoning" ||
                     (type.size() > 5 && type.compare(type.size() - 5, 5, "_call") == 0);
    bool output = type.size() > 7 && type.compare(type.size() - 7, 7, "_output") == 0;
    if (assistant) {
      runs.item(type == "tool_search_call");
      c.last_results.clear();
    } else if (output) {
      runs.end();
      if (type == "tool_search_output") {
        read_tools(Format::kResponses, field(item, "tools"), c.tools);  // tools it loaded
      }
      ToolResult r;
      r.id = str(item, "call_id");
      const json& out = field(item, "output");
      if (out.is_object()) {
        r.text = content_text(field(out, "content"));
        if (r.text.empty()) r.text = out.dump();
      } else {
        r.text = content_text(out);
      }
      c.last_results.push_back(std::move(r));
    } else if (is_message && role == "user") {
      runs.end();
      append(c.user_text, content_text(field(item, "content")));
    }
    // developer/system messages neither count nor end a run.
  }
  runs.end();
  c.assistant_turns = runs.count;
  c.all_turns = runs.all;
}

}  // namespace

const char* format_name(Format format) {
  switch (format) {
    case Format::kAnthropic: return "anthropic";
    case Format::kChat: return "chat";
    case Format::kResponses: return "responses";
  }
  return "?";
}

std::optional<std::string> find_workdir(const std::string& text) {
  static const std::string kClaude = "Primary working directory: ";
  size_t p = text.find(kClaude);
  if (p != std::string::npos) {
    size_t start = p + kClaude.size();
    size_t end = text.find_first_of("\r\n", start);
    std::string dir = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    while (!dir.empty() && (dir.back() == ' ' || dir.back() == '\t')) dir.pop_back();
    if (!dir.empty()) return dir;
  }
  p = text.find("<cwd>");
  if (p != std::string::npos) {
    size_t start = p + 5;
    size_t end = text.find("</cwd>", start);
    if (end != std::string::npos && end > start) return text.substr(start, end - start);
  }
  return std::nullopt;
}

Conversation read_conversation(Format format, const json& body) {
  Conversation c;
  c.format = format;
  c.model = str(body, "model");
  c.stream = field(body, "stream") == true;
  read_tools(format, field(body, "tools"), c.tools);  // before the input: tool_search_output adds
  if (format == Format::kAnthropic) read_anthropic(body, c);
  if (format == Format::kChat) read_chat(body, c);
  if (format == Format::kResponses) read_responses(body, c);
  std::string text;
  all_strings(field(body, "system"), text);
  all_strings(field(body, "instructions"), text);
  all_strings(field(body, "messages"), text);
  all_strings(field(body, "input"), text);
  c.workdir = find_workdir(text);
  return c;
}

}  // namespace kda::fakellm
