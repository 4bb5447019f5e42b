// The property engine's entry point: check a kernel against registered properties (property.h) on generated cases
// (gen.h), every failure shrunk to a minimal counterexample (results.h).
//
// RapidCheck is driven directly (rc::detail::checkProperty), not through its Catch2/gtest adapters, so that every
// failure keeps its seed and a reproduce string, and check() can replay one.
//
// Example:
//   attncheck::CheckOptions opt;
//   opt.dtype = attncheck::Dtype::f16;
//   opt.properties = {"accuracy", "sum_to_one"};
//   attncheck::RunReport r = attncheck::check(kernel, opt);
//   if (r.verdict() == attncheck::Verdict::fail) std::puts(r.text().c_str());
//   opt.reproduce = r.find("accuracy")->counterexample->reproduce;   // replays the minimal case only
#pragma once

#include "attncheck/kernel_abi.h"
#include "attncheck/kernel_call.h"
#include "attncheck/results.h"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace attncheck {

/// Where a check stands, for progress displays.
struct CheckProgress {
  std::string_view property;        ///< the property being checked
  std::size_t property_index = 0;   ///< 0-based, among the selected properties
  std::size_t property_count = 0;
  int cases = 0;                    ///< search cases run so far (declined ones included)
  int target = 0;                   ///< CheckOptions::cases
  bool shrinking = false;           ///< a failure was found and is being shrunk
  int shrinks_tried = 0;
};

/// What a check measured of a kernel's speed: per entry point, the call with the most work that returned
/// (CallRecord::Timed). Each call may take kAllowanceMargin × its prediction whatever the runner's timeout (at most
/// what is left of the guard); a call stopped past that is a hang only when the kernel's speed there predicts that
/// it should have returned within 1/kHangMargin of the limit; otherwise (the guard capped it) the kernel is slow on
/// that size, and the case is undecided (a slow kernel is not a hanging one).
struct KernelSpeed {
  CallRecord::Timed forward, backward;
  std::optional<std::chrono::nanoseconds> quickest;  ///< of any call: the cost of a call whatever its work
  static constexpr int kHangMargin = 4;
  /// A call may take this many times what the kernel's speed predicts for it, whatever the runner's own timeout
  /// (CallAllowance): room for a machine that gets that much busier between the call a prediction rests on and
  /// this one, so that a correct kernel, slow or slowed down, is judged on its answers, not cut by the load.
  static constexpr int kAllowanceMargin = 16;
  /// Seconds a call on a problem of shape `s` should take (forward, or backward): the quickest call's time, plus the
  /// rest of the largest call's of that entry point that returned (of the other one when none did) scaled by the
  /// larger of two ratios, of work B·Hq·Lq·Lk·(D + Dv) and of scores B·Hq·Lq·Lk — so that a kernel whose cost is
  /// any a·scores + b·work (exp and the score matrix, beside the products) is not predicted short on a long
  /// problem of small head dims; nullopt when no call has returned.
  std::optional<double> predict(const Shape &s, bool backward) const;
  /// The speed a prediction rests on, for messages: "0.9 GFLOP/s on a forward call of B=1 … in 0.31 s".
  std::string describe(bool backward) const;
  void record(const CallRecord &r);

 private:
  /// The call predictions rest on: the largest of that entry point that returned, else of the other one.
  const CallRecord::Timed &basis(bool backward) const;
};

/// What the check() calls on one kernel share when their caller keeps it across them (a run of many dtypes, a
/// `--jobs` worker's items): what one call learns about the kernel spares the next a timeout or a probe.
struct KernelRunState {
  /// Shapes whose calls hung, were too slow for their timeout or hit the memory limit: cases at or above them are
  /// skipped, since each would wait a timeout again.
  std::vector<Shape> hung;
  KernelSpeed speed;  ///< the kernel's measured speed: is a timeout a hang, or a slow kernel?
  /// The compile probe's answer (CheckOptions::detect_compile), reused instead of probing a kernel whose probe
  /// shapes are compiled by then; nullopt until a call probes.
  std::optional<bool> compiles;
};

/// A case of the counterexample corpus (`check --corpus DIR`, gate/include/attncheck/corpus.h): a minimal
/// counterexample an earlier run recorded for this kernel and dtype, replayed before the search of its property.
struct CorpusCase {
  std::string hash;      ///< the entry's content hash (its file name under the corpus directory, less ".json")
  std::string property;  ///< the property it failed: only that property's run replays it
  Case minimal;          ///< its exact inputs (the minimal case as recorded)
  std::string reproduce; ///< the reproduce string it was recorded with (kept on the counterexample it becomes)
};

/// What a check asks for (the plan, the guard — `end` included, a value fixed per call —, the contract, what to
/// gather), then the pointers to what it shares with its caller (cancel, shared).
/// A production shape a check runs its properties on besides its search (CheckOptions::shapes): a model's heads,
/// lengths and head dims, causal or not, with the features its layers use (a sliding window, a softcap). Values —
/// and the other settings (layout, value family, the features the property draws) — are drawn as for any case.
///
/// Example (Llama-3-8B's prefill of 1,024 tokens):
///   attncheck::DeclaredShape s{.name = "llama-3-8b prefill",
///                              .shape = {.B = 1, .Hq = 32, .Hkv = 8, .Lq = 1024, .Lk = 1024, .D = 128, .Dv = 128},
///                              .causal = true};
struct DeclaredShape {
  std::string name;  ///< what reports call it: a preset's "<model> <use>", else "shape N"
  Shape shape;
  bool causal = false;          ///< the causal mask, aligned as the kernel's contract declares
  std::uint32_t features = 0;   ///< ATTNCHECK_FEATURE_WINDOW, _SOFTCAP: set as below, not drawn
  std::int64_t window_left = -1, window_right = -1;  ///< with the window: −1 unbounded
  double softcap = 0;                                ///< with the softcap: c
  /// "llama-3-8b prefill: B=1 Hq=32 Hkv=8 Lq=1024 Lk=1024 D=128 Dv=128 causal"
  std::string describe() const;
  friend bool operator==(const DeclaredShape &, const DeclaredShape &) = default;
};

struct CheckOptions {
  Dtype dtype = Dtype::f32;                ///< storage dtype of every case
  std::vector<std::string> properties;     ///< property ids, in this order; empty = every registered property
  /// Ids left out of `properties` (a front's: the property a previous check died in, which would kill this one too).
  std::vector<std::string> excluded;
  int cases = kDefaultCases;               ///< target cases per property (RapidCheck's maxSuccess)
  std::uint64_t seed = 1;                  ///< same seed ⇒ same cases ⇒ same report
  /// A guard, not a sampler: the wall-clock limit of the whole check, there to bound what a misbehaving kernel
  /// costs (a hang, a compile storm, a kernel far slower than the plan assumes). What a check runs is fixed by
  /// the plan (cases, max_shrinks, the seed), so a report does not depend on the machine's load — until the guard
  /// binds: then no new case or shrink starts, and the properties it cut are undecided, saying so. 0 = none.
  std::chrono::milliseconds time_budget{0};
  /// When set, the guard's end instead of start + time_budget: a worker's item of a parallel run (cli/jobs.h),
  /// which ends where its (kernel, dtype) run would end in a serial check. Steady clock (system-wide on Linux).
  std::optional<std::chrono::steady_clock::time_point> end;
  /// What the kernel declares (SPEC.md §3.1): which properties are required or advisory, the causal alignment and
  /// LSE it is checked against, and its precision profile (contract.precision(dtype)).
  KernelContract contract;
  /// Fewer decided cases than this ⇒ verdict undecided (e.g. the budget ran out, or the kernel declined most).
  int min_cases = kDefaultMinCases;
  int max_shrinks = kDefaultMaxShrinks;  ///< candidate shrinks evaluated per failure before settling
  /// A reproduce string from a Counterexample: replays the recorded case (searching and shrinking nothing) for
  /// the properties it names. Empty = search.
  std::string reproduce;
  /// Gather each counterexample's Evidence once every property ran (the diagnosis, properties/src/diagnosis/; skipped
  /// once cancelled): what the report files show. Re-runs the failing problem on the kernel, so off unless reports
  /// are written.
  bool evidence = false;
  /// Judge with the fast reference's screen first, MPFR where it cannot decide (screen.h, SPEC.md §5.1); false =
  /// MPFR for every case, as before the screen (the same verdicts and reports, slower: for tests and benchmarks).
  bool screen = true;
  /// While a hang (a call stopped at its timeout) is shrunk, each candidate call may take this many times the
  /// longest call that returned so far (at least kMinHangShrinkTimeout, at most the runner's own timeout); the
  /// minimal case is then confirmed once at the full timeout.
  static constexpr int kHangShrinkFactor = 4;
  static constexpr std::chrono::milliseconds kMinHangShrinkTimeout{250};
  /// Compile-friendly generation (CaseOptions::shape_pool): draw every case's dimensions from a pool of this many
  /// shapes (the all-ones shape, where shrinking ends; Lq = 2 > Lk = 1, for rows that see no key; and shapes drawn
  /// as usual — tiling boundaries and long rows included — from the seed and dtype alone). 0 = off.
  int shape_pool = 0;
  /// Before the first property, time the kernel's forward on the pool's first shape twice and on its second once:
  /// when a first call takes at least kCompileSeconds and kCompileRatio times the repeat (a JIT compiler), use a
  /// pool of kAutoShapePool shapes (the probe's shapes, compiled already, among them). Counts against the budget.
  bool detect_compile = false;
  static constexpr int kAutoShapePool = 5;
  static constexpr double kCompileSeconds = 0.5, kCompileRatio = 10;
  /// Stretched properties (long_rows) also run a case of more than 2³¹ elements (CaseOptions::huge_bytes) when its
  /// tensors fit in memory_limit_mib less kHugeMemoryMargin, and kHugeHostCopies of them in the memory available
  /// here (the problem, the sandbox's shared copy and its snapshot of the inputs) — the thorough profile; else the
  /// report says why not.
  bool huge_cases = false;
  /// The kernel's memory limit (sandbox, exec), MiB; 0 = none.
  std::uint64_t memory_limit_mib = 0;
  static constexpr std::uint64_t kHugeMemoryMargin = std::uint64_t{1} << 30;
  static constexpr std::uint64_t kHugeHostCopies = 4;
  /// Mutants the targeted phase runs per property after a search that found nothing (PropertyDef::targeted):
  /// nullopt is cases / kTargetedDivisor; 0 turns the phase off.
  std::optional<int> targeted_cases;
  static constexpr int kTargetedDivisor = 4;
  int targeted_plan() const { return targeted_cases.value_or(cases / kTargetedDivisor); }
  /// Production shapes every property that can take them runs on too (the declared-shapes phase, after a search that
  /// found nothing): one case per shape and property, drawn from the property's seed and the shape's index. A
  /// property takes a shape when the fast reference judges it (PropertyDef::screened; MPFR alone would take hours at
  /// these sizes) and its own constraints allow it (a fixed mask, Dv = Lk, stretched problems do not); a feature the
  /// shape uses must be declared by the kernel. PropertyReport::shapes says how each went; a failure is shrunk.
  std::vector<DeclaredShape> shapes;
  /// The corpus cases of this kernel and dtype, in the order they are replayed (the gate sorts them by hash): before
  /// each property's search, its cases are judged like any other case under this check's contract. The first that
  /// fails is the property's counterexample (Counterexample::corpus_entry names it; the search does not run); when
  /// all pass, the search runs exactly as without them (its RapidCheck seed and stream are the property's own).
  /// PropertyReport::corpus counts them. Not replayed by a reproduce run.
  std::vector<CorpusCase> corpus;
  /// Called after every case of the search and every shrink candidate (progress bars, ETA); may be empty.
  std::function<void(const CheckProgress &)> on_progress;

  // Not part of what is asked: what the call shares with its caller, which keeps both alive across the call.
  /// Set (by a signal handler, another thread) to stop the check early: no new case or shrink candidate starts,
  /// the case in flight is not counted, and the report keeps what was decided (PropertyReport::interrupted). Apart
  /// from `shared`: one flag stops every kernel's runs of a front, while each kernel has its own KernelRunState.
  const std::atomic<bool> *cancel = nullptr;
  /// What this kernel's earlier check() calls learnt (KernelRunState), read and added to. nullptr: kept within this
  /// call only.
  KernelRunState *shared = nullptr;

  static constexpr int kDefaultCases = 100;
  static constexpr int kDefaultMinCases = 10;
  static constexpr int kDefaultMaxShrinks = 3000;
};

/// A registered property as a front lists it: its definition (property.h, the engine's) less how it runs.
struct PropertyInfo {
  std::string_view id;       ///< stable, named after the math
  std::string_view formula;  ///< one line
  std::string_view summary;  ///< one sentence: what a failure means
  bool needs_backward = false;
  std::uint32_t feature = 0;  ///< the ABI feature it checks (ATTNCHECK_FEATURE_*); 0: none
};
/// Every registered property, in the registry's order — a report's.
std::span<const PropertyInfo> property_catalog();
/// The registered property `id`; nullptr for none.
const PropertyInfo *find_property_info(std::string_view id);
/// Property `id`'s tier under `contract` (SPEC.md §3.1); on a run of `dtype` off too where the contract does not
/// declare that dtype. `id` must be registered.
Tier property_tier(std::string_view id, const KernelContract &contract, std::optional<Dtype> dtype = std::nullopt);
/// Property `id`'s report line before anything of it ran: id, formula, summary and its tier on a run of `dtype`
/// under `contract`. The one way a line starts: a check's, a front's item that never started, a crash record.
PropertyReport property_line(std::string_view id, const KernelContract &contract, Dtype dtype);
/// `line` placed among `r`'s lines in the registry's order (a line a front adds after the run: a crash record).
void insert_line(RunReport &r, PropertyReport line);

/// Runs property `id` on one case `c` of `kernel`, judged under `contract` with the precision profile `precision`
/// (a replay: a corpus entry, a report's counterexample): its outcome, or — when attncheck's own check throws —
/// Verdict::error with the exception's message (never undecided: the kernel gave nothing too little). A kernel's own
/// exception is a failed call (kernel_call.h), judged as any other. `id` must be registered.
Outcome evaluate(std::string_view id, const attncheck_kernel &kernel, const Case &c, const KernelContract &contract,
                 const PrecisionProfile &precision);

/// Checks `kernel` against the selected properties. Throws std::invalid_argument for an unknown property id or a
/// reproduce string that does not parse.
RunReport check(const attncheck_kernel &kernel, const CheckOptions &options);

/// Where a check is now, for a front that must say where its process died (a fatal signal inside an in-process
/// kernel): the property, dtype and run seed, what the engine was doing ("search", "shrink", "targeted",
/// "reproduce"), and the case's spec line. check() sets it before each case it evaluates.
struct CaseInProgress {
  std::string property;
  Dtype dtype = Dtype::f32;
  std::uint64_t seed = 0;  ///< CheckOptions::seed: the same check with it reaches this case again
  std::string phase;
  std::string spec;
};
/// A copy of the case a check evaluates now (the last one set, on any thread); nullopt before any.
std::optional<CaseInProgress> case_in_progress();

/// A run's report from its header (kernel, dtype, contract, seed, cases) and its properties' lines, checked together
/// or apart: the lines in order, each hand-over settled (SPEC.md §7: an advisory property's counterexample that a
/// required property's ladder fails too is that property's failure). The one place a run's report is assembled —
/// check()'s, the gate's items run elsewhere (gate::Check::run), a campaign's shards (gate::merge_shards).
RunReport assemble_run(RunReport header, std::vector<PropertyReport> lines);

/// check() on a single property; the report has one line.
RunReport check_property(const attncheck_kernel &kernel, std::string_view id, CheckOptions options);

}  // namespace attncheck
