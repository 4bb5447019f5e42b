// The shrink: RapidCheck walks the failure's shrink tree (a failure of the targeted or the declared-shapes phase is
// walked by shrink_walk, as RapidCheck would). A candidate counts as failing only when it fails at the same ladder
// step, so shrinking keeps the failure and does not slide into another one; after max_shrinks candidates every
// candidate but the current minimum is rejected. A hang (a call stopped at its timeout where the kernel's measured
// speed says it should have returned: KernelSpeed) is shrunk with a shorter call timeout (a candidate fails only by
// hanging too) and its minimal case confirmed once at the full timeout; later cases at or above its shape are skipped
// (counted), since each would wait a timeout again. A call too slow for its timeout is an undecided case instead.
#include "run_state.h"

#include "attncheck/gen.h"

#include <algorithm>
#include <stdexcept>

namespace attncheck::engine {

void begin_shrink(RunState &st, const Case &c, const Outcome &o, bool timed_out, int found_after) {
  st.failure.found = true;
  st.failure.hang = timed_out && o.step == Step::shape;
  st.failure.first = c;
  st.failure.first_outcome = o;
  st.failure.step = o.step;
  st.failure.best = c;
  st.failure.best_outcome = o;
  st.failure.original = c.spec;
  st.failure.found_after = found_after;
  st.phase = Phase::shrink;
}

std::chrono::milliseconds hang_shrink_timeout(const RunState &st) {
  return std::max(CheckOptions::kMinHangShrinkTimeout, st.ran.longest_ok * CheckOptions::kHangShrinkFactor);
}

CaseResult judge_candidate(RunState &st, const Case &c) {
  using T = CaseResult::Type;
  Failure &f = st.failure;
  if (c.same_as(f.best)) return {T::Failure, f.best_outcome.detail};
  if (f.shrinks_tried >= st.run->opt.max_shrinks) return {T::Success, "not tried: shrink budget spent"};
  if (must_stop(st)) return {T::Success, "not tried: time budget spent or interrupted"};
  ++f.shrinks_tried;
  bool timed_out = false;
  const Outcome o = evaluate_timed(st, c, &timed_out);
  if (cut_short(st)) return {T::Success, "interrupted or unavailable"};
  if (o.verdict == Verdict::fail && o.step == f.step && (!f.hang || timed_out)) {
    f.best = c;
    f.best_outcome = o;
    return {T::Failure, o.detail};
  }
  return {T::Success, "not the same failure"};
}

std::vector<std::size_t> shrink_walk(RunState &st, const CaseOptions &co) {
  std::vector<std::size_t> path;
  rc::Shrinkable<Case> at = shrinkable_case(st.failure.best, co);
  for (bool descended = true; descended;) {
    descended = false;
    auto shrinks = at.shrinks();
    for (std::size_t i = 0; !descended && st.failure.shrinks_tried < st.run->opt.max_shrinks && !must_stop(st); ++i) {
      auto child = shrinks.next();
      if (!child) break;
      const CaseResult r = judge_case(st, child->value());
      report_progress(st);
      if (r.type == CaseResult::Type::Failure) {
        at = std::move(*child);
        path.push_back(i);
        descended = true;
      }
    }
  }
  return path;
}

Case follow_path(const Case &c, const CaseOptions &co, const std::vector<std::size_t> &path) {
  rc::Shrinkable<Case> s = shrinkable_case(c, co);
  for (const std::size_t index : path) {
    auto shrinks = s.shrinks();
    for (std::size_t i = 0; i < index; ++i) shrinks.next();
    auto child = shrinks.next();
    if (!child) throw std::invalid_argument("check: the reproduce string's shrink path leaves the case's tree");
    s = std::move(*child);
  }
  return s.value();
}

void confirm_hang(RunState &st, std::vector<std::size_t> &shrink_path, PropertyReport &pr) {
  Failure &f = st.failure;
  if (!f.hang || st.interrupted || f.best.same_as(*f.first)) return;
  st.phase = Phase::reproduce;
  bool timed_out = false;
  const Outcome o = evaluate_timed(st, f.best, &timed_out);
  if (o.verdict == Verdict::fail && o.step == f.step && timed_out) {
    f.best_outcome = o;  // its message names the full timeout
  } else {
    f.best = *f.first;
    f.best_outcome = f.first_outcome;
    shrink_path.clear();
    pr.note = "the shrunk case returned within the full timeout: the counterexample is the case that hung first";
  }
}

}  // namespace attncheck::engine
