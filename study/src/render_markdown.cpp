#include "document.h"

#include <fmt/format.h>

namespace attncheck::study {
namespace {

std::string cell(const std::string &s) {
  std::string o;
  for (char c : s) {
    if (c == '|') o += "\\|";
    else o += c;
  }
  return o;
}

struct MarkdownWriter {
  std::string out;
  // Appended piecewise: `" " + cell(c)` trips GCC 12's -Wrestrict false positive.
  void append_cell(const std::string &c) {
    out += ' ';
    out += cell(c);
    out += " |";
  }
  void operator()(const Heading &h) { out += fmt::format("{} {}\n\n", std::string(static_cast<std::size_t>(h.level), '#'), h.text); }
  void operator()(const Paragraph &p) { out += p.text + "\n\n"; }
  void operator()(const Bullets &b) {
    for (const auto &i : b.items) out += "- " + i + "\n";
    out += "\n";
  }
  void operator()(const Table &t) {
    if (!t.caption.empty()) {
      out += '*';
      out += t.caption;
      out += "*\n\n";
    }
    out += "|";
    for (const auto &h : t.header) append_cell(h);
    out += "\n|";
    for (std::size_t i = 0; i < t.header.size(); ++i) out += " --- |";
    out += "\n";
    for (const auto &row : t.rows) {
      out += "|";
      for (const auto &c : row) append_cell(c);
      out += "\n";
    }
    out += "\n";
  }
  void operator()(const Plot &p) { out += "*(Figure: " + p.spec.title + " — see study.html.)*\n\n"; }
};

}  // namespace

std::string render_markdown(const StudyResult &r) {
  MarkdownWriter w;
  for (const auto &b : build_document(r)) std::visit(w, b);
  return w.out;
}

}  // namespace attncheck::study
