#include "attncheck/ladder.h"

#include "attncheck/error_model.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <stdexcept>

namespace attncheck {

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::pass: return "pass";
    case Verdict::fail: return "FAIL";
    case Verdict::undecided: return "undecided";
    case Verdict::unsupported: return "unsupported";
    case Verdict::warn: return "WARN";
    case Verdict::error: return "ERROR";
  }
  return "?";
}

std::string_view verdict_id(Verdict v) {
  switch (v) {
    case Verdict::pass: return "pass";
    case Verdict::fail: return "fail";
    case Verdict::undecided: return "undecided";
    case Verdict::unsupported: return "unsupported";
    case Verdict::warn: return "warn";
    case Verdict::error: return "error";
  }
  return "?";
}

std::string_view step_id(Step s) {
  switch (s) {
    case Step::shape: return "shape";
    case Step::finite: return "finite";
    case Step::mask: return "mask";
    case Step::sums: return "sums";
    case Step::values: return "values";
  }
  return "?";
}

std::vector<std::int64_t> element_index(const std::vector<std::int64_t> &shape, std::int64_t flat) {
  std::vector<std::int64_t> idx(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}

std::string element_name(std::string_view name, const std::vector<std::int64_t> &index) {
  std::string out(name);
  out += "[";
  for (std::size_t d = 0; d < index.size(); ++d) {
    if (d) out += ",";
    out += std::to_string(index[d]);
  }
  return out + "]";
}

std::string element_name(std::string_view name, const std::vector<std::int64_t> &shape, std::int64_t index) {
  return element_name(name, element_index(shape, index));
}

std::string_view finding_kind_id(Finding::Kind k) {
  switch (k) {
    case Finding::Kind::call: return "call";
    case Finding::Kind::wrote_input: return "wrote_input";
    case Finding::Kind::wrote_padding: return "wrote_padding";
    case Finding::Kind::value: return "value";
    case Finding::Kind::changed: return "changed";
    case Finding::Kind::aggregate: return "aggregate";
  }
  return "?";
}

std::string output_of(std::string_view name) {
  // The outputs a name can start with, followed by its end, a space or a parenthesis ("LSE (padded)").
  static constexpr std::string_view kOutputs[] = {"LSE", "dQ", "dK", "dV", "O"};
  for (const std::string_view t : kOutputs)
    if (name.starts_with(t) && (name.size() == t.size() || name[t.size()] == ' ' || name[t.size()] == '('))
      return std::string(t);
  return {};
}

Finding element_finding(Finding::Kind kind, std::string_view name, const std::vector<std::int64_t> &shape,
                        std::int64_t flat, std::optional<double> got, std::optional<double> exact,
                        std::optional<double> bound) {
  Finding f;
  f.kind = kind;
  f.tensor = output_of(name);
  f.name = std::string(name);
  f.index = element_index(shape, flat);
  f.got = got;
  f.exact = exact;
  f.bound = bound;
  return f;
}

Finding aggregate_finding(std::string what) {
  Finding f;
  f.kind = Finding::Kind::aggregate;
  f.what = std::move(what);
  return f;
}

namespace {
std::string ratio_text(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", r);
  return buf;
}

std::string element_text(std::string_view name, const std::vector<std::int64_t> &shape, std::int64_t x, double got,
                         double exact, double bound) {
  return element_name(name, shape, x) + ": got " + hex_and_decimal(got) + ", exact " + hex_and_decimal(exact) +
         ", bound " + hex_and_decimal(bound);
}
}  // namespace

bool Ladder::check_order(Step s) {
  if (last_ && s < *last_)
    throw std::logic_error("ladder: step '" + std::string(step_id(s)) + "' after '" +
                           std::string(step_id(*last_)) + "'");
  last_ = s;
  return !failed();
}

void Ladder::judging(const Case &c, std::string what, double scale) {
  judged_ = c;
  judged_what_ = std::move(what);
  judged_scale_ = scale;
}

void Ladder::judging_original() {
  judged_.reset();
  judged_what_.clear();
  judged_scale_ = 0;
}

bool Ladder::fail(Step step, std::string detail, Finding finding) {
  if (!check_order(step)) return false;
  out_.verdict = Verdict::fail;
  out_.step = step;
  out_.finding = std::move(finding);
  out_.failing_case = judged_;
  out_.failing_scale = judged_scale_;
  out_.failing_what = judged_what_;
  // A failure that noted no ratio above 1 broke an exact check (bits, a fixed value, a write): error ÷ bound is +∞.
  if (!(out_.worst_ratio > 1)) {
    out_.worst_ratio = std::numeric_limits<double>::infinity();
    out_.worst = detail;
  }
  out_.detail = std::move(detail);
  return false;
}

void Ladder::undecided(Step step, std::string detail) {
  if (undecided_) return;  // the first reason is the one reported
  undecided_ = true;
  undecided_step_ = step;
  undecided_detail_ = std::move(detail);
}

void Ladder::note(double ratio, std::string where) {
  if (std::isnan(ratio)) ratio = std::numeric_limits<double>::infinity();
  if (out_.worst.empty() || ratio > out_.worst_ratio) {
    out_.worst_ratio = ratio;
    out_.worst = std::move(where);
  }
}

bool Ladder::call(const CallResult &r, std::string_view what) {
  if (!check_order(Step::shape)) return false;
  if (r.ok()) return true;
  if (r.status == ATTNCHECK_UNSUPPORTED) {
    out_.verdict = Verdict::unsupported;
    out_.detail = std::string(what) + " declined" + (r.message.empty() ? "" : ": " + r.message);
    return false;
  }
  Finding f;
  f.kind = Finding::Kind::call;
  f.what = std::string(what);
  return fail(Step::shape,
              std::string(what) + " returned status " + std::to_string(r.status) +
                  (r.message.empty() ? "" : ": " + r.message),
              std::move(f));
}

bool Ladder::intact(const Tensor &t, std::string_view name) {
  if (!check_order(Step::shape)) return false;
  const std::vector<bool> elem = t.element_mask();
  for (std::int64_t x = 0; x < t.storage_elems(); ++x)
    if (!elem[static_cast<std::size_t>(x)] && !std::isnan(t.get_storage(x))) {
      Finding f;
      f.kind = Finding::Kind::wrote_padding;
      f.tensor = output_of(name);
      f.name = std::string(name);
      f.index = {x};
      f.got = t.get_storage(x);
      return fail(Step::shape,
                  std::string(name) + ": padding element at storage offset " + std::to_string(x) + " was written (" +
                      hex_and_decimal(t.get_storage(x)) + ")",
                  std::move(f));
    }
  return true;
}

bool same_bits(double a, double b) { return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b); }

bool overflow_within_bound(double got, double exact, double bound, Dtype dt) {
  if (!std::isinf(got) || !std::isfinite(exact) || std::signbit(got) != std::signbit(exact)) return false;
  const double max = max_finite(dt);
  const int precision = -std::ilogb(unit_roundoff(dt));  // significand bits: 24, 11, 8
  const double threshold = max + std::ldexp(1.0, std::ilogb(max) - precision);  // max + ulp(max)/2
  return std::abs(exact) + bound >= threshold;
}

namespace {
/// `got` as the checks read it: an LSE of +∞ where the exact LSE is −∞ (a row that sees no key) reads as −∞ — both
/// say "no finite log-sum", and FlashAttention-2 writes +∞ there so that its backward's exp(s − LSE) is 0
/// (SPEC.md §2.3).
std::vector<double> checked_values(std::string_view name, const Tensor &got, const std::vector<double> &exact) {
  std::vector<double> g = got.to_vector();
  if (!name.starts_with("LSE")) return g;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  for (std::size_t x = 0; x < g.size() && x < exact.size(); ++x)
    if (exact[x] == -kInf && g[x] == kInf) g[x] = -kInf;
  return g;
}
}  // namespace

bool Ladder::finite(std::string_view name, const Tensor &got, const std::vector<double> &exact) {
  return finite(name, got, exact, {});
}

bool Ladder::finite(std::string_view name, const Tensor &got, const std::vector<double> &exact,
                    const std::vector<double> &bound) {
  if (!check_order(Step::finite)) return false;
  const std::vector<double> g = checked_values(name, got, exact);
  for (std::size_t x = 0; x < g.size(); ++x) {
    const auto ix = static_cast<std::int64_t>(x);
    if (std::isnan(exact[x])) {
      undecided(Step::finite, element_name(name, got.shape(), ix) + ": the exact value is NaN");
      continue;
    }
    if (!bound.empty() && std::isinf(bound[x]) && !std::isfinite(g[x])) {
      // SPEC §4.5: where the model has no bound (a possible overflow), even Inf or NaN is not evidence.
      undecided(Step::finite, element_name(name, got.shape(), ix) + ": not finite where the error model has no bound");
      continue;
    }
    const bool ok = std::isfinite(exact[x])
                        ? std::isfinite(g[x]) ||
                              (!bound.empty() && overflow_within_bound(g[x], exact[x], bound[x], got.dtype()))
                        : g[x] == exact[x];
    if (!ok) {
      const std::string where = element_text(name, got.shape(), ix, g[x], exact[x], bound.empty() ? 0 : bound[x]);
      note(std::numeric_limits<double>::infinity(), where);
      return fail(Step::finite,
                  where + (std::isnan(g[x]) ? " (NaN: produced, or the element was never written)" : ""),
                  element_finding(Finding::Kind::value, name, got.shape(), ix, g[x], exact[x],
                                  bound.empty() ? 0 : bound[x]));
    }
  }
  return true;
}

bool Ladder::masked(std::string_view name, const Tensor &got, const std::vector<double> &exact,
                    const std::vector<double> &bound) {
  if (!check_order(Step::mask)) return false;
  const std::vector<double> g = checked_values(name, got, exact);
  for (std::size_t x = 0; x < g.size(); ++x)
    if (bound[x] == 0 && !(g[x] == exact[x])) {
      const std::string where = element_text(name, got.shape(), static_cast<std::int64_t>(x), g[x], exact[x], 0);
      note(std::numeric_limits<double>::infinity(), where);
      return fail(Step::mask, where + " (the contract fixes this value)",
                  element_finding(Finding::Kind::value, name, got.shape(), static_cast<std::int64_t>(x), g[x],
                                  exact[x], 0.0));
    }
  return true;
}

bool Ladder::within(Step step, std::string_view name, const Tensor &got, const std::vector<double> &exact,
                    const std::vector<double> &bound) {
  if (failed()) return false;
  std::vector<double> g = checked_values(name, got, exact);
  for (std::size_t x = 0; x < g.size() && x < exact.size() && x < bound.size(); ++x)
    if (overflow_within_bound(g[x], exact[x], bound[x], got.dtype())) g[x] = exact[x];  // a legitimate overflow
  return within(step, name, g, exact, bound, got.shape());
}

bool Ladder::within(Step step, std::string_view name, const std::vector<double> &got,
                    const std::vector<double> &exact, const std::vector<double> &bound,
                    const std::vector<std::int64_t> &shape) {
  if (!check_order(step)) return false;
  if (got.size() != exact.size() || got.size() != bound.size())
    throw std::invalid_argument("ladder: sizes differ for " + std::string(name));
  std::int64_t worst = -1;
  double worst_ratio = -1;
  for (std::size_t x = 0; x < got.size(); ++x) {
    const auto ix = static_cast<std::int64_t>(x);
    if (!std::isfinite(bound[x]) || std::isnan(exact[x])) {
      if (got[x] != exact[x])
        undecided(step, element_text(name, shape, ix, got[x], exact[x], bound[x]) + ": no finite bound");
      continue;
    }
    double r = error_ratio(got[x], exact[x], bound[x]);
    if (std::isnan(r)) r = std::numeric_limits<double>::infinity();
    if (r > worst_ratio) worst_ratio = r, worst = ix;
  }
  if (worst < 0) return true;
  const auto w = static_cast<std::size_t>(worst);
  const std::string where = element_text(name, shape, worst, got[w], exact[w], bound[w]);
  note(worst_ratio, where);
  if (worst_ratio > 1)
    return fail(step, where + ", error ÷ bound " + ratio_text(worst_ratio),
                element_finding(Finding::Kind::value, name, shape, worst, got[w], exact[w], bound[w]));
  return true;
}

bool Ladder::each(std::initializer_list<TensorCheck> checks) {
  return each(std::span<const TensorCheck>(checks.begin(), checks.size()));
}

bool Ladder::each(std::span<const TensorCheck> checks) {
  const auto judge = [](const TensorCheck &c) {
    if (c.judging) c.judging();
  };
  for (const TensorCheck &c : checks)
    if (c.up_to >= Step::finite) {
      judge(c);
      finite(c.name, c.got, c.exact, c.bound);
    }
  for (const TensorCheck &c : checks)
    if (c.up_to >= Step::mask && c.masked) {
      judge(c);
      masked(c.name, c.got, c.exact, c.bound);
    }
  for (const Step step : {Step::sums, Step::values})
    for (const TensorCheck &c : checks)
      if (c.up_to == step) {
        judge(c);
        within(step, c.name, c.got, c.exact, c.bound);
      }
  return !failed();
}

Outcome Ladder::outcome() const {
  Outcome o = out_;
  if (o.verdict == Verdict::pass && undecided_) {
    o.verdict = Verdict::undecided;
    o.step = undecided_step_;
    o.detail = undecided_detail_;
  }
  return o;
}

}  // namespace attncheck
