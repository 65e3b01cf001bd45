#include "eval/code_digest.h"

#include <algorithm>
#include <cctype>

#include "elf/elf_file.h"
#include "util/sha256.h"

namespace kda::eval {

std::string compiled_code_digest(const std::filesystem::path& library, std::string_view symbol,
                                 std::string_view binding, bool returns_outputs) {
  auto image = elf::loaded_image_digest_file(library);
  if (!image.ok()) return "";
  Sha256 h;
  h.update_field(*image).update_field(symbol).update_field(binding);
  h.update_field(returns_outputs ? "returns outputs" : "destination passing");
  return h.hex_digest();
}

namespace {

// A single pass over Python source: code is copied less its comments and trailing blanks, string
// literals are copied whole (an f-string's replacement fields are code again, where `#` is kept).
class PythonLexer {
 public:
  explicit PythonLexer(std::string_view s) {
    // Python ends a line at \n, \r\n or a lone \r.
    source_.reserve(s.size());
    for (size_t k = 0; k < s.size(); ++k) {
      if (s[k] != '\r')
        source_ += s[k];
      else if (k + 1 >= s.size() || s[k + 1] != '\n')
        source_ += '\n';
    }
    s_ = source_;
  }
  std::string run() {
    code(false);
    end_line(false);
    return std::move(out_);
  }

 private:
  static bool is_prefix(std::string word) {
    std::transform(word.begin(), word.end(), word.begin(), [](unsigned char c) { return std::tolower(c); });
    for (const char* p : {"r", "u", "f", "b", "t", "br", "rb", "fr", "rf", "tr", "rt"})
      if (word == p) return true;
    return false;
  }
  static bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

  // Code until the end of the source, or (in an f-string's replacement field) its closing brace; in a
  // field, a ':' outside brackets starts the format spec, literal text with fields of its own.
  void code(bool field) {
    if (++nesting_ > kMaxNesting) {  // deeper than Python allows: the rest is kept as it is
      out_ += s_.substr(i_);
      i_ = s_.size();
      return;
    }
    int depth = 0, brackets = 0;
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (field && (c == '(' || c == '[')) ++brackets;
      if (field && (c == ')' || c == ']') && brackets > 0) --brackets;
      if (field && c == ':' && depth == 0 && brackets == 0) {
        format_spec();
        break;
      }
      if (c == '#' && !field) {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else if (c == '\n') {
        end_line(true);
        out_ += c;
        ++i_;
      } else if (c == '\'' || c == '"') {
        string_literal("");
      } else if (word_char(c)) {
        const size_t start = i_;
        while (i_ < s_.size() && word_char(s_[i_])) ++i_;
        const std::string word(s_.substr(start, i_ - start));
        if (i_ < s_.size() && (s_[i_] == '\'' || s_[i_] == '"') && is_prefix(word)) {
          string_literal(word);
        } else {
          out_ += word;
        }
      } else if (field && (c == '{' || c == '}')) {
        out_ += c;
        ++i_;
        if (c == '{') ++depth;
        if (c == '}' && depth-- == 0) break;
      } else {
        out_ += c;
        ++i_;
      }
    }
    --nesting_;
  }

  // A replacement field's format spec, from its ':' through the field's closing brace: text, with
  // nested fields ({width}) as code.
  void format_spec() {
    while (i_ < s_.size()) {
      const char c = s_[i_];
      out_ += c;
      ++i_;
      if (c == '}') return;
      if (c == '{') code(true);
    }
  }

  // A literal from its opening quote (after `prefix`), copied through its closing quote.
  void string_literal(const std::string& prefix) {
    out_ += prefix;
    const char q = s_[i_];
    const bool triple = s_.substr(i_, 3) == std::string(3, q);
    const bool formatted = prefix.find_first_of("fFtT") != std::string::npos;
    const size_t open = triple ? 3 : 1;
    out_ += s_.substr(i_, open);
    i_ += open;
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '\\' && i_ + 1 < s_.size() && !(formatted && s_[i_ + 1] == '{')) {
        out_ += s_.substr(i_, 2);
        i_ += 2;
      } else if (c == q && (!triple || s_.substr(i_, 3) == std::string(3, q))) {
        out_ += s_.substr(i_, open);
        i_ += open;
        break;
      } else if (c == '\n' && !triple) {
        break;  // unterminated: the line ends it (the interpreter would refuse the file)
      } else if (formatted && c == '{' && s_.substr(i_, 2) != "{{") {
        out_ += c;
        ++i_;
        code(true);
      } else {
        const size_t n = (formatted && (s_.substr(i_, 2) == "{{" || s_.substr(i_, 2) == "}}")) ? 2 : 1;
        out_ += s_.substr(i_, n);
        i_ += n;
      }
    }
    literal_end_ = out_.size();
  }

  // Before a newline in code (drop_empty) or at the end: the line's trailing blanks go, never into a
  // literal's text; before a newline, a line left empty goes whole.
  void end_line(bool drop_empty) {
    const size_t newline = out_.rfind('\n');
    const size_t line = newline == std::string::npos ? 0 : newline + 1;
    const size_t floor = std::max(line, std::min(literal_end_, out_.size()));
    size_t end = out_.size();
    while (end > floor && (out_[end - 1] == ' ' || out_[end - 1] == '\t' || out_[end - 1] == '\r')) --end;
    out_.resize(end);
    if (drop_empty && out_.size() == line && literal_end_ <= line && !out_.empty()) out_.pop_back();
  }

  static constexpr int kMaxNesting = 200;  // f-strings nest at most a few hundred deep in CPython
  std::string source_;
  std::string_view s_;
  size_t i_ = 0;
  int nesting_ = 0;
  std::string out_;
  size_t literal_end_ = 0;  // where the last literal ended in out_
};

}  // namespace

std::string python_code_text(std::string_view source) { return PythonLexer(source).run(); }

std::string python_code_digest(const std::vector<task::SourceFile>& sources, std::string_view entry_point,
                               bool returns_outputs) {
  std::vector<const task::SourceFile*> sorted;
  for (const auto& s : sources) sorted.push_back(&s);
  std::sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) { return a->path < b->path; });
  Sha256 h;
  for (const task::SourceFile* s : sorted) {
    const bool py = s->path.size() > 3 && s->path.ends_with(".py");
    h.update_field(s->path).update_field(py ? python_code_text(s->content) : s->content);
  }
  h.update_field(entry_point).update_field(returns_outputs ? "returns outputs" : "destination passing");
  return h.hex_digest();
}

}  // namespace kda::eval
