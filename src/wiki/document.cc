#include "wiki/document.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "wiki/front_matter.h"

namespace kda::wiki {

namespace {

bool ends_with(std::string_view s, std::string_view suf) {
  return s.size() >= suf.size() && s.substr(s.size() - suf.size()) == suf;
}

// Renders JSON as "a.b.c: value" lines, so ncu analyses are searchable by metric name and value.
void flatten(const nlohmann::json& j, const std::string& prefix, std::string& out, int depth) {
  if (depth > 12) return;
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out, depth + 1);
  } else if (j.is_array()) {
    size_t i = 0;
    for (const auto& v : j) flatten(v, fmt::format("{}[{}]", prefix, i++), out, depth + 1);
  } else {
    out += prefix + ": " + (j.is_string() ? j.get<std::string>() : j.dump()) + "\n";
  }
}

std::string first_string(const nlohmann::json& j, std::initializer_list<const char*> keys) {
  if (!j.is_object()) return "";
  for (const char* k : keys)
    if (j.contains(k) && j[k].is_string()) return j[k].get<std::string>();
  return "";
}

}  // namespace

std::string language_of(std::string_view p) {
  if (ends_with(p, ".cu") || ends_with(p, ".cuh")) return "cuda";
  if (ends_with(p, ".h") || ends_with(p, ".hpp") || ends_with(p, ".cc") || ends_with(p, ".cpp")) return "cpp";
  if (ends_with(p, ".py")) return "python";
  if (ends_with(p, ".md")) return "markdown";
  return "";
}

Result<Document> parse_document(const std::string& rel_path, std::string_view content, const std::string& kind) {
  Document d;
  d.path = rel_path;
  d.language = language_of(rel_path);
  if (ends_with(rel_path, ".json")) d.language = "json";
  if (d.language.empty()) d.language = "text";

  if (d.language == "markdown" || d.language == "text") {
    KDA_ASSIGN_OR_RETURN(FrontMatter fm, parse_front_matter(content, rel_path));
    std::string_view body = content.substr(fm.body_offset);
    std::string id = fm.scalar("id");
    d.kind = !kind.empty() ? kind : (fm.present && !id.empty() ? "page" : "doc");
    d.tags = fm.list("tags");
    if (auto t = fm.scalar("type"); !t.empty()) d.tags.push_back("type:" + t);
    d.related = fm.list("related");
    d.sources = fm.list("sources");
    std::string title = fm.scalar("title");
    std::vector<Chunk> chunks;
    int lines = static_cast<int>(std::count(body.begin(), body.end(), '\n')) + 1;
    if (!id.empty() && lines <= kMaxChunkLines) {
      // A page is one chunk: it is written as one unit and `kda wiki show <id>` opens it whole.
      chunks = chunk_markdown(body, fm.body_line);
      Chunk page;
      page.unit = "page";
      page.start_line = fm.body_line;
      page.end_line = fm.body_line + lines - 1;
      page.body = std::string(body);
      for (const auto& c : chunks) {
        if (!c.headings.empty()) page.headings += (page.headings.empty() ? "" : " | ") + c.title;
        if (page.title.empty() && !c.title.empty()) page.title = c.title;
      }
      if (!title.empty()) page.title = title;
      chunks = {page};
    } else {
      chunks = chunk_markdown(body, fm.body_line);
      for (auto& c : chunks)
        if (!title.empty() && c.title.empty()) c.title = title;
    }
    std::vector<std::string> id_aliases = fm.list("aliases");  // other ids that open this page
    for (auto& c : chunks) {
      if (!id.empty()) c.symbols.push_back(id);
      for (const auto& a : id_aliases) c.symbols.push_back(a);
      d.chunks.push_back({std::move(c), id});
    }
    return d;
  }
  if (d.language == "json") {
    nlohmann::json j = nlohmann::json::parse(content, nullptr, false);
    if (j.is_discarded()) return Status::bad_input(rel_path + ": not valid JSON");
    d.kind = kind.empty() ? "ncu" : kind;
    std::string text;
    flatten(j, "", text, 0);
    auto chunks = chunk_lines(text, kWindowLines);
    std::string title = first_string(j, {"kernel", "kernel_name", "name", "title"});
    for (auto& c : chunks) {
      c.title = title;
      if (!title.empty()) c.symbols.push_back(title);
      d.chunks.push_back({std::move(c), ""});
    }
    return d;
  }
  d.kind = kind.empty() ? "code" : kind;
  std::vector<Chunk> chunks = d.language == "python" ? chunk_python(content) : chunk_cpp(content);
  for (auto& c : chunks) d.chunks.push_back({std::move(c), ""});
  return d;
}

Result<std::vector<Document>> parse_pr_records(std::string_view jsonl, const std::string& origin) {
  std::vector<Document> out;
  size_t pos = 0;
  int line_no = 0;
  while (pos < jsonl.size()) {
    size_t nl = jsonl.find('\n', pos);
    if (nl == std::string_view::npos) nl = jsonl.size();
    std::string_view line = jsonl.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    std::string where = fmt::format("{}:{}", origin, line_no);
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return Status::bad_input(where + ": not a JSON object");
    if (!j.contains("repo") || !j["repo"].is_string())
      return Status::bad_input(where + ": /repo: missing or not a string");
    if (!j.contains("number") || !j["number"].is_number_integer())
      return Status::bad_input(where + ": /number: missing or not an integer");
    Document d;
    d.repo = j["repo"].get<std::string>();
    int64_t number = j["number"].get<int64_t>();
    d.path = fmt::format("pr/{}", number);
    d.kind = "pr";
    d.language = "diff";
    d.commit = first_string(j, {"merge_commit"});
    std::string title = first_string(j, {"title"});
    std::string text = fmt::format("# PR {}#{}: {}\n\n{}\n", d.repo, number, title, first_string(j, {"body"}));
    std::vector<std::string> files;
    if (j.contains("changed_files") && j["changed_files"].is_array())
      for (const auto& f : j["changed_files"])
        if (f.is_string()) files.push_back(f.get<std::string>());
    if (!files.empty()) {
      text += "\nChanged files:\n";
      for (const auto& f : files) text += "- " + f + "\n";
    }
    std::string diff = first_string(j, {"diff"});
    if (!diff.empty()) text += "\n" + diff;
    auto chunks = chunk_lines(text, kWindowLines);
    for (auto& c : chunks) {
      c.title = fmt::format("PR #{}: {}", number, title);
      c.symbols = files;
      c.unit = "pr";
      d.chunks.push_back({std::move(c), ""});
    }
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace kda::wiki
