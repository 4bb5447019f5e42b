// The engine: drives RapidCheck directly (rc::detail::checkProperty) for each selected property, so that every
// failure keeps its seed and reproduce string, and turns its results into a Report.
//
// One RapidCheck run per property. Its body draws a Case (gen_case) and runs the property; the run moves through
// phases the body tracks itself:
//   search    — cases until one fails, or the planned count;
//   shrink    — RapidCheck walks the failure's shrink tree; a candidate counts as failing only when it fails at
//               the same ladder step (so shrinking keeps the failure and does not slide into another one), and
//               after max_shrinks candidates every candidate but the current minimum is rejected. A hang (a call
//               stopped at its timeout where the kernel's measured speed says it should have returned: KernelSpeed)
//               is shrunk with a shorter call timeout (a candidate fails only by hanging too) and its minimal case
//               confirmed once at the full timeout; later cases at or above its shape are skipped (counted), since
//               each would wait a timeout again. A call too slow for its timeout is an undecided case instead;
//   target    — after a search that found nothing, for a PropertyDef::targeted property: mutants (mutate_case)
//               of the passed cases of highest error ÷ bound, each judged like a search case; a mutant that passes
//               higher than the weakest of them takes its place, so the phase climbs toward 1 (Hypothesis's
//               target(), Predoo). A failing mutant is shrunk by walking its shrinkable_case tree as RapidCheck
//               would; its reproduce string names "<id>/<dtype>@target", with the mutant's number and the path;
//   reproduce — one replayed case from a reproduce string (a targeted one: the search and the phase run again up
//               to its mutant, deterministic as they are, then the path is followed).
//
// What runs is the plan's alone — cases, shrinks, the seed — so a report is the same under any load. The time
// budget is a guard over the whole check: when it passes, nothing new starts, and the properties it cut are
// undecided, each saying how far it got.
#include "attncheck/check.h"

#include "attncheck/gen.h"
#include "attncheck/hand_over.h"
#include "attncheck/property.h"

#include <fmt/core.h>
#include <rapidcheck/Check.h>
#include <rapidcheck/detail/Configuration.h>
#include <rapidcheck/detail/Property.h>
#include <rapidcheck/detail/Results.h>
#include <rapidcheck/detail/TestListenerAdapter.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <fstream>
#include <stdexcept>
#include <unordered_map>

namespace attncheck {

namespace {
using Clock = std::chrono::steady_clock;
using rc::detail::CaseResult;

/// RapidCheck's discard limit per target case: a kernel that declines most cases ends the search early.
constexpr int kMaxDiscardRatio = 5;
/// A pass needs its decided cases on at least this many distinct shapes, or on every shape the plan has when it
/// has fewer (a shape pool's size; without a pool, the target cases): a pass on two shapes says almost nothing.
constexpr std::size_t kMinPassShapes = 3;
/// Advisory properties whose counterexample the required ladder may decide (hand_over.h): nonfinite_output's cases
/// are accuracy's, drawn from the extremes more often; a NaN there with a finite bound is accuracy's failure.
constexpr std::string_view kHandsOver[] = {"nonfinite_output"};
/// A compile-friendly pool grows past a shape the kernel declines: at most this many draws per shape asked for.
constexpr int kPoolDrawsPerShape = 8;
/// One drawn pool shape in this many has the buckets' batches and GQA groups; the others have few heads.
constexpr int kPoolHeadsEvery = 3;

enum class Phase { search, shrink, target, reproduce };

/// FNV-1a: a stable hash of a property id (std::hash is not stable across platforms).
std::uint64_t fnv1a(std::string_view s) {
  constexpr std::uint64_t kOffset = 0xcbf29ce484222325ull, kPrime = 0x100000001b3ull;
  std::uint64_t h = kOffset;
  for (char ch : s) h = (h ^ static_cast<unsigned char>(ch)) * kPrime;
  return h;
}
/// splitmix64 finalizer: decorrelates nearby seeds.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// Each property's cases depend only on the seed, its id and the dtype — not on which other properties run.
std::uint64_t property_seed(std::uint64_t seed, std::string_view id, Dtype dt) {
  return mix(seed ^ fnv1a(id) ^ (static_cast<std::uint64_t>(dt) << 56));
}
/// RapidCheck test id of a property run: the key of its reproduce map.
std::string run_id(std::string_view id, Dtype dt) { return std::string(id) + "/" + std::string(dtype_name(dt)); }
/// The reproduce map's key of a counterexample the targeted phase found: its Reproduce's size is the mutant's
/// number, its shrink path a path in that mutant's shrinkable_case tree.
std::string target_id(std::string_view id, Dtype dt) { return run_id(id, dt) + "@target"; }
/// The targeted phase climbs from this many of the search's passed cases (those of highest error ÷ bound), and
/// mutates the highest of them but one time in kTargetExploreEvery (then any of them).
constexpr std::size_t kTargetParents = 4;
constexpr std::uint64_t kTargetExploreEvery = 4;

/// The compile-friendly pool a check draws its cases' shapes from (none: `shapes` null).
struct ShapePool {
  std::shared_ptr<const std::vector<Shape>> shapes;
  int plan = 0;                 ///< the shapes asked for (CheckOptions::shape_pool, kAutoShapePool)
  std::vector<Shape> declined;  ///< shapes the kernel declined while the pool was drawn (accepted_pool)
};

/// What one check() call shares among its properties: what was asked, the guard, the reproduce string's cases, and
/// what it learns about the kernel.
struct CheckRun {
  const CheckOptions &opt;
  const Env &env;
  std::size_t count;                       ///< the selected properties
  std::optional<Clock::time_point> guard;  ///< nothing new starts after it (CheckOptions::time_budget, end)
  /// The reproduce string's failures, by run_id or target_id; nullptr: a search.
  const std::unordered_map<std::string, rc::detail::Reproduce> *reproduce;
  KernelRunState &shared;  ///< the caller's (CheckOptions::shared), else this call's
  ShapePool pool;          ///< the compile-friendly pool the kernel accepts (none: shapes null)
  /// declines_unequal_head_dims, asked once, when the first property with Dv = Lk needs it.
  bool declines_unequal_head_dims();
  std::optional<bool> unequal_head_dims_declined;
};

/// What a property's search has counted: cases decided or not, declined, skipped, its worst error ÷ bound, the
/// corners its decided and declined cases reached (coverage.h); the distinct shapes of the decided cases and of the
/// declined ones (the minimum evidence of a pass, and why it is missing), and what left the first undecided case
/// undecided.
struct SearchCounts {
  int cases = 0, unsupported = 0, undecided = 0, skipped = 0;
  double worst_ratio = 0;
  std::string worst;
  Coverage coverage;
  std::vector<Shape> decided_shapes, declined_shapes;
  std::string first_undecided;
};

/// Of the problems whose calls all returned: the longest call, the largest case, and (long_rows reports them) the
/// longest row, the largest square (Lq = Lk), the most elements in one tensor.
struct RanSizes {
  std::chrono::milliseconds longest_ok{0};
  std::optional<CaseSpec> largest;
  std::int64_t longest_row = 0, largest_square = 0, most_elements = 0;
};

/// A failure found (by the search or the targeted phase) and its shrinking: the case that failed first, and the
/// current minimum.
struct Failure {
  bool found = false;
  bool hang = false;  ///< a call stopped at a limit: its timeout, or the memory limit
  std::optional<Case> first;
  Outcome first_outcome;
  std::optional<Step> step;  ///< where it failed: a candidate fails at the same step, or counts as passing
  Case best;
  Outcome best_outcome;
  CaseSpec original;
  int found_after = 0, shrinks_tried = 0;
};

/// The targeted phase: the cases it climbs from (highest error ÷ bound first), what it did, and the number of the
/// mutant that failed.
struct TargetState {
  std::vector<std::pair<double, Case>> parents;
  TargetedSearch counts;
  int failed = -1;
};

/// What the body of one RapidCheck run records.
struct RunState {
  const PropertyDef *def = nullptr;
  CheckRun *run = nullptr;
  std::size_t index = 0;  // of this property among the selected ones
  Phase phase = Phase::search;
  Clock::time_point started;

  SearchCounts counts;
  CornerContext corners;  // how a case's corners are read (the property calls the backward, passes an LSE)
  CornerSet reaches;      // the corners every case reaches by construction (PropertyDef::reaches)
  bool budget_exhausted = false, interrupted = false;
  bool unavailable = false;  // the runner gave up on the kernel (its restarts are spent): nothing more to decide
  RanSizes ran;

  Failure failure;
  // reproduce and the targeted phase: the last case evaluated (the replayed one) and its outcome.
  std::optional<Case> last;
  Outcome last_outcome;
  TargetState target;
};

Outcome evaluate(const PropertyDef &def, const Env &env, const Case &c) {
  try {
    return def.run(env, c);
  } catch (const std::exception &e) {
    // An exception is the engine's (or the reference's) trouble, not evidence against the kernel.
    Outcome o;
    o.verdict = Verdict::undecided;
    o.detail = std::string("the check threw: ") + e.what();
    return o;
  }
}

void remember_shape(std::vector<Shape> &shapes, const Shape &s) {
  if (std::find(shapes.begin(), shapes.end(), s) == shapes.end()) shapes.push_back(s);
}

/// Bytes of memory available to this process: MemAvailable of /proc/meminfo, else the free pages.
std::uint64_t available_memory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0;
  for (std::string unit; meminfo >> key >> kib >> unit;)
    if (key == "MemAvailable:") return kib * 1024;
  return static_cast<std::uint64_t>(sysconf(_SC_AVPHYS_PAGES)) * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

/// The case of more than 2³¹ elements (CheckOptions::huge_cases): allowed in `co` when its tensors fit the kernel's
/// memory limit with room for the kernel itself, and its copies here fit the memory available; else why not.
std::optional<std::string> allow_huge_case(const CheckOptions &opt, CaseOptions &co) {
  const std::uint64_t need = tensor_bytes(huge_stretch(opt.dtype)), mib = std::uint64_t{1} << 20;
  const std::uint64_t room = opt.memory_limit_mib == 0 ? UINT64_MAX
                             : opt.memory_limit_mib * mib > CheckOptions::kHugeMemoryMargin
                                 ? opt.memory_limit_mib * mib - CheckOptions::kHugeMemoryMargin
                                 : 0;
  const std::uint64_t host = available_memory();
  const std::string head = "no case of more than 2³¹ elements: its tensors take " + std::to_string(need / mib) + " MiB";
  if (need > room)
    return head + ", and the kernel's memory limit of " + std::to_string(opt.memory_limit_mib) + " MiB leaves " +
           std::to_string(room / mib) + " (--memory-limit)";
  if (need > host / CheckOptions::kHugeHostCopies)
    return head + ", " + std::to_string(CheckOptions::kHugeHostCopies) + " times that is more than the " +
           std::to_string(host / mib) + " MiB of memory available here";
  co.huge_bytes = need;
  return std::nullopt;
}

/// Appends one clause to a property's note ("; "-separated).
void add_note(PropertyReport &pr, const std::string &clause) { pr.note += (pr.note.empty() ? "" : "; ") + clause; }

bool cancelled(const RunState &st) { return st.run->opt.cancel && st.run->opt.cancel->load(); }

/// The time budget is spent, the check was cancelled or the kernel is unavailable (recorded in st).
bool must_stop(RunState &st) {
  if (st.unavailable) return true;
  if (cancelled(st)) return st.interrupted = true;
  if (st.run->guard && Clock::now() > *st.run->guard) return st.budget_exhausted = true;
  return false;
}

/// Every dimension of `s` at least that of `floor`.
bool at_or_above(const Shape &s, const Shape &floor) {
  return s.B >= floor.B && s.Hq >= floor.Hq && s.Hkv >= floor.Hkv && s.Lq >= floor.Lq && s.Lk >= floor.Lk &&
         s.D >= floor.D && s.Dv >= floor.Dv;
}

/// The call timeout while a hang is shrunk: a few times the longest call that returned, within [min, full].
std::chrono::milliseconds hang_shrink_timeout(const RunState &st) {
  return std::max(CheckOptions::kMinHangShrinkTimeout, st.ran.longest_ok * CheckOptions::kHangShrinkFactor);
}

/// Evaluates `c`, noting whether a call hit a limit (its timeout or the memory limit), how long the calls took, and
/// the kernel's speed. When `slow` is given and a call hit its timeout though the kernel's speed says it needs more
/// than the limit allows (KernelSpeed), *slow says so: the kernel is slow there, not hanging.
Outcome evaluate_timed(RunState &st, const Case &c, bool *timed_out, std::string *slow = nullptr) {
  CallRecord &record = CallRecord::of_this_thread();
  record.reset();
  std::optional<CallTimeout> limit;
  if (st.phase == Phase::shrink && st.failure.hang) limit.emplace(hang_shrink_timeout(st));
  Outcome o = evaluate(*st.def, st.run->env, c);
  st.ran.longest_ok = std::max(st.ran.longest_ok, record.longest_ok);
  *timed_out = record.timeouts > 0 || record.memory_faults > 0;
  if (slow && record.timed_out_work > 0) {
    const std::optional<double> need = st.run->shared.speed.predict(record.timed_out_work, record.timed_out_backward);
    const double limit_s = std::chrono::duration<double>(record.timeout_limit).count();
    if (need && *need * KernelSpeed::kHangMargin > limit_s)
      *slow = fmt::format("{} call of {} needs about {:.3g} s at the kernel's speed ({}), more than 1/{} of its "
                          "{:.3g} s timeout: the kernel is slow there, not hanging (raise --timeout, or a smaller "
                          "plan: --profile quick)",
                          record.timed_out_backward ? "a backward" : "a forward", c.spec.problem_shape().describe(),
                          *need, st.run->shared.speed.describe(record.timed_out_backward), KernelSpeed::kHangMargin, limit_s);
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

/// Keeps `c` among the targeted phase's parents when its error ÷ bound `ratio` is among the kTargetParents highest
/// (the earlier case first among equals).
void keep_parent(RunState &st, double ratio, const Case &c) {
  if (!st.def->targeted || !(ratio > 0) || !std::isfinite(ratio)) return;
  if (st.target.parents.size() == kTargetParents && ratio <= st.target.parents.back().first) return;
  const auto at = std::find_if(st.target.parents.begin(), st.target.parents.end(), [&](const auto &p) { return p.first < ratio; });
  st.target.parents.insert(at, {ratio, c});
  if (st.target.parents.size() > kTargetParents) st.target.parents.pop_back();
}

/// The search (or the targeted phase) found its failure `c`: it becomes the minimum to shrink from.
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

/// Counts the corners case `c` reaches (its own, and the property's by construction), as decided or declined.
void count_corners(RunState &st, const Case &c, bool was_decided) {
  st.counts.coverage.add(corners_of(c.spec, st.corners) | st.reaches, was_decided, st.corners);
}

/// Judges one case in the current phase: the search's and the targeted phase's counting, the shrink's "same
/// failure", the reproduce's record. The RapidCheck result the body returns.
CaseResult judge_case(RunState &st, const Case &c) {
  using T = CaseResult::Type;
  if (st.phase == Phase::shrink) {
    if (c.same_as(st.failure.best)) return {T::Failure, st.failure.best_outcome.detail};
    if (st.failure.shrinks_tried >= st.run->opt.max_shrinks) return {T::Success, "not tried: shrink budget spent"};
    if (must_stop(st)) return {T::Success, "not tried: time budget spent or interrupted"};
    ++st.failure.shrinks_tried;
  }
  const bool searching = st.phase == Phase::search || st.phase == Phase::target;
  const auto at_or_above_hung = [&](const Shape &h) { return at_or_above(c.spec.problem_shape(), h); };
  if (searching && std::any_of(st.run->shared.hung.begin(), st.run->shared.hung.end(), at_or_above_hung)) {
    ++st.counts.skipped;
    return {T::Discard, "not run: at or above a shape that hung, was too slow or hit the memory limit"};
  }
  bool timed_out = false;
  std::string slow;
  const Outcome o = evaluate_timed(st, c, &timed_out, searching ? &slow : nullptr);
  // A call cut short by the cancellation (a killed sandbox, a stopped child), or refused by a runner that gave up on
  // the kernel, is no evidence: the case is not counted.
  if (st.unavailable || cancelled(st)) {
    st.interrupted = cancelled(st);
    return {searching ? T::Failure : T::Success, "interrupted or unavailable"};
  }
  switch (st.phase) {
    case Phase::search: {
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
        keep_parent(st, o.worst_ratio, c);
      }
      if (o.verdict == Verdict::pass && (st.counts.worst.empty() || o.worst_ratio > st.counts.worst_ratio)) {
        st.counts.worst_ratio = o.worst_ratio;
        st.counts.worst = in_case() + o.worst;
      }
      return {T::Success, o.detail};
    }
    case Phase::target: {
      // Counted apart from the search's cases (the plan's), in the corners too; the phase reads the outcome.
      st.last = c;
      st.last_outcome = o;
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
      if (o.verdict != Verdict::undecided)
        count_corners(st, c, /*was_decided=*/true);
      if (o.verdict == Verdict::fail) {
        begin_shrink(st, c, o, timed_out, st.counts.cases + st.target.counts.cases);
        return {T::Failure, o.detail};
      }
      if (o.verdict == Verdict::pass && o.worst_ratio > st.counts.worst_ratio) {
        st.counts.worst_ratio = o.worst_ratio;
        st.counts.worst = "targeted case " + std::to_string(st.target.counts.cases) + " (" + c.spec.describe() +
                          "): " + o.worst;
      }
      return {T::Success, o.detail};
    }
    case Phase::shrink:
      if (o.verdict == Verdict::fail && o.step == st.failure.step && (!st.failure.hang || timed_out)) {
        st.failure.best = c;
        st.failure.best_outcome = o;
        return {T::Failure, o.detail};
      }
      return {T::Success, "not the same failure"};
    case Phase::reproduce:
      st.last = c;
      st.last_outcome = o;
      if (o.verdict == Verdict::fail) return {T::Failure, o.detail};
      return {o.verdict == Verdict::unsupported ? T::Discard : T::Success, o.detail};
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

CaseResult body(RunState &st, const rc::Gen<Case> &gen) {
  if (st.phase == Phase::search && must_stop(st)) {
    // Ends RapidCheck's search at once: a "failure" that drew nothing has no shrinks, and run_property reads it
    // as the budget's (or the cancellation's) stop, not as a counterexample (st.failure.found stays false).
    return {CaseResult::Type::Failure, "not run: time budget spent or interrupted"};
  }
  const CaseResult r = judge_case(st, *gen);
  report_progress(st);
  return r;
}

/// The child of `s` at each index of `path` in turn (a shrink path, as RapidCheck records one).
rc::Shrinkable<Case> follow_path(rc::Shrinkable<Case> s, const std::vector<std::size_t> &path) {
  for (const std::size_t index : path) {
    auto shrinks = s.shrinks();
    for (std::size_t i = 0; i < index; ++i) shrinks.next();
    auto child = shrinks.next();
    if (!child) throw std::invalid_argument("check: the reproduce string's shrink path leaves the case's tree");
    s = std::move(*child);
  }
  return s;
}

/// Shrinks the targeted phase's failure (st.failure.best) as RapidCheck shrinks a search's: the first child of the
/// current minimum that fails the same way becomes the minimum, until none does or the shrink budget is spent.
/// Returns the path taken.
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

/// The targeted phase: up to `planned` mutants, each of a parent — mostly the highest (kTargetExploreEvery) — judged
/// in Phase::target; one passing higher than the weakest parent replaces it. Stops at the first failure (then
/// st.target.failed is its number, and the phase is shrink), at mutant `stop_after` (a reproduce: it failed
/// there), or when the guard binds.
void run_targeted(RunState &st, const CaseOptions &co, std::uint64_t seed, int planned, int stop_after) {
  if (st.target.parents.empty() || planned <= 0) return;
  st.target.counts.from = st.target.counts.to = st.target.parents.front().first;
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
      st.target.counts.to = std::max(st.target.counts.to, st.last_outcome.worst_ratio);
      keep_parent(st, st.last_outcome.worst_ratio, mutant);
    }
  }
  st.phase = Phase::search;
}

/// "seed=… reproduce=…": RapidCheck's own configuration syntax, holding the failure's Reproduce.
std::string reproduce_string(std::uint64_t seed, const std::string &id, const rc::detail::Reproduce &r) {
  rc::detail::Configuration cfg;
  cfg.testParams.seed = seed;
  cfg.reproduce[id] = r;
  return rc::detail::configToMinimalString(cfg);
}

/// An advisory property's counterexample `pr` that the required property judging its case fails at step finite —
/// NaN or ±Inf where the exact value and its bound are finite — is a required failure (hand_over.h): the line is
/// escalated, with the required ladder's outcome, until settle_hand_overs gives it to that property's line.
void escalate_if_required(PropertyReport &pr, const PropertyDef &def, const Env &env) {
  if (std::find(std::begin(kHandsOver), std::end(kHandsOver), def.id) == std::end(kHandsOver)) return;
  Counterexample &cx = *pr.counterexample;
  const PropertyDef *judge = required_judge(cx.minimal, env.contract);
  if (!judge) return;
  const Outcome o = evaluate(*judge, env, cx.minimal);
  if (o.verdict != Verdict::fail || o.step != Step::finite) return;
  pr.tier = Tier::required;
  pr.verdict = Verdict::fail;
  cx.outcome = o;
  cx.explained_by.clear();
  add_note(pr, std::string(judge->id) + " fails this case: NaN or ±Inf where the exact value and its bound are finite");
}

/// Which shapes the kernel declined, when one trait tells them apart from every shape it ran ("every shape with
/// Dv ≠ D"), else how many; "" when it declined none.
std::string declined_shapes_text(const RunState &st) {
  if (st.counts.declined_shapes.empty()) return "";
  struct Trait {
    const char *name;
    bool (*has)(const Shape &);
  };
  static constexpr Trait kTraits[] = {
      {"Dv ≠ D", [](const Shape &s) { return s.Dv != s.D; }},
      {"Hq ≠ Hkv", [](const Shape &s) { return s.Hq != s.Hkv; }},
      {"Lq ≠ Lk", [](const Shape &s) { return s.Lq != s.Lk; }},
      {"B > 1", [](const Shape &s) { return s.B > 1; }},
      {"D > 1", [](const Shape &s) { return s.D > 1; }},
      {"Lk > 1", [](const Shape &s) { return s.Lk > 1; }},
  };
  for (const Trait &t : kTraits)
    if (std::all_of(st.counts.declined_shapes.begin(), st.counts.declined_shapes.end(), t.has) &&
        std::none_of(st.counts.decided_shapes.begin(), st.counts.decided_shapes.end(), t.has))
      return std::string("the kernel declined every shape with ") + t.name;
  // Declines of cases (a mask, a layout) or of the pool's shapes, which no trait tells apart.
  return st.counts.unsupported > 0 ? "the kernel declined " + std::to_string(st.counts.unsupported) + " cases"
                                   : "the kernel declined " + std::to_string(st.counts.declined_shapes.size()) +
                                         " of the pool's shapes";
}

/// Why a search decided fewer cases than it planned, in clauses ("the kernel declined …; 3 cases undecided: …").
std::string shortfall_text(const RunState &st) {
  std::vector<std::string> why;
  if (st.unavailable) why.push_back("the kernel's runner gave up on it (its restarts are spent)");
  if (st.interrupted) why.push_back("interrupted");
  if (const std::string d = declined_shapes_text(st); !d.empty()) why.push_back(d);
  if (st.counts.undecided > 0)
    why.push_back(std::to_string(st.counts.undecided) + (st.counts.undecided == 1 ? " case" : " cases") +
                  " undecided" +
                  (st.counts.first_undecided.empty() ? "" : " (the first: " + st.counts.first_undecided + ")"));
  std::string text;
  for (const std::string &w : why) text += (text.empty() ? "" : "; ") + w;
  return text;
}

/// The time guard cut the search: how far it got, and about how much more time would decide it.
std::string guard_text(const RunState &st) {
  const CheckOptions &opt = st.run->opt;
  const double budget = std::chrono::duration<double>(opt.time_budget).count();
  if (st.target.counts.ran() || (st.counts.cases >= opt.cases && !st.target.parents.empty()))
    return fmt::format("the time budget of {:.3g} s ran out in the targeted phase, after {} of its {} mutants "
                       "(--time-budget)",
                       budget, st.target.counts.cases + st.target.counts.declined, opt.targeted_plan());
  const int ran = st.counts.cases + st.counts.unsupported + st.counts.skipped;
  if (ran == 0) return fmt::format("the time budget of {:.3g} s ran out before its first case (--time-budget)", budget);
  const double per_case = std::chrono::duration<double>(Clock::now() - st.started).count() / ran;
  return fmt::format("the time budget of {:.3g} s ran out after {} of {} cases (about {:.2g} s more would decide "
                     "it: --time-budget)",
                     budget, st.counts.cases, opt.cases, per_case * std::max(opt.cases - st.counts.cases, 1));
}

/// The problem of shape `s` with zero values (dout too when `backward`): what the probe and the warm-up call.
Problem zero_problem(const Shape &s, Dtype dt, bool backward) {
  Case c;
  c.spec.shape = s;
  c.spec.dtype = dt;
  c.resize_values(backward);
  return c.problem();
}

/// The kernel declines Dv ≠ D where it runs Dv = D (forwards on zero values of D = 16 and Dv = 8 or 16: sizes every
/// kernel's tiles take). Properties that set Dv = Lk then draw D = Lk too (CaseOptions::tie_head_dims), or the kernel
/// would decline every one of their cases. A function of the kernel's answers: the same in a search and its replay.
bool declines_unequal_head_dims(const Env &env, Dtype dt) {
  const auto declines = [&](const Shape &s) {
    return run_forward(env, zero_problem(s, dt, false)).call.status == ATTNCHECK_UNSUPPORTED;
  };
  return declines(Shape{.D = 16, .Dv = 8}) && !declines(Shape{.D = 16, .Dv = 16});
}

bool CheckRun::declines_unequal_head_dims() {
  if (!unequal_head_dims_declined) unequal_head_dims_declined = attncheck::declines_unequal_head_dims(env, opt.dtype);
  return *unequal_head_dims_declined;
}

/// The verdict of a run that found no failure — a pass, or why not — with a note of the cases it skipped.
void settle_verdict(PropertyReport &pr, const RunState &st) {
  const CheckOptions &opt = st.run->opt;
  const bool pooled = st.run->pool.shapes != nullptr;
  // How many distinct shapes the plan offers: the pool's size asked for, whatever the kernel's declines left of it;
  // without a pool, the target cases.
  const auto plan_shapes = static_cast<std::size_t>(pooled ? st.run->pool.plan : opt.cases);
  const int decided = st.counts.cases - st.counts.undecided;
  const int needed = std::min(opt.min_cases, opt.cases);
  const std::size_t needed_shapes = std::min(kMinPassShapes, plan_shapes);
  const std::string why = shortfall_text(st);
  if (st.budget_exhausted && !st.interrupted) {
    // The guard bound: what a run without it decides is unknown, so nothing is claimed.
    pr.verdict = Verdict::undecided;
    pr.note = guard_text(st) + (why.empty() ? "" : "; " + why);
  } else if (st.counts.cases == 0 && st.counts.unsupported > 0) {
    pr.verdict = Verdict::unsupported;
    pr.note = "the kernel declined all " + std::to_string(st.counts.unsupported) + " cases";
  } else if (decided < needed) {
    pr.verdict = Verdict::undecided;
    pr.note = "only " + std::to_string(decided) + " decided cases (at least " + std::to_string(needed) +
              " needed)" + (why.empty() ? "" : ": " + why);
  } else if (st.counts.decided_shapes.size() < needed_shapes) {
    // Enough cases, too little variety: a pool the kernel's declines narrowed, or a search stopped early.
    pr.verdict = Verdict::undecided;
    pr.note = std::to_string(decided) + " decided cases on only " + std::to_string(st.counts.decided_shapes.size()) +
              " distinct shapes (at least " + std::to_string(needed_shapes) + " needed)" +
              (why.empty() ? "" : ": " + why) +
              (pooled && !st.counts.declined_shapes.empty()
                   ? ": raise the shape pool (shape_pool=, --shape-pool) or make the kernel accept them"
                   : "");
  } else {
    pr.verdict = Verdict::pass;
    // A partial pass says what cut it short.
    if (decided < opt.cases && !why.empty())
      pr.note = "cut short: " + why;
  }
  if (st.counts.skipped > 0) {
    std::string shapes;
    for (const Shape &h : st.run->shared.hung) shapes += (shapes.empty() ? "" : "; ") + h.describe();
    add_note(pr, std::to_string(st.counts.skipped) +
                     " cases skipped at or above a shape that hung, was too slow for its timeout or hit the memory "
                     "limit (" + shapes + ")");
  }
}

/// Checks property `def`, the index-th of the selected ones, in `run`.
PropertyReport run_property(const PropertyDef &def, std::size_t index, CheckRun &run) {
  const CheckOptions &opt = run.opt;
  const Env &env = run.env;
  const auto *reproduce = run.reproduce;
  const std::shared_ptr<const std::vector<Shape>> &pool = run.pool.shapes;
  PropertyReport pr;
  pr.id = std::string(def.id);
  pr.formula = std::string(def.formula);
  pr.summary = std::string(def.summary);
  pr.seed = property_seed(opt.seed, def.id, opt.dtype);
  pr.tier = tier_of(def, env.contract);
  if (pr.tier == Tier::off) {
    pr.verdict = Verdict::unsupported;
    pr.note = def.feature && !(env.contract.features & def.feature)
                  ? "declined: the kernel's contract does not declare features=" + std::string(feature_name(def.feature)) +
                        " (it declares features=" + feature_list(env.contract.features) + ")"
                  : "nothing to check under the kernel's contract (" + env.contract.describe_changes() + ")";
    return pr;
  }
  if (def.needs_backward && env.kernel.backward == nullptr) {
    pr.verdict = Verdict::unsupported;
    pr.note = "the kernel has no backward";
    return pr;
  }

  CaseOptions co;
  co.dtype = opt.dtype;
  co.causal = env.contract.causal == CausalAlign::top_left ? Mask::causal_top_left : Mask::causal;
  co.combinable = env.contract.features & kCombinableFeatures;
  if (env.contract.empty_rows == EmptyRows::unspecified) co.empty_rows = false;
  co.backward = def.needs_backward;
  co.shape_pool = pool;
  if (def.require) def.require(co);
  if (co.dv_equals_lk) co.tie_head_dims = run.declines_unequal_head_dims();
  const std::optional<std::string> huge_skipped =
      co.stretch && opt.huge_cases ? allow_huge_case(opt, co) : std::optional<std::string>{};
  if (co.mask == Mask::causal) co.mask = co.causal;  // a property asking for "causal" gets the declared alignment
  const rc::Gen<Case> gen = gen_case(co);

  RunState st;
  st.def = &def;
  st.run = &run;
  st.index = index;
  // Feature properties draw dO and check the backward when the kernel has one.
  st.corners = {.backward = co.backward && env.kernel.backward != nullptr, .lse = env.contract.lse != LseOutput::none};
  st.reaches = corners_named(def.reaches);
  // A targeted counterexample is reproduced by the search and the targeted phase again, up to its mutant.
  const rc::detail::Reproduce *target_replay = nullptr;
  if (reproduce)
    if (const auto it = reproduce->find(target_id(def.id, opt.dtype)); it != reproduce->end())
      target_replay = &it->second;
  const bool replaying = reproduce && !target_replay;
  st.phase = replaying ? Phase::reproduce : Phase::search;
  st.started = Clock::now();
  st.counts.declined_shapes = run.pool.declined;  // the pool's, declined before it was drawn from
  const std::string key = run_id(def.id, opt.dtype);

  rc::detail::TestMetadata meta;
  meta.id = key;
  meta.description = std::string(def.formula);
  rc::detail::TestParams params;
  params.seed = pr.seed;
  params.maxSuccess = opt.cases;
  params.maxSize = rc::kNominalSize;
  params.maxDiscardRatio = kMaxDiscardRatio;
  rc::detail::TestListenerAdapter listener;
  const std::unordered_map<std::string, rc::detail::Reproduce> none;
  const auto result = rc::detail::checkProperty(rc::detail::toProperty([&st, &gen] { return body(st, gen); }),
                                                meta, params, listener, replaying ? *reproduce : none);
  rc::detail::FailureResult failure;
  rc::detail::Error error;
  std::string failure_key = key;  // the reproduce map's key of the failure: the search's, or the targeted phase's
  const bool searched = !result.match(failure) && !result.match(error) && !st.budget_exhausted && !st.interrupted;
  if (!replaying && searched && def.targeted) {
    run_targeted(st, co, pr.seed, target_replay ? target_replay->size + 1 : opt.targeted_plan(),
                 target_replay ? target_replay->size : INT_MAX);
    if (st.failure.found && target_replay) {
      // Follows the recorded path from the same mutant, and judges where it ends.
      if (st.target.failed == target_replay->size) {
        const Case end = follow_path(shrinkable_case(st.failure.best, co), target_replay->shrinkPath).value();
        st.phase = Phase::reproduce;
        st.failure.found = false;
        judge_case(st, end);
        failure.reproduce = *target_replay;
        failure_key = target_id(def.id, opt.dtype);
      }
    } else if (st.failure.found) {
      failure.reproduce.size = st.target.failed;
      failure.reproduce.shrinkPath = shrink_walk(st, co);
      failure_key = target_id(def.id, opt.dtype);
    }
  }

  pr.cases = st.counts.cases;
  pr.unsupported = st.counts.unsupported;
  pr.undecided = st.counts.undecided;
  pr.worst_ratio = st.counts.worst_ratio;
  pr.worst = st.counts.worst;
  pr.budget_exhausted = st.budget_exhausted;
  pr.interrupted = st.interrupted;
  pr.skipped = st.counts.skipped;
  pr.coverage = st.counts.coverage;
  pr.targeted = st.target.counts;

  if (replaying || target_replay) {
    // The replayed case is the last one evaluated.
    const bool reached = replaying || failure_key != key;  // a targeted replay reached its mutant again
    if (!reached) {
      pr.verdict = Verdict::undecided;
      pr.note = "could not reproduce: the search and the targeted phase took another course (the kernel's answers "
                "changed)";
      return pr;
    }
    pr.cases = st.last && st.last_outcome.verdict != Verdict::unsupported ? 1 : 0;
    if ((target_replay ? st.last_outcome.verdict == Verdict::fail : result.match(failure)) && st.last) {
      pr.verdict = pr.tier == Tier::advisory ? Verdict::warn : Verdict::fail;
      pr.counterexample = Counterexample{.minimal = *st.last,
                                         .outcome = st.last_outcome,
                                         .original = st.last->spec,
                                         .found_after = 0,
                                         .shrink_steps = static_cast<int>(failure.reproduce.shrinkPath.size()),
                                         .shrinks_tried = 0,
                                         .seed = pr.seed,
                                         .reproduce = reproduce_string(pr.seed, failure_key, failure.reproduce),
                                         .explained_by = explain_failure(def, env, *st.last, st.last_outcome)};
      pr.note = "reproduced";
      if (pr.tier == Tier::advisory) escalate_if_required(pr, def, env);
    } else if (st.last) {
      pr.verdict = st.last_outcome.verdict;
      pr.worst_ratio = st.last_outcome.worst_ratio;
      pr.worst = st.last_outcome.worst;
      pr.note = "the reproduced case no longer fails" +
                (st.last_outcome.detail.empty() ? "" : " (" + st.last_outcome.detail + ")");
    } else {
      pr.verdict = Verdict::undecided;
      pr.note = result.match(error) ? "could not reproduce: " + error.description : "could not reproduce";
    }
    return pr;
  }

  // A search's failure, or the targeted phase's (else a failure is the time budget's stop).
  const bool found = (result.match(failure) || failure_key != key) && st.failure.found;
  if (found && st.failure.hang && !st.interrupted && !st.failure.best.same_as(*st.failure.first)) {
    // The hang was shrunk under a shorter timeout: the minimal case must hang at the full one too (one call
    // timeout, within the budget's promise); else the case that hung first is the counterexample.
    st.phase = Phase::reproduce;
    bool timed_out = false;
    const Outcome o = evaluate_timed(st, st.failure.best, &timed_out);
    if (o.verdict == Verdict::fail && o.step == st.failure.step && timed_out) {
      st.failure.best_outcome = o;  // its message names the full timeout
    } else {
      st.failure.best = *st.failure.first;
      st.failure.best_outcome = st.failure.first_outcome;
      failure.reproduce.shrinkPath.clear();
      pr.note = "the shrunk case returned within the full timeout: the counterexample is the case that hung first";
    }
  }
  if (found && st.failure.hang) {
    run.shared.hung.push_back(st.failure.best.spec.problem_shape());
    if (st.ran.largest)
      add_note(pr, "the largest case that ran: " + st.ran.largest->describe());
  }
  if (found) {
    pr.verdict = pr.tier == Tier::advisory ? Verdict::warn : Verdict::fail;
    pr.counterexample = Counterexample{.minimal = st.failure.best,
                                       .outcome = st.failure.best_outcome,
                                       .original = st.failure.original,
                                       .found_after = st.failure.found_after,
                                       .shrink_steps = static_cast<int>(failure.reproduce.shrinkPath.size()),
                                       .shrinks_tried = st.failure.shrinks_tried,
                                       .seed = pr.seed,
                                       .reproduce = reproduce_string(pr.seed, failure_key, failure.reproduce),
                                       .explained_by = explain_failure(def, env, st.failure.best, st.failure.best_outcome)};
    if (pr.tier == Tier::advisory) escalate_if_required(pr, def, env);
    if (failure_key != key) {
      pr.targeted.to = std::max(pr.targeted.to, st.failure.first_outcome.worst_ratio);
      add_note(pr, fmt::format("found by the targeted phase: mutant {} of the search's worst cases (error ÷ bound "
                               "{:.3g} at most in the search)",
                               st.target.failed + 1, pr.targeted.from));
    }
    if (st.budget_exhausted && !st.interrupted)
      add_note(pr, fmt::format("the time budget of {:.3g} s cut the shrinking after {} candidates (--time-budget)",
                               std::chrono::duration<double>(opt.time_budget).count(), st.failure.shrinks_tried));
    return pr;
  }
  if (result.match(error)) {
    pr.verdict = Verdict::undecided;
    pr.note = "RapidCheck error: " + error.description;
    return pr;
  }
  // Success, the budget's stop, or gave up after too many declined cases.
  settle_verdict(pr, st);
  if (huge_skipped) add_note(pr, *huge_skipped);
  if (co.stretch && st.ran.largest)  // which sizes ran (SPEC.md §7 long_rows)
    add_note(pr, "sizes run: rows up to Lk=" + std::to_string(st.ran.longest_row) + ", squares up to Lq=Lk=" +
                     std::to_string(st.ran.largest_square) + ", up to " + std::to_string(st.ran.most_elements) +
                     " elements in one tensor; largest problem " + st.ran.largest->problem_shape().describe());
  if (pool)
    add_note(pr, "shapes from a pool of " + std::to_string(pool->size()) + " (compile-friendly generation)");
  if (st.target.counts.ran())
    add_note(pr, fmt::format("targeted phase: {} mutants of the search's worst cases took error ÷ bound from {:.3g} "
                             "to {:.3g}",
                             st.target.counts.cases + st.target.counts.declined, st.target.counts.from, st.target.counts.to));
  return pr;
}

/// The compile-friendly pool's shapes, drawn from the seed and dtype alone: the all-ones shape, one with a row that
/// sees no key, then shapes drawn as usual (with Dv = Lk and two keys or more) at sizes spread over the range of `n`
/// — and past n, as many more as asked for (a pool that grows past declined shapes draws them at those sizes again).
/// Two drawn shapes in three have few heads (CaseOptions::few_heads), so that a pool of a few shapes keeps rows of
/// several keys (and rows that see no key); every third has the batches and GQA groups of the buckets. Every other
/// drawn shape has Lq > Lk (CaseOptions::empty_rows), so that empty_rows finds distinct shapes with rows that see no
/// key.
class PoolDraws {
 public:
  PoolDraws(int n, std::uint64_t seed, Dtype dt)
      : n_(n), dtype_(dt), random_(mix(seed ^ fnv1a("shape_pool") ^ (static_cast<std::uint64_t>(dt) << 56))) {}
  Shape next() {
    const int k = drawn_++;
    // The all-ones shape, and Lq = 2 > Lk = 1: a row that sees no key under bottom-right causal (empty_rows).
    if (k == 0) return Shape{};
    if (k == 1) return Shape{.Lq = 2};
    const int size = 2 + (k - 2) % std::max(1, n_ - 2);
    return draw_spec(random_.split(), size * rc::kNominalSize / std::max(n_, 1), options(k)).shape;
  }

 private:
  /// The constraints of the k-th draw.
  CaseOptions options(int k) const {
    CaseOptions co;
    co.dtype = dtype_;
    co.dv_equals_lk = true;  // the properties that set v = I need Dv = Lk: with it, they reuse the pool's shapes too
    co.min_keys = 2;  // the first two shapes have one key
    co.few_heads = (k - 2) % kPoolHeadsEvery != kPoolHeadsEvery - 1;
    if (k % 2 == 0) co.empty_rows = true;
    return co;
  }
  int n_, drawn_ = 0;
  Dtype dtype_;
  rc::Random random_;
};

/// The compile-friendly pool of n shapes (PoolDraws' first, duplicates dropped): the same pool for every property,
/// worker and run of this seed.
std::shared_ptr<const std::vector<Shape>> shape_pool(int n, std::uint64_t seed, Dtype dt) {
  PoolDraws draws(n, seed, dt);
  auto pool = std::make_shared<std::vector<Shape>>();
  for (int k = 0; k < std::max(n, 2); ++k)
    if (const Shape s = draws.next(); std::find(pool->begin(), pool->end(), s) == pool->end()) pool->push_back(s);
  return pool;
}

/// The kernel's first call of a shape is much slower than a repeat (CheckOptions::detect_compile): forward on
/// pool[0] twice, then on pool[1] once (the slower first call is the compile).
bool compiles_per_shape(const Env &env, const std::vector<Shape> &pool, Dtype dt) {
  auto seconds = [&](const Shape &s) {
    const Problem p = zero_problem(s, dt, false);
    const auto t0 = Clock::now();
    (void)run_forward(env, p);
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  const double first = seconds(pool.at(0)), repeat = seconds(pool.at(0));
  const double other = pool.size() > 1 ? seconds(pool[1]) : first;
  const double compile = std::min(first, other);
  return compile >= CheckOptions::kCompileSeconds && compile >= CheckOptions::kCompileRatio * repeat;
}

/// The pool `drawn` (of `n` shapes asked for) as the kernel accepts it (a forward on zero values): a declined shape
/// gives way to itself with D = Dv = Lk (its draws have Dv = Lk), with Dv = D, with Hkv = Hq, or both (the limits
/// kernels commonly have), else to further draws, at most kPoolDrawsPerShape per shape asked for — a kernel that
/// declines Dv ≠ D or GQA still gets a pool of shapes it runs. Deterministic: a function of the kernel's answers, seed and dtype. The drawn pool when the
/// kernel declines every shape (each property then says so).
ShapePool accepted_pool(const Env &env, std::shared_ptr<const std::vector<Shape>> drawn, int n, std::uint64_t seed,
                        Dtype dt) {
  ShapePool out{.shapes = drawn, .plan = n, .declined = {}};
  auto pool = std::make_shared<std::vector<Shape>>();
  std::vector<Shape> tried;
  // Adds the first of s and its narrowed forms that the kernel accepts and the pool lacks.
  const auto add_accepted = [&](const Shape &s) {
    Shape equal_dv = s, equal_heads = s, tied = s;
    equal_dv.Dv = s.D;
    equal_heads.Hkv = s.Hq;
    tied.D = tied.Dv = s.Lk;  // what properties with Dv = Lk draw for a kernel that declines Dv ≠ D (tie_head_dims)
    Shape both = equal_dv, tied_heads = tied;
    both.Hkv = tied_heads.Hkv = s.Hq;
    // Tied before Dv = D: the properties with Dv = Lk then find pool shapes too (the rest take any).
    for (const Shape &c : {s, tied, equal_dv, equal_heads, tied_heads, both}) {
      if (std::find(tried.begin(), tried.end(), c) != tried.end()) continue;
      tried.push_back(c);
      if (run_forward(env, zero_problem(c, dt, false)).call.status == ATTNCHECK_UNSUPPORTED) {
        out.declined.push_back(c);
        continue;
      }
      pool->push_back(c);
      return;
    }
  };
  for (const Shape &s : *drawn) add_accepted(s);
  if (*pool == *drawn) return out;
  PoolDraws draws(n, seed, dt);
  for (int k = 0; k < n * kPoolDrawsPerShape && pool->size() < drawn->size(); ++k) add_accepted(draws.next());
  if (!pool->empty()) out.shapes = std::move(pool);
  return out;
}

/// One forward (and backward) call on every pool shape, so that a JIT kernel compiles them before the properties
/// share the budget. Results are not looked at.
void warm_up(const Env &env, const std::vector<Shape> &pool, Dtype dt) {
  for (const Shape &s : pool) {
    const Problem p = zero_problem(s, dt, env.kernel.backward != nullptr);
    const ForwardRun fr = run_forward(env, p);
    if (fr.call.ok() && env.kernel.backward != nullptr) (void)run_backward(env, p, fr);
  }
}

/// The reproduce string names a failure of property `id` in `dt`: the search's or the targeted phase's.
bool names(const rc::detail::Configuration &replay, std::string_view id, Dtype dt) {
  return replay.reproduce.count(run_id(id, dt)) || replay.reproduce.count(target_id(id, dt));
}
}  // namespace

const CallRecord::Timed &KernelSpeed::basis(bool on_backward) const {
  const CallRecord::Timed &own = on_backward ? backward : forward, &other = on_backward ? forward : backward;
  return own.work > 0 ? own : other;
}

std::optional<double> KernelSpeed::predict(std::int64_t work, bool on_backward) const {
  const CallRecord::Timed &basis = this->basis(on_backward);
  if (basis.work == 0) return std::nullopt;
  const double fixed = std::chrono::duration<double>(quickest.value_or(std::chrono::nanoseconds{0})).count();
  const double scaled = std::max(std::chrono::duration<double>(basis.time).count() - fixed, 0.0);
  return fixed + scaled * static_cast<double>(work) / static_cast<double>(basis.work);
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

Report check(const attncheck_kernel &kernel, const CheckOptions &options) {
  Report rep;
  rep.kernel = kernel.name ? kernel.name : "?";
  rep.dtype = options.dtype;
  rep.contract = options.contract;
  rep.profile = options.contract.profile(options.dtype);
  rep.seed = options.seed;
  rep.cases = options.cases;

  std::optional<rc::detail::Configuration> replay;
  if (!options.reproduce.empty()) {
    try {
      replay = rc::detail::configFromString(options.reproduce);
    } catch (const rc::detail::ConfigurationException &e) {
      throw std::invalid_argument(std::string("check: bad reproduce string: ") + e.what());
    }
  }

  std::vector<const PropertyDef *> selected;
  if (options.properties.empty()) {
    for (const PropertyDef *d : all_properties())
      if (!replay || names(*replay, d->id, options.dtype)) selected.push_back(d);
  } else {
    for (const std::string &id : options.properties) {
      const PropertyDef *d = find_property(id);
      if (!d) throw std::invalid_argument("check: unknown property '" + id + "'");
      if (!replay || names(*replay, d->id, options.dtype)) selected.push_back(d);
    }
  }
  if (replay && selected.empty())
    throw std::invalid_argument("check: the reproduce string names no selected property for dtype " +
                                std::string(dtype_name(options.dtype)));

  const Env env{kernel, rep.profile, rep.contract};
  KernelRunState local;
  KernelRunState &shared = options.shared ? *options.shared : local;
  const Clock::time_point check_start = Clock::now();
  std::shared_ptr<const std::vector<Shape>> pool;
  ShapePool accepted;
  int pool_size = 0;
  if (options.shape_pool > 0) {
    pool_size = options.shape_pool;
  } else if (options.detect_compile && !replay) {
    pool = shape_pool(CheckOptions::kAutoShapePool, options.seed, options.dtype);
    if (!shared.compiles) shared.compiles = compiles_per_shape(env, *pool, options.dtype);
    if (*shared.compiles) pool_size = CheckOptions::kAutoShapePool;
  }
  // The shapes the kernel accepts (a reproduce run asks the same questions, so it draws from the same pool).
  if (pool_size > 0)
    accepted = accepted_pool(env, shape_pool(pool_size, options.seed, options.dtype), pool_size, options.seed,
                             options.dtype);
  pool = accepted.shapes;
  if (pool && !replay) warm_up(env, *pool, options.dtype);
  // One guard over the whole check, the probe and the warm-up (compilation) included; a worker's item ends where
  // its run would end in a serial check (options.end).
  std::optional<Clock::time_point> guard;
  if (options.time_budget.count() > 0) guard = options.end ? *options.end : check_start + options.time_budget;
  CheckRun run{.opt = options,
               .env = env,
               .count = selected.size(),
               .guard = guard,
               .reproduce = replay ? &replay->reproduce : nullptr,
               .shared = shared,
               .pool = std::move(accepted),
               .unequal_head_dims_declined = {}};
  for (std::size_t n = 0; n < selected.size(); ++n) {
    const Clock::time_point started = Clock::now();
    const std::chrono::nanoseconds kernel_before = CallRecord::kernel_time();
    PropertyReport pr = run_property(*selected[n], n, run);
    pr.timing = {.seconds = std::chrono::duration<double>(Clock::now() - started).count(),
                 .kernel_seconds = std::chrono::duration<double>(CallRecord::kernel_time() - kernel_before).count()};
    rep.properties.push_back(std::move(pr));
  }
  settle_hand_overs(rep);
  if (options.evidence && !(options.cancel && options.cancel->load())) add_evidence(rep, kernel);
  return rep;
}

Report check_property(const attncheck_kernel &kernel, std::string_view id, CheckOptions options) {
  options.properties = {std::string(id)};
  return check(kernel, options);
}

}  // namespace attncheck
