// A judgment of given tensors for people (report_io.h: judgment_text).
#include "common.h"

#include <fmt/core.h>

namespace attncheck::reporting {

using namespace detail;

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

std::string judgment_text(const Judgment &j) {
  const Shape &s = j.shape;
  std::string out = fmt::format(
      "attncheck judge: {} — {} B={} Hq={} Hkv={} Lq={} Lk={} D={} Dv={}{}{}, scale {}, contract {}\n",
      verdict_name(j.verdict()), dtype_name(j.dtype), s.B, s.Hq, s.Hkv, s.Lq, s.Lk, s.D, s.Dv,
      j.mask == Mask::none ? "" : fmt::format(" {}", mask_name(j.mask)),
      j.features.any() ? " " + j.features.describe() : "", decimal(j.scale), j.contract.describe_changes());
  for (const TensorJudgment &t : j.tensors) out += tensor_line(t);
  out += outcome_line("O, LSE", j.forward);
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

}  // namespace attncheck::reporting
