// The engine's shared parts (internal to properties/src/engine): what one check() call shares among its properties
// (CheckRun), what the body of one property's RapidCheck run records (RunState), and the functions by which the
// phases' files (check.cpp names them) hand a case or a run on to each other.
#pragma once

#include "attncheck/check.h"
#include "attncheck/property.h"
#include "attncheck/screen.h"

#include <rapidcheck/detail/Results.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace attncheck::engine {

using Clock = std::chrono::steady_clock;
using rc::detail::CaseResult;

/// Where a property's run is (check.cpp's overview): which rule judges its next case.
enum class Phase { search, shrink, target, declared, reproduce };

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

/// A passing case that holds a record (the search's worst, the targeted phase's highest): its rank (exact_rank), what
/// names it, and its outcome — a screened one is confirmed under MPFR only when the record is read (settle).
struct Record {
  bool held = false;
  double rank = 0;
  std::string where;  ///< "case 12 (f32 B=1 …): "
  Outcome outcome;
  /// Takes the case when it ranks above the one held (the earlier among equals stays).
  void offer(double r, const std::function<std::string()> &name, const Outcome &o) {
    if (held && !(r > rank)) return;
    *this = Record{.held = true, .rank = r, .where = name(), .outcome = o};
  }
  /// The held outcome made exact (its MPFR confirmation when screened): its worst ratio and where, for the report.
  const Outcome &settle();
};

/// What a property's search has counted: cases decided or not, declined, skipped, its worst error ÷ bound, the
/// corners its decided and declined cases reached (coverage.h); the distinct shapes of the decided cases and of the
/// declined ones (the minimum evidence of a pass, and why it is missing), what left the first undecided case
/// undecided, and the first case attncheck's own check failed on (Verdict::error: the property's verdict).
struct SearchCounts {
  int cases = 0, unsupported = 0, undecided = 0, skipped = 0;
  Record worst;
  Coverage coverage;
  std::vector<Shape> decided_shapes, declined_shapes;
  std::string first_undecided, first_error;
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
  std::vector<std::pair<double, Case>> parents;  ///< (rank, case), highest first
  TargetedSearch counts;
  Record highest;  ///< the mutant of the highest rank above the search's worst
  int failed = -1;
};

/// What the body of one RapidCheck run records.
struct RunState {
  const PropertyDef *def = nullptr;
  CheckRun *run = nullptr;  // the check() call it is part of
  std::size_t index = 0;    // of this property among the selected ones
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
  double last_rank = 0;  ///< exact_rank of last_outcome when it passed
  TargetState target;
  std::vector<ShapeRun> shapes;  ///< the declared-shapes phase's, one per CheckOptions::shapes entry
};

// check.cpp

/// FNV-1a: a stable hash of a property id (std::hash is not stable across platforms).
std::uint64_t fnv1a(std::string_view s);
/// splitmix64 finalizer: decorrelates nearby seeds.
std::uint64_t mix(std::uint64_t x);
/// Appends one clause to a property's note ("; "-separated).
void add_note(PropertyReport &pr, const std::string &clause);

// search.cpp: every phase's case is judged here.

/// What case_in_progress (check.h) returns: the case evaluate_timed set last.
std::optional<CaseInProgress> case_in_progress_now();
/// Evaluates `c`, noting whether a call hit a limit (its timeout or the memory limit), how long the calls took, and
/// the kernel's speed. When `slow` is given and a call hit its timeout though the kernel's speed says it needs more
/// than the limit allows (KernelSpeed), *slow says so: the kernel is slow there, not hanging.
Outcome evaluate_timed(RunState &st, const Case &c, bool *timed_out, std::string *slow = nullptr);
/// Adds `s` to `shapes` unless it is there.
void remember_shape(std::vector<Shape> &shapes, const Shape &s);
/// Counts the corners case `c` reaches (its own, and the property's by construction), as decided or declined.
void count_corners(RunState &st, const Case &c, bool was_decided);
/// Judges one case in the current phase: a shrink candidate as judge_candidate does; else, unless it is at or above
/// a shape that hung (skipped), the search's counting, the targeted phase's (judge_mutant) or the reproduce's
/// record. The RapidCheck result the body returns.
CaseResult judge_case(RunState &st, const Case &c);
/// Tells CheckOptions::on_progress where the run stands.
void report_progress(const RunState &st);

// shrink.cpp

/// The search (or the targeted phase) found its failure `c`: it becomes the minimum to shrink from.
void begin_shrink(RunState &st, const Case &c, const Outcome &o, bool timed_out, int found_after);
/// The call timeout while a hang is shrunk: a few times the longest call that returned, within [min, full].
std::chrono::milliseconds hang_shrink_timeout(const RunState &st);
/// Judges a shrink candidate: it fails only at the minimum's ladder step (and, for a hang, by hanging too), and
/// then becomes the minimum; once max_shrinks candidates are tried, or the guard binds, the others pass untried.
CaseResult judge_candidate(RunState &st, const Case &c);
/// Shrinks a failure found outside RapidCheck's search (the targeted or the declared-shapes phase, st.failure.best)
/// as RapidCheck shrinks a search's: the first child in its shrinkable_case tree (under `co`) that fails the same way
/// becomes the minimum, until none does or the shrink budget is spent. Returns the path taken.
std::vector<std::size_t> shrink_walk(RunState &st, const CaseOptions &co);
/// The case at the end of `path` from `c` in its shrinkable_case tree under `co` (a reproduce string's path); throws
/// std::invalid_argument when the path leaves the tree.
Case follow_path(const Case &c, const CaseOptions &co, const std::vector<std::size_t> &path);
/// The hang was shrunk under a shorter timeout (hang_shrink_timeout): the minimal case must hang at the full one
/// too (one call timeout, within the budget's promise); else the case that hung first is the counterexample again,
/// its `shrink_path` cleared and pr's note saying so.
void confirm_hang(RunState &st, std::vector<std::size_t> &shrink_path, PropertyReport &pr);

// targeted.cpp

/// Keeps `c` among the targeted phase's parents when the rank of its error ÷ bound is among the kTargetParents
/// highest (the earlier case first among equals).
void keep_parent(RunState &st, double rank, const Case &c);
/// The highest rank keep_parent leaves out: 0 while parents are missing (it keeps any positive rank), the weakest
/// parent's once they are all there; +∞ for a property without the targeted phase.
double parents_floor(const RunState &st);
/// The targeted phase's record of mutant `c`, judged `o` of rank `rank` (`slow`: why a call was too slow for its
/// timeout): counted apart from the search's cases (the plan's), in the corners too; the phase reads the outcome.
CaseResult judge_mutant(RunState &st, const Case &c, const Outcome &o, double rank, bool timed_out,
                        const std::string &slow);
/// The targeted phase after a search that found nothing, on cases drawn under `co`. Replaying `replay` (a targeted
/// counterexample's), it runs up to that mutant again and judges the end of its path in Phase::reproduce. The
/// Reproduce of the failure it found and shrank, or reached again; nullopt when none.
std::optional<rc::detail::Reproduce> target(RunState &st, const CaseOptions &co, std::uint64_t seed,
                                            const rc::detail::Reproduce *replay);

// declared.cpp

/// The declared-shapes phase's record of shape `c` (st.shapes' last entry), judged `o`: its verdict and error ÷ bound
/// (exact), counted apart from the search's cases but in the corners; a failure begins the shrink.
CaseResult judge_declared(RunState &st, const Case &c, const Outcome &o, bool timed_out, const std::string &slow);
/// The declared-shapes phase after a search that found nothing: one case per CheckOptions::shapes entry that the
/// property can take (its options `co`), drawn from `seed` and the shape's index, judged in Phase::declared and
/// recorded in st.shapes. Stops at the first failure, which it shrinks (shrink_walk): the Reproduce's size is the
/// shape's index. Replaying `replay`, it draws that shape's case again, follows the path and judges its end in
/// Phase::reproduce. The Reproduce of the failure it found, or reached again; nullopt when none.
std::optional<rc::detail::Reproduce> declared(RunState &st, const CaseOptions &co, std::uint64_t seed,
                                              const rc::detail::Reproduce *replay);

// guard.cpp

/// The check was cancelled (CheckOptions::cancel).
bool cancelled(const RunState &st);
/// The time budget is spent, the check was cancelled or the kernel is unavailable (recorded in st).
bool must_stop(RunState &st);
/// A call cut short by the cancellation (a killed sandbox, a stopped child), or refused by a runner that gave up
/// on the kernel, is no evidence: true when the last case's was (st.interrupted: by the cancellation).
bool cut_short(RunState &st);
/// The verdict of a run that found no failure — a pass, or why not — with a note of the cases it skipped.
void settle_verdict(PropertyReport &pr, const RunState &st);

// shape_pool.cpp

/// The compile-friendly pool of n shapes (PoolDraws' first, duplicates dropped): the same pool for every property,
/// worker and run of this seed.
std::shared_ptr<const std::vector<Shape>> shape_pool(int n, std::uint64_t seed, Dtype dt);
/// The kernel's first call of a shape is much slower than a repeat (CheckOptions::detect_compile): forward on
/// pool[0] twice, then on pool[1] once (the slower first call is the compile).
bool compiles_per_shape(const Env &env, const std::vector<Shape> &pool, Dtype dt);
/// The pool `drawn` (of `n` shapes asked for) as the kernel accepts it (a forward on zero values): a declined shape
/// gives way to itself with D = Dv = Lk (its draws have Dv = Lk), with Dv = D, with Hkv = Hq, or both (the limits
/// kernels commonly have), else to further draws, at most kPoolDrawsPerShape per shape asked for — a kernel that
/// declines Dv ≠ D or GQA still gets a pool of shapes it runs. Deterministic: a function of the kernel's answers,
/// seed and dtype. The drawn pool when the kernel declines every shape (each property then says so).
ShapePool accepted_pool(const Env &env, std::shared_ptr<const std::vector<Shape>> drawn, int n,
                        std::uint64_t seed, Dtype dt);
/// One forward (and backward) call on every pool shape, so that a JIT kernel compiles them before the properties
/// share the budget. Results are not looked at.
void warm_up(const Env &env, const std::vector<Shape> &pool, Dtype dt);

}  // namespace attncheck::engine
