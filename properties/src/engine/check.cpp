// The engine: drives RapidCheck directly (rc::detail::checkProperty) for each selected property, so that every
// failure keeps its seed and reproduce string, and turns its results into a Report.
//
// One RapidCheck run per property (run_property). Its body draws a Case (gen_case) and runs the property; the run
// moves through phases the body tracks itself (RunState, run_state.h), each in its file:
//   search    — cases until one fails, or the planned count (search.cpp, which judges every phase's case);
//   shrink    — RapidCheck walks the failure's shrink tree, keeping only the same failure (shrink.cpp);
//   declared  — after a search that found nothing, one case on each production shape the check declares
//               (CheckOptions::shapes) that the property can take (declared.cpp);
//   target    — after that, mutants of the search's passed cases of highest error ÷ bound climb toward a failure
//               (targeted.cpp);
//   reproduce — one replayed case from a reproduce string (a targeted one: the search and the phase run again up
//               to its mutant, deterministic as they are, then the path is followed; a declared shape's: its case
//               drawn again, then the path).
// Around them, guard.cpp stops a run and says what it may claim, and shape_pool.cpp draws the compile-friendly
// pool the properties take their shapes from.
//
// What runs is the plan's alone — cases, shrinks, the seed — so a report is the same under any load; the time
// budget only guards it (guard.cpp).
#include "attncheck/check.h"

#include "diagnosis/diagnosis.h"
#include "run_state.h"

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
#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <unordered_map>
#include <utility>

namespace attncheck {

namespace engine {

std::uint64_t fnv1a(std::string_view s) {
  constexpr std::uint64_t kOffset = 0xcbf29ce484222325ull, kPrime = 0x100000001b3ull;
  std::uint64_t h = kOffset;
  for (char ch : s) h = (h ^ static_cast<unsigned char>(ch)) * kPrime;
  return h;
}

std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void add_note(PropertyReport &pr, const std::string &clause) { pr.note += (pr.note.empty() ? "" : "; ") + clause; }

namespace {
/// RapidCheck's discard limit per target case: a kernel that declines most cases ends the search early.
constexpr int kMaxDiscardRatio = 5;

/// Advisory properties whose counterexample the required ladder may decide (hand_over.h): nonfinite_output's cases
/// are accuracy's, drawn from the extremes more often; a NaN there with a finite bound is accuracy's failure.
constexpr std::string_view kHandsOver[] = {"nonfinite_output"};

/// Each property's cases depend only on the seed, its id and the dtype — not on which other properties run.
std::uint64_t property_seed(std::uint64_t seed, std::string_view id, Dtype dt) {
  return mix(seed ^ fnv1a(id) ^ (static_cast<std::uint64_t>(dt) << 56));
}

/// RapidCheck test id of a property run: the key of its reproduce map.
std::string run_id(std::string_view id, Dtype dt) { return std::string(id) + "/" + std::string(dtype_name(dt)); }

/// The reproduce map's key of a counterexample the targeted phase found: its Reproduce's size is the mutant's
/// number, its shrink path a path in that mutant's shrinkable_case tree.
std::string target_id(std::string_view id, Dtype dt) { return run_id(id, dt) + "@target"; }

/// The reproduce map's key of a counterexample the declared-shapes phase found: its Reproduce's size is the shape's
/// index in CheckOptions::shapes, its shrink path a path in that shape's case's shrinkable_case tree.
std::string shape_id(std::string_view id, Dtype dt) { return run_id(id, dt) + "@shape"; }

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

/// The body of a property's RapidCheck run: one case drawn and judged.
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

/// "seed=… reproduce=…": RapidCheck's own configuration syntax, holding the failure's Reproduce.
std::string reproduce_string(std::uint64_t seed, const std::string &id, const rc::detail::Reproduce &r) {
  rc::detail::Configuration cfg;
  cfg.testParams.seed = seed;
  cfg.reproduce[id] = r;
  return rc::detail::configToMinimalString(cfg);
}

/// An advisory property's counterexample `pr` that the required property judging its case fails at step finite —
/// NaN or ±Inf where the exact value and its bound are finite — is a required failure (hand_over.h): the line is
/// escalated, with the required ladder's outcome, until assemble_run gives it to that property's line.
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
  cx.passes_under.clear();
  add_note(pr, std::string(judge->id) + " fails this case: NaN or ±Inf where the exact value and its bound are finite");
}

/// Why `def` has nothing to run for `env`'s kernel and contract in dtype `dt` at tier `tier`: the note of an
/// unsupported line, or nullopt when it runs.
std::optional<std::string> not_run(const PropertyDef &def, const Env &env, Dtype dt, Tier tier) {
  if (def.needs_backward && env.kernel.backward == nullptr && tier != Tier::off) return "the kernel has no backward";
  if (tier != Tier::off) return std::nullopt;
  if (!env.contract.implements(dt))
    return "declined: the kernel's contract does not declare dtypes=" + std::string(dtype_name(dt)) +
           " (it declares dtypes=" + dtype_list(env.contract.dtypes) + ")";
  if (def.feature && !(env.contract.features & def.feature))
    return "declined: the kernel's contract does not declare features=" + std::string(feature_name(def.feature)) +
           " (it declares features=" + feature_list(env.contract.features) + ")";
  return "nothing to check under the kernel's contract (" + env.contract.describe_changes() + ")";
}

/// The cases `def` draws in `run`: the contract's causal alignment, combinable features and rows that see no key,
/// the backward when the property needs it, production shapes where the screen keeps them cheap, the shape pool,
/// then the property's own narrowing.
CaseOptions case_options(const PropertyDef &def, CheckRun &run) {
  const Env &env = run.env;
  CaseOptions co;
  co.dtype = run.opt.dtype;
  co.causal = env.contract.causal == CausalAlign::top_left ? Mask::causal_top_left : Mask::causal;
  co.combinable = env.contract.features & kCombinableFeatures;
  if (env.contract.empty_rows == EmptyRows::unspecified) co.empty_rows = false;
  co.backward = def.needs_backward;
  co.reach = def.screened;
  co.shape_pool = run.pool.shapes;
  if (def.require) def.require(co);
  if (co.dv_equals_lk) co.tie_head_dims = run.declines_unequal_head_dims();
  return co;
}

/// Where a counterexample came from, besides its case and outcome (Counterexample's other fields).
struct Provenance {
  CaseSpec original;
  int found_after = 0, shrink_steps = 0, shrinks_tried = 0;
  std::string reproduce, corpus_entry;
};

/// Makes `minimal`, failing with `o`, pr's counterexample: the verdict (warn for an advisory property), its
/// diagnosis (the declarations that explain it, or under which it passes: diagnosis::diagnose, until `stop`), and an
/// advisory property's escalation to the required failure its case may be (escalate_if_required). The one place a
/// Counterexample is made.
void make_counterexample(PropertyReport &pr, const PropertyDef &def, const Env &env, const CaseOptions &co,
                         const Case &minimal, const Outcome &o, Provenance from,
                         const std::function<bool()> &stop = {}) {
  pr.verdict = pr.tier == Tier::advisory ? Verdict::warn : Verdict::fail;
  diagnosis::Diagnosis d = diagnosis::diagnose(def, env, co, pr.seed, minimal, o, stop);
  pr.counterexample = Counterexample{.minimal = minimal,
                                     .outcome = o,
                                     .original = std::move(from.original),
                                     .found_after = from.found_after,
                                     .shrink_steps = from.shrink_steps,
                                     .shrinks_tried = from.shrinks_tried,
                                     .seed = pr.seed,
                                     .reproduce = std::move(from.reproduce),
                                     .explained_by = std::move(d.explained_by),
                                     .passes_under = std::move(d.passes_under),
                                     .evidence = std::nullopt,  // add_evidence, once every property ran
                                     .corpus_entry = std::move(from.corpus_entry)};
  if (pr.tier == Tier::advisory) escalate_if_required(pr, def, env);
}

/// The corpus phase (CheckOptions::corpus): `def`'s corpus cases judged in order, before its search, counted in
/// pr.corpus. The first that fails becomes pr's counterexample (not shrunk again: it is a recorded minimal case), and
/// true is returned: the property's run ends there, as a search ends at its first failure. Calls no RapidCheck and
/// draws nothing, so the search that follows a corpus that passes is the one a run without a corpus makes.
bool replay_corpus(const PropertyDef &def, const CheckRun &run, const CaseOptions &co, PropertyReport &pr) {
  const CheckOptions &opt = run.opt;
  for (const CorpusCase &cc : opt.corpus) {
    if (cc.property != def.id) continue;
    if ((opt.cancel && opt.cancel->load()) || (run.guard && Clock::now() > *run.guard)) break;
    ++pr.corpus.replayed;
    const Outcome o = evaluate(def, run.env, cc.minimal);
    if (o.verdict != Verdict::fail) {
      pr.corpus.passed += o.verdict == Verdict::pass ? 1 : 0;
      continue;
    }
    add_note(pr, fmt::format("from the corpus: entry {} fails again (corpus case {} of this property)", cc.hash,
                             pr.corpus.replayed));
    make_counterexample(pr, def, run.env, co, cc.minimal, o,
                        {.original = cc.minimal.spec, .reproduce = cc.reproduce, .corpus_entry = cc.hash});
    return true;
  }
  return false;
}

/// What RapidCheck's run of a property ended with, and the reproduce map's key of its failure (the search's, or the
/// targeted phase's).
struct Searched {
  rc::detail::TestResult result;  ///< match() fills failure or error from it
  rc::detail::FailureResult failure;
  rc::detail::Error error;
  std::string key, failure_key;
};

/// The search of `st.def` (then, unless replaying or cut short, its declared-shapes and targeted phases) on cases of
/// `gen`: RapidCheck drives body(), which judges, counts and shrinks (search.cpp, shrink.cpp). `replaying`: the
/// reproduce map's case alone; `target_replay`: a targeted counterexample to reach again; `shape_replay`: a declared
/// shape's (its case drawn again, no search).
Searched search(RunState &st, const rc::Gen<Case> &gen, const CaseOptions &co, std::uint64_t seed, bool replaying,
                const rc::detail::Reproduce *target_replay, const rc::detail::Reproduce *shape_replay) {
  const CheckOptions &opt = st.run->opt;
  const PropertyDef &def = *st.def;
  const std::string key = run_id(def.id, opt.dtype);
  if (shape_replay) {
    Searched s{.result = rc::detail::SuccessResult{},
               .failure = {},
               .error = {},
               .key = key,
               .failure_key = shape_id(def.id, opt.dtype)};
    s.failure.reproduce = *declared(st, co, seed, shape_replay);
    return s;
  }
  rc::detail::TestMetadata meta;
  meta.id = key;
  meta.description = std::string(def.formula);
  rc::detail::TestParams params;
  params.seed = seed;
  params.maxSuccess = opt.cases;
  params.maxSize = rc::kNominalSize;
  params.maxDiscardRatio = kMaxDiscardRatio;
  rc::detail::TestListenerAdapter listener;
  const std::unordered_map<std::string, rc::detail::Reproduce> none;
  Searched s{.result = rc::detail::checkProperty(rc::detail::toProperty([&st, &gen] { return body(st, gen); }), meta,
                                                params, listener, replaying ? *st.run->reproduce : none),
             .failure = {},
             .error = {},
             .key = key,
             .failure_key = key};
  const bool searched =
      !s.result.match(s.failure) && !s.result.match(s.error) && !st.budget_exhausted && !st.interrupted;
  if (!replaying && searched && !target_replay && !opt.shapes.empty())
    if (const std::optional<rc::detail::Reproduce> found = declared(st, co, seed, nullptr)) {
      s.failure.reproduce = *found;
      s.failure_key = shape_id(def.id, opt.dtype);
      return s;
    }
  if (!replaying && searched && def.targeted)
    if (const std::optional<rc::detail::Reproduce> found = target(st, co, seed, target_replay)) {
      s.failure.reproduce = *found;
      s.failure_key = target_id(def.id, opt.dtype);
    }
  return s;
}

/// The search's figures: cases, declines, undecided, the worst error ÷ bound and where, the guard, coverage.
void record_search(PropertyReport &pr, RunState &st) {
  pr.cases = st.counts.cases;
  pr.unsupported = st.counts.unsupported;
  pr.undecided = st.counts.undecided;
  if (st.counts.worst.held) {
    const Outcome &worst = st.counts.worst.settle();
    pr.worst_ratio = worst.worst_ratio;
    pr.worst = st.counts.worst.where + worst.worst;
  }
  pr.budget_exhausted = st.budget_exhausted;
  pr.interrupted = st.interrupted;
  pr.skipped = st.counts.skipped;
  pr.coverage = st.counts.coverage;
  pr.targeted = st.target.counts;
  pr.shapes = st.shapes;
}

/// A reproduce run's line: the replayed case (the last one evaluated) fails again, no longer fails, or was not
/// reached.
void settle_reproduction(PropertyReport &pr, RunState &st, const CaseOptions &co, Searched &s, bool replaying,
                         bool target_replay) {
  // A targeted replay reached its mutant again; a declared shape's is reached by construction.
  const bool reached = replaying || s.failure_key != s.key;
  if (!reached) {
    pr.verdict = Verdict::undecided;
    pr.note = "could not reproduce: the search and the targeted phase took another course (the kernel's answers "
              "changed)";
    return;
  }
  pr.cases = st.last && st.last_outcome.verdict != Verdict::unsupported ? 1 : 0;
  if ((target_replay ? st.last_outcome.verdict == Verdict::fail : s.result.match(s.failure)) && st.last) {
    pr.note = "reproduced";
    make_counterexample(pr, *st.def, st.run->env, co, *st.last, st.last_outcome,
                        {.original = st.last->spec,
                         .shrink_steps = static_cast<int>(s.failure.reproduce.shrinkPath.size()),
                         .reproduce = reproduce_string(pr.seed, s.failure_key, s.failure.reproduce),
                         .corpus_entry = {}},
                        [&] { return must_stop(st); });
  } else if (st.last) {
    pr.verdict = st.last_outcome.verdict;
    pr.worst_ratio = st.last_outcome.worst_ratio;
    pr.worst = st.last_outcome.worst;
    pr.note = "the reproduced case no longer fails" +
              (st.last_outcome.detail.empty() ? "" : " (" + st.last_outcome.detail + ")");
  } else {
    pr.verdict = Verdict::undecided;
    pr.note = s.result.match(s.error) ? "could not reproduce: " + s.error.description : "could not reproduce";
  }
}

/// The search's (or the targeted phase's) failure, shrunk, as pr's counterexample, with what stopped the shrinking.
void settle_failure(PropertyReport &pr, RunState &st, const CaseOptions &co, Searched &s) {
  confirm_hang(st, s.failure.reproduce.shrinkPath, pr);
  const Failure &f = st.failure;
  if (f.hang) {
    st.run->shared.hung.push_back(f.best.spec.problem_shape());
    if (st.ran.largest) add_note(pr, "the largest case that ran: " + st.ran.largest->describe());
  }
  make_counterexample(pr, *st.def, st.run->env, co, f.best, f.best_outcome,
                      {.original = f.original,
                       .found_after = f.found_after,
                       .shrink_steps = static_cast<int>(s.failure.reproduce.shrinkPath.size()),
                       .shrinks_tried = f.shrinks_tried,
                       .reproduce = reproduce_string(pr.seed, s.failure_key, s.failure.reproduce),
                       .corpus_entry = {}},
                      [&] { return must_stop(st); });
  if (s.failure_key == shape_id(st.def->id, st.run->opt.dtype)) {
    add_note(pr, fmt::format("found on declared shape {} (error ÷ bound {:.3g}), shrunk from there",
                             st.shapes.back().shape, f.first_outcome.worst_ratio));
  } else if (s.failure_key != s.key) {
    pr.targeted.to = std::max(pr.targeted.to, f.first_outcome.worst_ratio);
    add_note(pr, fmt::format("found by the targeted phase: mutant {} of the search's worst cases (error ÷ bound "
                             "{:.3g} at most in the search)",
                             st.target.failed + 1, pr.targeted.from));
  }
  if (st.budget_exhausted && !st.interrupted)
    add_note(pr, fmt::format("the time budget of {:.3g} s cut the shrinking after {} candidates (--time-budget)",
                             std::chrono::duration<double>(st.run->opt.time_budget).count(), f.shrinks_tried));
}

/// A search without a failure: its verdict (settle_verdict) and what the run should know of how it went.
void settle_search(PropertyReport &pr, RunState &st, const CaseOptions &co,
                   const std::optional<std::string> &huge_skipped) {
  settle_verdict(pr, st);
  if (huge_skipped) add_note(pr, *huge_skipped);
  if (co.stretch && st.ran.largest)  // which sizes ran (SPEC.md §7 long_rows)
    add_note(pr, "sizes run: rows up to Lk=" + std::to_string(st.ran.longest_row) + ", squares up to Lq=Lk=" +
                     std::to_string(st.ran.largest_square) + ", up to " + std::to_string(st.ran.most_elements) +
                     " elements in one tensor; largest problem " + st.ran.largest->problem_shape().describe());
  if (st.run->pool.shapes)
    add_note(pr, "shapes from a pool of " + std::to_string(st.run->pool.shapes->size()) +
                     " (compile-friendly generation)");
  if (!st.shapes.empty()) {
    const auto count = [&](Verdict v, bool taken) {
      return std::count_if(st.shapes.begin(), st.shapes.end(), [&](const ShapeRun &r) {
        return r.verdict == v && (r.verdict != Verdict::unsupported || taken == !r.spec.empty());
      });
    };
    add_note(pr, fmt::format("declared shapes: {} passed, {} undecided, {} declined by the kernel, {} not taken",
                             count(Verdict::pass, true), count(Verdict::undecided, true) + count(Verdict::error, true),
                             count(Verdict::unsupported, true), count(Verdict::unsupported, false)));
  }
  if (const TargetedSearch &t = st.target.counts; t.ran())
    add_note(pr, fmt::format("targeted phase: {} mutants of the search's worst cases took error ÷ bound from {:.3g} "
                             "to {:.3g}",
                             t.cases + t.declined, t.from, t.to));
}

/// Checks property `def`, the index-th of the selected ones, in `run`: off or unsupported, the corpus, the search
/// and the targeted phase, then the line they settle.
PropertyReport run_property(const PropertyDef &def, std::size_t index, CheckRun &run) {
  const CheckOptions &opt = run.opt;
  const Env &env = run.env;
  PropertyReport pr = property_line(def.id, env.contract, opt.dtype);
  pr.seed = property_seed(opt.seed, def.id, opt.dtype);
  if (std::optional<std::string> why = not_run(def, env, opt.dtype, pr.tier)) {
    pr.verdict = Verdict::unsupported;
    pr.note = std::move(*why);
    return pr;
  }
  CaseOptions co = case_options(def, run);
  const std::optional<std::string> huge_skipped =
      co.stretch && opt.huge_cases ? allow_huge_case(opt, co) : std::optional<std::string>{};
  if (co.mask == Mask::causal) co.mask = co.causal;  // a property asking for "causal" gets the declared alignment
  const rc::Gen<Case> gen = gen_case(co);
  if (!run.reproduce && replay_corpus(def, run, co, pr)) return pr;  // the corpus first, not in a reproduce run

  RunState st;
  st.def = &def;
  st.run = &run;
  st.index = index;
  // Feature properties draw dO and check the backward when the kernel has one.
  st.corners = {.backward = co.backward && env.kernel.backward != nullptr,
                .lse = env.contract.lse != LseOutput::none,
                .declared_features = co.declared_features};
  st.reaches = corners_named(def.reaches);
  // A targeted counterexample is reproduced by the search and the targeted phase again, up to its mutant; a declared
  // shape's by its case alone.
  const auto replay_of = [&](const std::string &key) -> const rc::detail::Reproduce * {
    if (!run.reproduce) return nullptr;
    const auto it = run.reproduce->find(key);
    return it == run.reproduce->end() ? nullptr : &it->second;
  };
  const rc::detail::Reproduce *target_replay = replay_of(target_id(def.id, opt.dtype));
  const rc::detail::Reproduce *shape_replay = replay_of(shape_id(def.id, opt.dtype));
  const bool replaying = run.reproduce && !target_replay && !shape_replay;
  st.phase = replaying ? Phase::reproduce : Phase::search;
  st.started = Clock::now();
  st.counts.declined_shapes = run.pool.declined;  // the pool's, declined before it was drawn from
  Searched s = search(st, gen, co, pr.seed, replaying, target_replay, shape_replay);
  record_search(pr, st);
  if (replaying || target_replay || shape_replay) {
    settle_reproduction(pr, st, co, s, replaying, target_replay != nullptr || shape_replay != nullptr);
  } else if ((s.result.match(s.failure) || s.failure_key != s.key) && st.failure.found) {
    settle_failure(pr, st, co, s);  // else a failure is the time budget's stop
  } else if (s.result.match(s.error)) {
    pr.verdict = Verdict::undecided;
    pr.note = "RapidCheck error: " + s.error.description;
  } else {
    settle_search(pr, st, co, huge_skipped);  // success, the budget's stop, or too many declined cases
  }
  return pr;
}

/// The reproduce string names a failure of property `id` in `dt`: the search's, the targeted phase's or a declared
/// shape's.
bool names(const rc::detail::Configuration &replay, std::string_view id, Dtype dt) {
  return replay.reproduce.count(run_id(id, dt)) || replay.reproduce.count(target_id(id, dt)) ||
         replay.reproduce.count(shape_id(id, dt));
}
}  // namespace

}  // namespace engine

RunReport check(const attncheck_kernel &kernel, const CheckOptions &options) {
  using namespace engine;
  RunReport rep;
  rep.kernel = kernel.name ? kernel.name : "?";
  rep.dtype = options.dtype;
  rep.contract = options.contract;
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
  std::erase_if(selected, [&](const PropertyDef *d) {
    return std::find(options.excluded.begin(), options.excluded.end(), d->id) != options.excluded.end();
  });
  if (replay && selected.empty())
    throw std::invalid_argument("check: the reproduce string names no selected property for dtype " +
                                std::string(dtype_name(options.dtype)));

  const Env env{kernel, rep.precision(), rep.contract};
  KernelRunState local;
  KernelRunState &shared = options.shared ? *options.shared : local;
  const Clock::time_point check_start = Clock::now();
  std::shared_ptr<const std::vector<Shape>> pool;
  ShapePool accepted;
  int pool_size = 0;
  if (!options.contract.implements(options.dtype)) {
    // Every property is off (run_property): the kernel is not called at all, not even by the probe.
  } else if (options.shape_pool > 0) {
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
  const bool screen_before = std::exchange(screen_on_this_thread(), options.screen);
  std::vector<PropertyReport> lines;
  for (std::size_t n = 0; n < selected.size(); ++n) {
    const Clock::time_point started = Clock::now();
    const std::chrono::nanoseconds kernel_before = CallRecord::kernel_time();
    ReferenceCounts::of_this_thread() = {};
    PropertyReport pr = run_property(*selected[n], n, run);
    pr.reference = ReferenceCounts::of_this_thread();
    if (pr.corpus.replayed > 0 && !(pr.counterexample && pr.counterexample->from_corpus()))
      add_note(pr, fmt::format("corpus: {} recorded case{} replayed first, {} passed", pr.corpus.replayed,
                               pr.corpus.replayed == 1 ? "" : "s", pr.corpus.passed));
    pr.timing = {.seconds = std::chrono::duration<double>(Clock::now() - started).count(),
                 .kernel_seconds = std::chrono::duration<double>(CallRecord::kernel_time() - kernel_before).count()};
    lines.push_back(std::move(pr));
  }
  screen_on_this_thread() = screen_before;
  rep = assemble_run(std::move(rep), std::move(lines));
  if (options.evidence && !(options.cancel && options.cancel->load())) diagnosis::add_evidence(rep, kernel);
  return rep;
}

RunReport check_property(const attncheck_kernel &kernel, std::string_view id, CheckOptions options) {
  options.properties = {std::string(id)};
  return check(kernel, options);
}

}  // namespace attncheck
