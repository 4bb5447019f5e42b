// The judge of given tensors (judge.h): the request checked, the problem built, the engine's judge_given.
#include "attncheck/judge.h"

#include "attncheck/gate.h"
#include "attncheck/run.h"
#include "attncheck/shell_quote.h"
#include "progress.h"

#include <fmt/core.h>

#include <cmath>
#include <functional>
#include <optional>
#include <stdexcept>

namespace attncheck::gate {

namespace {

RunError usage(std::string input, const std::string &what) { return {kExitUsage, std::move(input), what}; }

/// `t` holds finite values only, else RunError naming `name` and its first non-finite element.
void require_finite(const Tensor &t, const char *name) {
  const std::vector<double> values = t.to_vector();
  for (std::size_t x = 0; x < values.size(); ++x)
    if (!std::isfinite(values[x]))
      throw usage("", std::string(name) + " holds " + (std::isnan(values[x]) ? "NaN" : "an infinity") + " at " +
                            element_name(name, t.shape(), static_cast<std::int64_t>(x)) +
                            ": judge compares outputs on finite inputs (check() draws the non-finite ones)");
}

/// The features of `f` fit a problem of shape `s`, else RunError naming the argument.
void check_features(const Features &f, const Shape &s) {
  if (f.storage == KvStorage::paged || f.dropout_p != 0 || f.fp8)
    throw usage("", "judge takes the window, softcap, ALiBi, sinks, mask and varlen features; paged, dropout and FP8 "
                    "outputs are judged by check() on the kernel itself");
  if (f.storage == KvStorage::varlen) {  // sequence b: its first seqlens_q[b] rows and seqlens_k[b] keys
    if (f.mask_kind != MaskKind::none) throw usage("attn_mask", "a mask with a varlen batch is judged by check()");
    for (const auto &[lengths, longest, name] :
         {std::tuple{&f.seqlens_q, s.Lq, "cu_seqlens_q"}, std::tuple{&f.seqlens_k, s.Lk, "cu_seqlens_k"}}) {
      if (static_cast<std::int64_t>(lengths->size()) != s.B)
        throw usage(name, fmt::format("gives {} sequences; the batch has {}", lengths->size(), s.B));
      for (std::size_t b = 0; b < lengths->size(); ++b)
        if ((*lengths)[b] < 0 || (*lengths)[b] > longest)
          throw usage(name, fmt::format("sequence {} has {} elements, outside [0, {}]", b, (*lengths)[b], longest));
    }
  }
  if (f.window_left < -1 || f.window_right < -1)
    throw usage("window", "a window is (left, right) keys, each ≥ 0 or −1 for unbounded");
  if (!std::isfinite(f.softcap) || f.softcap < 0) throw usage("softcap", "softcap is a finite cap > 0 (0: none)");
  for (const auto &[values, name] : {std::pair{&f.alibi_slopes, "alibi_slopes"}, {&f.sinks, "sinks"}})
    if (!values->empty() && static_cast<std::int64_t>(values->size()) != s.Hq)
      throw usage(name, "has " + std::to_string(values->size()) + " values; one per query head: Hq = " +
                            std::to_string(s.Hq));
  if (f.mask_kind == MaskKind::none) return;
  if ((f.mask_B != 1 && f.mask_B != s.B) || (f.mask_H != 1 && f.mask_H != s.Hq) ||
      static_cast<std::int64_t>(f.mask.size()) != f.mask_B * f.mask_H * s.Lq * s.Lk)
    throw usage("attn_mask", "is [" + std::to_string(f.mask_B) + ", " + std::to_string(f.mask_H) + ", …] with " +
                                 std::to_string(f.mask.size()) + " values; it is [B or 1, Hq or 1, Lq, Lk] = [" +
                                 std::to_string(s.B) + ", " + std::to_string(s.Hq) + ", " + std::to_string(s.Lq) +
                                 ", " + std::to_string(s.Lk) + "]");
}

}  // namespace

Judgment judge(const JudgeRequest &rq) {
  const KernelContract contract = contract_of(rq.contract);
  Problem p;
  try {
    p.shape = shape_of(rq.q, rq.k, rq.v, rq.dout ? &*rq.dout : nullptr);
  } catch (const std::invalid_argument &e) {
    throw usage("", e.what());
  }
  for (const auto &[t, name] : {std::pair{&rq.q, "q"}, {&rq.k, "k"}, {&rq.v, "v"}}) require_finite(*t, name);
  if (rq.dout) require_finite(*rq.dout, "dout");
  p.params.scale = rq.scale.value_or(default_scale(p.shape.D));
  if (!std::isfinite(p.params.scale))
    throw usage("", "scale is " + std::to_string(p.params.scale) + ": a finite number, or none for 1/√D");
  p.params.mask = rq.causal ? Mask::causal : Mask::none;
  check_features(rq.features, p.shape);
  p.features = rq.features;
  p.q = rq.q, p.k = rq.k, p.v = rq.v, p.dout = rq.dout;
  try {
    std::optional<JudgeBar> bar;
    if (rq.progress) bar.emplace();
    return judge_given(p, rq.given, contract, rq.explain,
                       bar ? [&](const JudgeProgress &at) { bar->update(at); }
                           : std::function<void(const JudgeProgress &)>{});
  } catch (const std::invalid_argument &e) {
    throw usage("", e.what());
  }
}

int judge_exit_code(const Judgment &j, bool strict) {
  switch (j.verdict()) {
    case Verdict::fail: return kExitCounterexample;
    case Verdict::warn: return strict ? kExitCounterexample : kExitPass;
    case Verdict::undecided: return kExitInconclusive;
    default: return kExitPass;
  }
}

std::string judge_replay(const Judgment &j, std::string_view inputs, std::string_view layout) {
  if (j.features.any()) return "";  // the command takes no features
  std::string cmd = fmt::format("attncheck judge --inputs {} --dtype {} --scale {:.17g}", shell_quote(inputs),
                                dtype_name(j.dtype), j.scale);
  if (layout != "bhld") cmd += " --layout " + std::string(layout);
  if (j.mask != Mask::none) cmd += " --causal";
  if (const std::string c = j.contract.describe_changes(); c != "defaults") cmd += " --contract " + shell_quote(c);
  return cmd;
}

}  // namespace attncheck::gate
