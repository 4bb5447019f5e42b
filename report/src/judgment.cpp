// A judgment of given tensors (report_io.h): for people (judgment_text), and as the documents Judgment.save and
// `attncheck judge --report-dir` write — report.json (REPORT_SCHEMA.md, Judgment documents), summary.md, report.html.
#include "common.h"
#include "json_io.h"

#include <fmt/core.h>

namespace attncheck::reporting {

using namespace detail;
using namespace json_detail;

namespace {

std::string tensor_line(const TensorJudgment &t) {
  std::string line = fmt::format("  {:<4} ", t.tensor);
  if (t.worst_index.empty()) {
    line += "no element decided";
  } else {
    line += fmt::format("worst {}: got {}, exact {}, bound {} — error ÷ bound {}",
                        element_name(t.tensor, t.worst_index), hex_dec(t.got), hex_dec(t.exact), decimal(t.bound),
                        ratio_text(t.ratio));
    line += t.exceeding ? fmt::format("; {} of {} elements exceed their bound", t.exceeding, t.elements)
                        : fmt::format("; all {} elements within their bound", t.elements - t.undecided);
  }
  if (t.undecided) line += fmt::format(" ({} the error model cannot bound)", t.undecided);
  return line + "\n";
}

std::string outcome_line(std::string_view what, const Outcome &o) {
  if (o.verdict == Verdict::pass) return "";
  const std::string step = o.step ? std::string(step_id(*o.step)) : "?";
  const std::string verdict = o.verdict == Verdict::fail ? "first failing check" : "could not decide";
  return fmt::format("  {} ({}): {} — {}\n", verdict, what, step, first_line(o.detail));
}

}  // namespace

namespace {
/// "f16 B=1 Hq=8 Hkv=2 Lq=128 Lk=128 D=64 Dv=64 causal, scale 0.125, contract defaults": what was judged.
std::string problem_text(const Judgment &j) {
  const Shape &s = j.shape;
  return fmt::format("{} B={} Hq={} Hkv={} Lq={} Lk={} D={} Dv={}{}{}, scale {}, contract {}", dtype_name(j.dtype), s.B,
                     s.Hq, s.Hkv, s.Lq, s.Lk, s.D, s.Dv,
                     j.mask == Mask::none ? "" : fmt::format(" {}", mask_name(j.mask)),
                     j.features.any() ? fmt::format(" {}", j.features.describe()) : "", decimal(j.scale),
                     j.contract.describe_changes());
}

/// What the judgment found beyond its tensors' lines: the ladders' first failing checks, the notes, the hints and
/// the declarations under which the tensors would pass — indented lines, "" for a plain pass.
std::string findings_text(const Judgment &j) {
  std::string out = outcome_line("O, LSE", j.forward);
  if (j.backward) {
    out += outcome_line("dQ, dK, dV", *j.backward);
    if (j.backward_tier == Tier::advisory && j.backward->verdict == Verdict::fail)
      out += "  the gradients are advisory under this contract: a warning, not a failure\n";
  }
  for (const std::string &note : j.notes) out += fmt::format("  {}\n", note);
  for (const Hint &h : j.hints) out += fmt::format("  hint: {}\n", h.text);
  for (const Explanation &e : j.explained_by)
    out += fmt::format("  would pass under {}: {}\n", e.declaration, e.meaning);
  if (!j.explained_by.empty())
    out += "  (one input is evidence, not proof: attncheck.check(fn, contract=…) confirms a declaration on fresh "
           "cases)\n";
  return out;
}
}  // namespace

std::string judgment_text(const Judgment &j) {
  std::string out = fmt::format("attncheck judge: {} — {}\n", verdict_name(j.verdict()), problem_text(j));
  for (const TensorJudgment &t : j.tensors) out += tensor_line(t);
  return out + findings_text(j);
}

namespace {
/// The judgment's markdown: the verdict, the problem, a table of the tensors, what failed, and how to replay.
std::string judgment_markdown(const Judgment &j, const JudgmentFiles &files) {
  std::string out =
      fmt::format("## attncheck judge: {}\n\n`{}`\n\n", verdict_name(j.verdict()), md_escape(problem_text(j)));
  out += "| tensor | elements | beyond their bound | undecided | worst element | got | exact | bound | err/bound |\n";
  out += "|---|---:|---:|---:|---|---|---|---|---:|\n";
  for (const TensorJudgment &t : j.tensors)
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", t.tensor, t.elements, t.exceeding,
                       t.undecided, t.worst_index.empty() ? "—" : fmt::format("`{}`", element_name(t.tensor, t.worst_index)),
                       decimal(t.got), decimal(t.exact), decimal(t.bound), ratio_text(t.ratio));
  if (const std::string said = findings_text(j); !said.empty()) out += "\n```\n" + said + "```\n";
  out += "\nInputs: `" + md_escape(files.inputs) + "`";
  out += files.replay.empty() ? "\n" : "; replay: `" + files.replay + "`\n";
  return out;
}

std::string judgment_html(const Judgment &j, const JudgmentFiles &files) {
  std::string rows;
  for (const TensorJudgment &t : j.tensors)
    rows += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
                        "<td>{}</td></tr>\n",
                        t.tensor, t.elements, t.exceeding, t.undecided,
                        t.worst_index.empty() ? "—" : xml_escape(element_name(t.tensor, t.worst_index)),
                        xml_escape(hex_dec(t.got)), xml_escape(hex_dec(t.exact)), decimal(t.bound),
                        ratio_text(t.ratio));
  return "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>attncheck judge</title>\n<style>"
         "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
         "padding:2px 6px}pre{background:#f6f6f6;padding:8px;white-space:pre-wrap}</style></head><body>\n"
         "<h1>attncheck judge: " + std::string(verdict_name(j.verdict())) + "</h1>\n"
         "<table><tr><th>tensor</th><th>elements</th><th>beyond their bound</th><th>undecided</th><th>worst element"
         "</th><th>got</th><th>exact</th><th>bound</th><th>err/bound</th></tr>\n" + rows + "</table>\n<pre>" +
         xml_escape(judgment_text(j)) + "</pre>\n<p>Inputs: <code>" + xml_escape(files.inputs) + "</code>" +
         (files.replay.empty() ? "" : "; replay: <code>" + xml_escape(files.replay) + "</code>") +
         "</p>\n</body></html>\n";
}
}  // namespace

std::string judgment_json(const Judgment &j, const JudgmentFiles &files) {
  const Shape &s = j.shape;
  ojson tensors = ojson::array();
  for (const TensorJudgment &t : j.tensors)
    tensors.push_back(ojson{{"tensor", t.tensor},
                            {"shape", t.shape},
                            {"elements", t.elements},
                            {"exceeding", t.exceeding},
                            {"undecided", t.undecided},
                            {"worst_index", t.worst_index},
                            {"got", hex(t.got)},
                            {"exact", hex(t.exact)},
                            {"bound", hex(t.bound)},
                            {"ratio", ratio_json(t.ratio)}});
  ojson explained = ojson::array(), hints = ojson::array();
  for (const Explanation &e : j.explained_by) explained.push_back(explanation_json(e));
  for (const Hint &h : j.hints) hints.push_back(hint_json(h));
  const ojson doc{{"format", "attncheck-judgment"},
                  {"version", 1},
                  {"verdict", verdict_id(j.verdict())},
                  {"dtype", dtype_name(j.dtype)},
                  {"shape", ojson{{"B", s.B}, {"Hq", s.Hq}, {"Hkv", s.Hkv}, {"Lq", s.Lq}, {"Lk", s.Lk}, {"D", s.D},
                                  {"Dv", s.Dv}}},
                  {"mask", mask_name(j.mask)},
                  {"features", j.features.describe()},
                  {"scale", hex(j.scale)},
                  {"contract", j.contract.describe()},
                  {"tensors", std::move(tensors)},
                  {"forward", outcome_json(j.forward)},
                  {"backward", j.backward ? outcome_json(*j.backward) : ojson(nullptr)},
                  {"backward_tier", tier_name(j.backward_tier)},
                  {"explained_by", std::move(explained)},
                  {"hints", std::move(hints)},
                  {"notes", j.notes},
                  {"inputs", files.inputs},
                  {"replay", files.replay}};
  return doc.dump(2) + "\n";
}

void write_judgment(const Judgment &j, const JudgmentFiles &files, const std::filesystem::path &dir) {
  prepare_report_dir(dir);
  write_file(dir / "report.json", judgment_json(j, files));
  write_file(dir / "summary.md", judgment_markdown(j, files));
  write_file(dir / "report.html", judgment_html(j, files));
}

}  // namespace attncheck::reporting
