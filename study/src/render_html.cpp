#include "document.h"

#include <fmt/format.h>

#include <string_view>

namespace attncheck::study {
namespace {

/// HTML-escapes s and turns the markdown spans the document uses (**bold**, `code`) into tags.
std::string inline_html(std::string_view s) {
  std::string o;
  bool bold = false, code = false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '*' && i + 1 < s.size() && s[i + 1] == '*') {
      o += bold ? "</strong>" : "<strong>";
      bold = !bold;
      ++i;
    } else if (c == '`') {
      o += code ? "</code>" : "<code>";
      code = !code;
    } else if (c == '<') {
      o += "&lt;";
    } else if (c == '>') {
      o += "&gt;";
    } else if (c == '&') {
      o += "&amp;";
    } else {
      o += c;
    }
  }
  return o;
}

constexpr std::string_view kStyle = R"(
body { font-family: -apple-system, "Segoe UI", Roboto, "Noto Sans", "Noto Sans CJK SC", sans-serif; max-width: 1100px;
       margin: 2em auto; padding: 0 1.5em; color: #222; line-height: 1.5; }
h1 { border-bottom: 2px solid #1f77b4; padding-bottom: .3em; }
h2 { margin-top: 2.2em; border-bottom: 1px solid #ccc; padding-bottom: .2em; }
table { border-collapse: collapse; margin: .5em 0 1.5em; font-size: 13px; }
caption { caption-side: top; text-align: left; font-style: italic; padding-bottom: .4em; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: right; vertical-align: top; }
th { background: #f0f4f8; }
td:first-child, th:first-child { text-align: left; }
tr:nth-child(even) td { background: #fafafa; }
.wide td { text-align: left; }
td.bad { color: #b00020; font-weight: bold; } td.warn { color: #b35c00; } td.good { color: #1b7a2f; }
figure { margin: 1em 0 2em; }
code { background: #f3f3f3; padding: 0 3px; }
nav ul { columns: 2; }
)";

/// Outcome and verdict cells are coloured: failures red, doubtful amber, passes green.
std::string_view cell_class(std::string_view c) {
  for (std::string_view bad : {"NaN", "Inf", "**wrong**", "**no**", "failed"})
    if (c.starts_with(bad)) return " class=\"bad\"";
  for (std::string_view warn : {"inaccurate", "**misleading**"})
    if (c.starts_with(warn)) return " class=\"warn\"";
  for (std::string_view good : {"correct", "**right**", "yes"})
    if (c.starts_with(good)) return " class=\"good\"";
  return "";
}

struct HtmlWriter {
  std::string out;
  void operator()(const Heading &h) {
    out += fmt::format("<h{0} id=\"{1}\">{2}</h{0}>\n", h.level, h.id, inline_html(h.text));
  }
  void operator()(const Paragraph &p) { out += "<p>" + inline_html(p.text) + "</p>\n"; }
  void operator()(const Bullets &b) {
    out += "<nav><ul>\n";
    for (const auto &i : b.items) out += "<li>" + inline_html(i) + "</li>\n";
    out += "</ul></nav>\n";
  }
  void operator()(const Table &t) {
    // Tables whose last column is prose (the claims) are left-aligned.
    constexpr std::size_t kProseColumns = 5;
    out += t.header.size() == kProseColumns && t.header.back() == "measured" ? "<table class=\"wide\">\n" : "<table>\n";
    if (!t.caption.empty()) out += "<caption>" + inline_html(t.caption) + "</caption>\n";
    out += "<tr>";
    for (const auto &h : t.header) out += "<th>" + inline_html(h) + "</th>";
    out += "</tr>\n";
    for (const auto &row : t.rows) {
      out += "<tr>";
      for (const auto &c : row) {
        out += "<td";
        out += cell_class(c);
        out += ">";
        out += inline_html(c);
        out += "</td>";
      }
      out += "</tr>\n";
    }
    out += "</table>\n";
  }
  void operator()(const Plot &p) { out += "<figure>\n" + render_svg(p.spec) + "</figure>\n"; }
};

}  // namespace

std::string render_html(const StudyResult &r) {
  HtmlWriter w;
  w.out = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<title>The √d_k study — attncheck</title>\n<style>";
  w.out += kStyle;
  w.out += "</style>\n</head>\n<body>\n";
  for (const auto &b : build_document(r)) std::visit(w, b);
  w.out += "</body>\n</html>\n";
  return w.out;
}

}  // namespace attncheck::study
