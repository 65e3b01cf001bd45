#include "report/page.h"

#include <fmt/format.h>

namespace kda::report {

namespace {

// Every fetch is refused by the page itself: no scripts, styles only inline, images only data:.
constexpr const char* kPolicy = "default-src 'none'; style-src 'unsafe-inline'; img-src data:";

constexpr const char* kStyle = R"(
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1180px; color: #1d2430; padding: 0 16px; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #d8dee8; }
.sub { color: #5a6678; margin-top: 0; }
table { border-collapse: collapse; margin: 8px 0; } th, td { padding: 3px 10px; text-align: left; border-bottom: 1px solid #e6eaf0; vertical-align: top; }
th { background: #f3f5f9; font-weight: 600; } td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.ok { color: #1b7f3b; font-weight: 600; } .bad { color: #b42318; font-weight: 600; } .muted { color: #6b7585; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; } .card { border: 1px solid #d8dee8; border-radius: 6px; padding: 8px 14px; min-width: 150px; }
.card .k { color: #5a6678; font-size: 12px; } .card .v { font-size: 20px; font-weight: 600; }
.detail { color: #5a6678; font-size: 12px; max-width: 640px; }
svg text { font: 11px system-ui, sans-serif; fill: #1d2430; } svg .axis { stroke: #8a94a6; stroke-width: 1; }
svg .grid { stroke: #e6eaf0; stroke-width: 1; }
)";

}  // namespace

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string Source::str() const {
  return line > 0 ? fmt::format("{}:{}#{}", file, line, pointer) : fmt::format("{}#{}", file, pointer);
}

std::string provenance_attrs(double value, const std::vector<Source>& srcs, Derivation d) {
  std::string joined;
  for (const auto& s : srcs) joined += (joined.empty() ? "" : " ") + s.str();
  return fmt::format(R"( data-value="{:.17g}" data-src="{}"{})", value, escape(joined),
                     d == Derivation::kRatio ? R"( data-op="ratio")" : "");
}

std::string number(double value, std::string_view text, const Source& src) {
  return fmt::format(R"(<data value="{:.17g}" data-src="{}">{}</data>)", value, escape(src.str()), escape(text));
}

std::string ratio(double value, std::string_view text, const Source& numerator, const Source& denominator) {
  return fmt::format(R"(<data value="{:.17g}" data-src="{} {}" data-op="ratio">{}</data>)", value,
                     escape(numerator.str()), escape(denominator.str()), escape(text));
}

void Page::section(std::string_view id, std::string_view heading, std::string body) {
  body_ += fmt::format("<section id=\"{}\">\n<h2>{}</h2>\n{}\n</section>\n", escape(id), escape(heading), body);
}

std::string Page::html() const {
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      "<meta http-equiv=\"Content-Security-Policy\" content=\"{}\">\n"
      "<meta name=\"generator\" content=\"kda "
      "report\">\n<title>{}</title>\n<style>{}</style></head>\n<body>\n<h1>{}</h1>\n{}</body></html>\n",
      kPolicy, escape(title_), kStyle, escape(title_), body_);
}

std::string table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                  std::string_view css_class) {
  std::string s = css_class.empty() ? "<table>\n<tr>" : fmt::format("<table class=\"{}\">\n<tr>", escape(css_class));
  for (const auto& h : header) s += "<th>" + escape(h) + "</th>";
  s += "</tr>\n";
  for (const auto& r : rows) {
    s += "<tr>";
    for (const auto& c : r) s += c.starts_with("<td") ? c : "<td>" + c + "</td>";
    s += "</tr>\n";
  }
  return s + "</table>\n";
}

}  // namespace kda::report
