// The search: RapidCheck draws cases until one fails, or the planned count. Every phase's case is judged here
// (judge_case): skipped when at or above a shape that hung, evaluated with its calls timed (a call stopped at its
// timeout is a hang, or the kernel is slow there: KernelSpeed), and the search's own record kept — cases decided or
// declined, the corners and shapes they reached, the worst error ÷ bound, the targeted phase's parents.
#include "run_state.h"

#include "attncheck/gen.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <mutex>

namespace attncheck::engine {

namespace {
/// Every dimension of `s` at least that of `floor`.
bool at_or_above(const Shape &s, const Shape &floor) {
  return s.B >= floor.B && s.Hq >= floor.Hq && s.Hkv >= floor.Hkv && s.Lq >= floor.Lq && s.Lk >= floor.Lk &&
         s.D >= floor.D && s.Dv >= floor.Dv;
}

/// The search's record of case `c`, judged `o` of rank `rank` (`slow`: why a call was too slow for its timeout).
CaseResult judge_searched(RunState &st, const Case &c, const Outcome &o, double rank, bool timed_out,
                          const std::string &slow) {
  using T = CaseResult::Type;
  if (o.verdict == Verdict::unsupported) {
    ++st.counts.unsupported;
    count_corners(st, c, /*was_decided=*/false);
    remember_shape(st.counts.declined_shapes, c.spec.shape);
    return {T::Discard, o.detail};
  }
  ++st.counts.cases;
  // Which case: its number in the run and its spec (a note or the worst element names it).
  const auto in_case = [&] { return "case " + std::to_string(st.counts.cases) + " (" + c.spec.describe() + "): "; };
  if (!slow.empty()) {  // too slow for its timeout, not a hang: undecided, and its size is not tried again
    ++st.counts.undecided;
    if (st.counts.first_undecided.empty()) st.counts.first_undecided = in_case() + slow;
    remember_shape(st.run->shared.hung, c.spec.problem_shape());
    return {T::Success, slow};
  }
  if (o.verdict == Verdict::error) {  // not decided, and the property's verdict (settle_verdict)
    ++st.counts.undecided;
    if (st.counts.first_error.empty()) st.counts.first_error = in_case() + o.detail;
    return {T::Success, o.detail};
  }
  if (o.verdict != Verdict::undecided)
    count_corners(st, c, /*was_decided=*/true);
  if (o.verdict == Verdict::fail) {
    begin_shrink(st, c, o, timed_out, st.counts.cases);
    return {T::Failure, o.detail};
  }
  if (o.verdict == Verdict::undecided) {
    ++st.counts.undecided;
    if (st.counts.first_undecided.empty()) st.counts.first_undecided = in_case() + o.detail;
  }
  if (o.verdict == Verdict::pass) {
    remember_shape(st.counts.decided_shapes, c.spec.shape);
    keep_parent(st, rank, c);
    st.counts.worst.offer(rank, in_case, o);
  }
  return {T::Success, o.detail};
}
}  // namespace

}  // namespace attncheck::engine

namespace attncheck {

Outcome evaluate(const PropertyDef &def, const Env &env, const Case &c) {
  // An exception is the engine's (or the reference's) trouble — a kernel's own is a failed call (kernel_call.h) —
  // so it is no evidence against the kernel, and no undecided case either.
  const auto error = [](std::string what) {
    Outcome o;
    o.verdict = Verdict::error;
    o.detail = "attncheck's check threw: " + std::move(what);
    return o;
  };
  try {
    return def.run(env, c);
  } catch (const std::exception &e) {
    return error(e.what());
  } catch (...) {
    return error("an exception that is not a std::exception");
  }
}

}  // namespace attncheck

namespace attncheck::engine {

const Outcome &Record::settle() {
  outcome = exact_if_at_least(outcome, -std::numeric_limits<double>::infinity());
  return outcome;
}

void remember_shape(std::vector<Shape> &shapes, const Shape &s) {
  if (std::find(shapes.begin(), shapes.end(), s) == shapes.end()) shapes.push_back(s);
}

namespace {
/// The time a call of case `c` may take whatever the runner's own timeout: kAllowanceMargin × what the kernel's
/// measured speed predicts for the case's shape (its work and scores, on its slower entry point), at most what is
/// left before the run's guard; nullopt before any call returned. A correct kernel that is slow, or slowed down by
/// the machine's load, then finishes and is judged on its answers, so the report does not depend on the load; a call
/// stopped past it is a hang (or, where the guard capped it, the kernel's slowness).
std::optional<std::chrono::milliseconds> call_allowance(const RunState &st, const Case &c) {
  const KernelSpeed &speed = st.run->shared.speed;
  const Shape s = c.spec.problem_shape();
  const std::optional<double> forward = speed.predict(s, false), backward = speed.predict(s, true);
  if (!forward && !backward) return std::nullopt;
  double seconds = std::max(forward.value_or(0), backward.value_or(0)) * KernelSpeed::kAllowanceMargin;
  if (st.run->guard)
    seconds = std::min(seconds, std::max(std::chrono::duration<double>(*st.run->guard - Clock::now()).count(), 0.0));
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(seconds * 1e3)));
}
}  // namespace

namespace {
/// The case check() evaluates now (case_in_progress): set by evaluate_timed, its spec line written only when asked.
struct InProgress {
  std::string_view property, phase;
  Dtype dtype;
  std::uint64_t seed;
  CaseSpec spec;
};
std::mutex g_in_progress_mutex;
std::optional<InProgress> g_in_progress;

std::string_view phase_name(Phase p) {
  switch (p) {
    case Phase::search: return "search";
    case Phase::shrink: return "shrink";
    case Phase::target: return "targeted";
    case Phase::declared: return "declared";
    case Phase::reproduce: return "reproduce";
  }
  return "?";
}
}  // namespace

Outcome evaluate_timed(RunState &st, const Case &c, bool *timed_out, std::string *slow) {
  {
    const std::lock_guard lock(g_in_progress_mutex);
    g_in_progress = InProgress{st.def->id, phase_name(st.phase), st.run->opt.dtype, st.run->opt.seed, c.spec};
  }
  CallRecord &record = CallRecord::of_this_thread();
  record.reset();
  std::optional<CallAllowance> allowance;
  if (const auto floor = call_allowance(st, c)) allowance.emplace(*floor);
  std::optional<CallTimeout> limit;
  if (st.phase == Phase::shrink && st.failure.hang) limit.emplace(hang_shrink_timeout(st));
  Outcome o = evaluate(*st.def, st.run->env, c);
  st.ran.longest_ok = std::max(st.ran.longest_ok, record.longest_ok);
  *timed_out = record.timeouts > 0 || record.memory_faults > 0;
  if (slow && record.timed_out) {
    const KernelSpeed &speed = st.run->shared.speed;
    const std::optional<double> need = speed.predict(*record.timed_out, record.timed_out_backward);
    const double limit_s = std::chrono::duration<double>(record.timeout_limit).count();
    if (need && *need * KernelSpeed::kHangMargin > limit_s)
      *slow = fmt::format("{} call of {} needs about {:.3g} s at the kernel's speed ({}), more than 1/{} of its "
                          "{:.3g} s timeout: the kernel is slow there, not hanging (raise --timeout, or a smaller "
                          "plan: --profile quick)",
                          record.timed_out_backward ? "a backward" : "a forward", c.spec.problem_shape().describe(),
                          *need, speed.describe(record.timed_out_backward), KernelSpeed::kHangMargin, limit_s);
  }
  st.run->shared.speed.record(record);
  st.unavailable |= record.unavailable > 0;
  if (o.verdict != Verdict::fail || o.step != Step::shape) {  // every call returned: the largest such is news
    if (!st.ran.largest || c.spec.work() > st.ran.largest->work()) st.ran.largest = c.spec;
    const Shape s = c.spec.problem_shape();
    st.ran.longest_row = std::max(st.ran.longest_row, s.Lk);
    if (s.Lq == s.Lk) st.ran.largest_square = std::max(st.ran.largest_square, s.Lk);
    st.ran.most_elements = std::max(st.ran.most_elements, largest_tensor(s));
  }
  return o;
}

void count_corners(RunState &st, const Case &c, bool was_decided) {
  st.counts.coverage.add(corners_of(c.spec, st.corners) | st.reaches, was_decided, st.corners);
}

CaseResult judge_case(RunState &st, const Case &c) {
  using T = CaseResult::Type;
  if (st.phase == Phase::shrink) return judge_candidate(st, c);
  const bool searching = st.phase == Phase::search || st.phase == Phase::target || st.phase == Phase::declared;
  const auto at_or_above_hung = [&](const Shape &h) { return at_or_above(c.spec.problem_shape(), h); };
  if (searching && std::any_of(st.run->shared.hung.begin(), st.run->shared.hung.end(), at_or_above_hung)) {
    constexpr const char *kSkipped = "not run: at or above a shape that hung, was too slow or hit the memory limit";
    if (st.phase == Phase::declared) {
      st.shapes.back().verdict = Verdict::undecided;
      st.shapes.back().note = kSkipped;
    } else {
      ++st.counts.skipped;
    }
    return {T::Discard, kSkipped};
  }
  bool timed_out = false;
  std::string slow;
  Outcome o = evaluate_timed(st, c, &timed_out, searching ? &slow : nullptr);
  if (cut_short(st)) return {searching ? T::Failure : T::Success, "interrupted or unavailable"};
  // Records compare ranks; a reproduce reports its outcome's worst ratio: each exact (screen.h) — a rank only where it
  // can enter a record: above the search's worst (the targeted phase's highest) or the weakest parent.
  const Record &record = st.phase == Phase::target ? st.target.highest : st.counts.worst;
  const double floor =
      std::min(record.held ? record.rank : -std::numeric_limits<double>::infinity(), parents_floor(st));
  const bool ranked = st.phase == Phase::search || st.phase == Phase::target;
  const double rank = o.verdict == Verdict::pass && ranked ? exact_rank(o, floor) : 0;
  switch (st.phase) {
    case Phase::search: return judge_searched(st, c, o, rank, timed_out, slow);
    case Phase::target: return judge_mutant(st, c, o, rank, timed_out, slow);
    case Phase::declared: return judge_declared(st, c, o, timed_out, slow);
    case Phase::reproduce:
      st.last = c;
      st.last_outcome = exact_if_at_least(o, -std::numeric_limits<double>::infinity());
      if (o.verdict == Verdict::fail) return {T::Failure, o.detail};
      return {o.verdict == Verdict::unsupported ? T::Discard : T::Success, o.detail};
    case Phase::shrink: break;  // judge_candidate's
  }
  return {T::Success, ""};
}

void report_progress(const RunState &st) {
  if (!st.run->opt.on_progress) return;
  st.run->opt.on_progress(CheckProgress{.property = st.def->id,
                                        .property_index = st.index,
                                        .property_count = st.run->count,
                                        .cases = st.counts.cases + st.counts.unsupported,
                                        .target = st.run->opt.cases,
                                        .shrinking = st.phase == Phase::shrink,
                                        .shrinks_tried = st.failure.shrinks_tried});
}

std::optional<CaseInProgress> case_in_progress_now() {
  const std::lock_guard lock(g_in_progress_mutex);
  if (!g_in_progress) return std::nullopt;
  const InProgress &p = *g_in_progress;
  return CaseInProgress{.property = std::string(p.property),
                        .dtype = p.dtype,
                        .seed = p.seed,
                        .phase = std::string(p.phase),
                        .spec = p.spec.describe()};
}

}  // namespace attncheck::engine

namespace attncheck {

std::optional<CaseInProgress> case_in_progress() { return engine::case_in_progress_now(); }

const CallRecord::Timed &KernelSpeed::basis(bool on_backward) const {
  const CallRecord::Timed &own = on_backward ? backward : forward, &other = on_backward ? forward : backward;
  return own.work > 0 ? own : other;
}

std::optional<double> KernelSpeed::predict(const Shape &s, bool on_backward) const {
  const CallRecord::Timed &basis = this->basis(on_backward);
  if (basis.work == 0) return std::nullopt;
  const double fixed = std::chrono::duration<double>(quickest.value_or(std::chrono::nanoseconds{0})).count();
  const double scaled = std::max(std::chrono::duration<double>(basis.time).count() - fixed, 0.0);
  const auto scores = [](const Shape &x) {
    return static_cast<double>(std::max<std::int64_t>(x.B * x.Hq * x.Lq * x.Lk, 1));
  };
  const double ratio = std::max(static_cast<double>(s.work()) / static_cast<double>(basis.work),
                                scores(s) / scores(basis.shape));
  return fixed + scaled * ratio;
}

std::string KernelSpeed::describe(bool on_backward) const {
  const CallRecord::Timed &basis = this->basis(on_backward);
  const double seconds = std::chrono::duration<double>(basis.time).count();
  // A multiply-add per unit of work: 2 flops.
  return fmt::format("{:.3g} GFLOP/s on a {} call of {} in {:.3g} s",
                     2 * static_cast<double>(basis.work) / std::max(seconds, 1e-9) / 1e9,
                     &basis == &backward ? "backward" : "forward", basis.shape.describe(), seconds);
}

void KernelSpeed::record(const CallRecord &r) {
  forward.keep_larger(r.forward);
  backward.keep_larger(r.backward);
  if (r.quickest) quickest = std::min(quickest.value_or(*r.quickest), *r.quickest);
}

}  // namespace attncheck
