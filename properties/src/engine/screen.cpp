// The screen: a check judged with the fast reference first, and with MPFR only where the screen cannot decide.
#include "attncheck/screen.h"

#include "attncheck/fast_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace attncheck {

ReferenceCounts &ReferenceCounts::of_this_thread() {
  thread_local ReferenceCounts counts;
  return counts;
}

bool &screen_on_this_thread() {
  thread_local bool on = true;
  return on;
}

void ExactSource::certain(std::vector<double> &bound, const std::vector<double> &value,
                          const std::vector<double> &err) {
  for (std::size_t x = 0; x < bound.size(); ++x) {
    const double b = bound[x], e = err[x];
    if (e == 0) {  // the fast value is the exact one (a row that sees no key, a value the semantics fix)
      if (!(b < std::numeric_limits<double>::infinity())) throw ScreenEscalates("an unbounded element");
      bound[x] = b * (1 - kScreenMargin);
      continue;
    }
    const double certain_bound = b * (1 - kScreenMargin) - e * (1 + kScreenMargin);
    if (!std::isfinite(value[x]) || !(certain_bound > 0) || !std::isfinite(certain_bound))
      throw ScreenEscalates("an element the fast value cannot decide");
    bound[x] = certain_bound;
    slack_ = std::max(slack_, e / certain_bound);
  }
}

std::pair<ExactForward, ForwardBounds> ExactSource::forward(const Problem &p) {
  if (mode_ == Mode::mpfr) {
    ExactForward exact = reference_forward(p);
    ForwardBounds bound = forward_bounds(p, exact, profile_);
    elements_ += static_cast<std::int64_t>(exact.out.size() + exact.lse.size());
    last_ = exact;
    return {std::move(exact), std::move(bound)};
  }
  std::optional<FastForward> fast = fast_forward(p);
  if (!fast) throw ScreenEscalates(fast_forward_declines(p));
  ExactForward values{.out = std::move(fast->out), .lse = std::move(fast->lse)};
  ForwardBounds bound = forward_bounds(p, values, profile_, BoundsFrom::approximate);
  certain(bound.out, values.out, fast->out_err);
  certain(bound.lse, values.lse, fast->lse_err);
  elements_ += static_cast<std::int64_t>(values.out.size() + values.lse.size());
  last_ = values;
  last_out_err_ = std::move(fast->out_err);
  last_lse_err_ = std::move(fast->lse_err);
  return {std::move(values), std::move(bound)};
}

std::vector<double> ExactSource::out_bound_upper(const std::vector<double> &bound) const {
  if (mode_ == Mode::mpfr) return bound;
  if (bound.size() != last_out_err_.size())
    throw std::invalid_argument("ExactSource::out_bound_upper: not the last forward's O bounds");
  std::vector<double> upper(bound.size());
  constexpr double kRoundUp = 1 + 0x1p-50;  // the three operations' rounding, upward
  for (std::size_t x = 0; x < bound.size(); ++x) {
    const double e = last_out_err_[x] * (1 + kScreenMargin);
    upper[x] = (bound[x] + e) * ((1 + kScreenMargin) / (1 - kScreenMargin)) * kRoundUp + e;
  }
  return upper;
}

std::pair<ExactForward, ForwardBounds> ExactSource::forward_rearranged(const Problem &q, const Rearrange &map) {
  ExactForward values{.out = map.out(last_.out), .lse = map.lse(last_.lse)};
  if (mode_ == Mode::mpfr) {
    ForwardBounds bound = forward_bounds(q, values, profile_);
    elements_ += static_cast<std::int64_t>(values.out.size() + values.lse.size());
    return {std::move(values), std::move(bound)};
  }
  ForwardBounds bound = forward_bounds(q, values, profile_, BoundsFrom::approximate);
  certain(bound.out, values.out, map.out(last_out_err_));
  certain(bound.lse, values.lse, map.lse(last_lse_err_));
  elements_ += static_cast<std::int64_t>(values.out.size() + values.lse.size());
  return {std::move(values), std::move(bound)};
}

std::pair<ExactBackward, BackwardBounds> ExactSource::backward(const Problem &p, const ExactForward &fwd) {
  if (mode_ == Mode::mpfr) {
    ExactBackward exact = reference_backward(p);
    BackwardBounds bound = backward_bounds(p, fwd, profile_);
    elements_ += static_cast<std::int64_t>(exact.dq.size() + exact.dk.size() + exact.dv.size());
    return {std::move(exact), std::move(bound)};
  }
  std::optional<FastBackward> fast = fast_backward(p);
  if (!fast) throw ScreenEscalates(fast_backward_declines(p));
  ExactBackward values{.dq = std::move(fast->dq), .dk = std::move(fast->dk), .dv = std::move(fast->dv)};
  BackwardBounds bound = backward_bounds(p, fwd, profile_, BoundsFrom::approximate);
  certain(bound.dq, values.dq, fast->dq_err);
  certain(bound.dk, values.dk, fast->dk_err);
  certain(bound.dv, values.dv, fast->dv_err);
  elements_ += static_cast<std::int64_t>(values.dq.size() + values.dk.size() + values.dv.size());
  last_grad_err_ =
      ExactBackward{.dq = std::move(fast->dq_err), .dk = std::move(fast->dk_err), .dv = std::move(fast->dv_err)};
  return {std::move(values), std::move(bound)};
}

Outcome judged(const PrecisionProfile &profile, Judgement judgement) {
  ReferenceCounts &counts = ReferenceCounts::of_this_thread();
  auto shared = std::make_shared<const Judgement>(std::move(judgement));
  if (screen_on_this_thread()) {
    try {
      ExactSource screen(ExactSource::Mode::screen, profile);
      Outcome o = (*shared)(screen);
      if (o.verdict == Verdict::pass) {
        counts.fast_elements += screen.elements();
        o.bound_slack = screen.ratio_slack();
        o.ratio_slack = screen.values_compared() ? o.bound_slack : 0;
        o.confirm = std::make_shared<const std::function<Outcome()>>([shared, profile] {
          ExactSource exact(ExactSource::Mode::mpfr, profile);
          return (*shared)(exact);
        });
        return o;
      }
    } catch (const ScreenEscalates &) {
      // an element the screen cannot decide: MPFR judges the case
    }
  }
  ExactSource exact(ExactSource::Mode::mpfr, profile);
  Outcome o = (*shared)(exact);
  counts.mpfr_elements += exact.elements();
  return o;
}

Outcome exact_if_at_least(const Outcome &o, double threshold) {
  if (!o.confirm || o.worst_ratio + o.ratio_slack <= threshold) return o;
  ++ReferenceCounts::of_this_thread().confirmations;
  return (*o.confirm)();
}

}  // namespace attncheck

namespace attncheck {

double ranked_ratio(double r) {
  if (!(r > 0) || !std::isfinite(r)) return r;
  int e = 0;
  const double m = std::frexp(r, &e);
  return std::ldexp(std::round(std::ldexp(m, kRankBits)), e - kRankBits);
}

double exact_rank(Outcome &o, double floor) {
  if (o.confirm) {
    const double s = o.worst_ratio, slack = o.ratio_slack;
    const double lo =
        std::max(0.0, s * (1 - 2 * kScreenMargin) - (1 + 2 * kScreenMargin) * (s * o.bound_slack + slack));
    const double rank = ranked_ratio(s + slack), lowest = ranked_ratio(lo);
    if (lowest == rank) return rank;
    if (rank <= floor) return lowest;
    o = exact_if_at_least(o, -std::numeric_limits<double>::infinity());
  }
  return ranked_ratio(o.worst_ratio);
}

}  // namespace attncheck
