// The targeted phase: after a search that found nothing, for a PropertyDef::targeted property, mutants (mutate_case)
// of the passed cases of highest error ÷ bound, each judged like a search case; a mutant that passes higher than the
// weakest of them takes its place, so the phase climbs toward 1 (Hypothesis's target(), Predoo). A failing mutant is
// shrunk by walking its shrinkable_case tree as RapidCheck would; its reproduce string names "<id>/<dtype>@target",
// with the mutant's number and the path. Replaying it runs the search and the phase again up to its mutant,
// deterministic as they are, then follows the path.
#include "run_state.h"

#include "attncheck/gen.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace attncheck::engine {

namespace {
/// The targeted phase climbs from this many of the search's passed cases (those of highest error ÷ bound), and
/// mutates the highest of them but one time in kTargetExploreEvery (then any of them).
constexpr std::size_t kTargetParents = 4;
constexpr std::uint64_t kTargetExploreEvery = 4;

/// Record::where of TargetState::highest once a mutant holds it.
constexpr const char *kByMutant = "a mutant";

/// The targeted phase: up to `planned` mutants, each of a parent — mostly the highest (kTargetExploreEvery) — judged
/// in Phase::target; one passing higher than the weakest parent replaces it. Stops at the first failure (then
/// st.target.failed is its number, and the phase is shrink), at mutant `stop_after` (a reproduce: it failed
/// there), or when the guard binds.
void climb(RunState &st, const CaseOptions &co, std::uint64_t seed, int planned, int stop_after) {
  rc::Random random(mix(seed ^ fnv1a("targeted")));
  for (int n = 0; n < planned && n <= stop_after; ++n) {
    if (must_stop(st)) return;
    rc::Random pick = random.split();
    const std::size_t from = pick.next() % kTargetExploreEvery != 0 ? 0 : pick.next() % st.target.parents.size();
    const Case mutant = mutate_case(st.target.parents[from].second, pick, co);
    st.phase = Phase::target;
    judge_case(st, mutant);
    report_progress(st);
    if (st.failure.found) {
      st.target.failed = n;
      return;
    }
    if (st.last_outcome.verdict == Verdict::pass) {
      st.target.highest.offer(st.last_rank, [] { return std::string(kByMutant); }, st.last_outcome);
      keep_parent(st, st.last_rank, mutant);
    }
  }
  st.phase = Phase::search;
}

/// The targeted phase: climb() from the search's worst cases; `from` is the search's highest error ÷ bound (its
/// worst case is the first parent), `to` the highest a passing mutant reached — the first of the highest rank above
/// it — each exact (Record::settle).
void run_targeted(RunState &st, const CaseOptions &co, std::uint64_t seed, int planned, int stop_after) {
  if (st.target.parents.empty() || planned <= 0) return;
  st.target.counts.from = st.target.counts.to = st.counts.worst.settle().worst_ratio;
  st.target.highest =
      Record{.held = true, .rank = st.target.parents.front().first, .where = "the search", .outcome = {}};
  climb(st, co, seed, planned, stop_after);
  if (st.target.highest.where == kByMutant) st.target.counts.to = st.target.highest.settle().worst_ratio;
}
}  // namespace

void keep_parent(RunState &st, double rank, const Case &c) {
  auto &parents = st.target.parents;
  if (!st.def->targeted || !(rank > 0) || !std::isfinite(rank)) return;
  if (parents.size() == kTargetParents && rank <= parents.back().first) return;
  const auto at = std::find_if(parents.begin(), parents.end(), [&](const auto &p) { return p.first < rank; });
  parents.insert(at, {rank, c});
  if (parents.size() > kTargetParents) parents.pop_back();
}

double parents_floor(const RunState &st) {
  const auto &parents = st.target.parents;
  if (!st.def->targeted) return std::numeric_limits<double>::infinity();
  return parents.size() == kTargetParents ? std::max(parents.back().first, 0.0) : 0.0;
}

CaseResult judge_mutant(RunState &st, const Case &c, const Outcome &o, double rank, bool timed_out,
                        const std::string &slow) {
  using T = CaseResult::Type;
  st.last = c;
  st.last_outcome = o;
  st.last_rank = rank;
  if (o.verdict == Verdict::unsupported) {
    ++st.target.counts.declined;
    count_corners(st, c, /*was_decided=*/false);
    return {T::Discard, o.detail};
  }
  ++st.target.counts.cases;
  if (!slow.empty()) {
    remember_shape(st.run->shared.hung, c.spec.problem_shape());
    return {T::Success, slow};
  }
  if (o.verdict == Verdict::error) {
    if (st.counts.first_error.empty())
      st.counts.first_error = "targeted case " + std::to_string(st.target.counts.cases) + " (" + c.spec.describe() +
                              "): " + o.detail;
    return {T::Success, o.detail};
  }
  if (o.verdict != Verdict::undecided)
    count_corners(st, c, /*was_decided=*/true);
  if (o.verdict == Verdict::fail) {
    begin_shrink(st, c, o, timed_out, st.counts.cases + st.target.counts.cases);
    return {T::Failure, o.detail};
  }
  if (o.verdict == Verdict::pass)
    st.counts.worst.offer(
        rank,
        [&] { return "targeted case " + std::to_string(st.target.counts.cases) + " (" + c.spec.describe() + "): "; },
        o);
  return {T::Success, o.detail};
}

std::optional<rc::detail::Reproduce> target(RunState &st, const CaseOptions &co, std::uint64_t seed,
                                            const rc::detail::Reproduce *replay) {
  run_targeted(st, co, seed, replay ? replay->size + 1 : st.run->opt.targeted_plan(), replay ? replay->size : INT_MAX);
  if (!st.failure.found) return std::nullopt;
  if (replay) {
    if (st.target.failed != replay->size) return std::nullopt;  // the phase took another course
    // Follows the recorded path from the same mutant, and judges where it ends.
    const Case end = follow_path(st.failure.best, co, replay->shrinkPath);
    st.phase = Phase::reproduce;
    st.failure.found = false;
    judge_case(st, end);
    return *replay;
  }
  rc::detail::Reproduce found;
  found.size = st.target.failed;
  found.shrinkPath = shrink_walk(st, co);
  return found;
}

}  // namespace attncheck::engine
