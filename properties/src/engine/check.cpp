// The engine: drives RapidCheck directly (rc::detail::checkProperty) for each selected property, so that every
// failure keeps its seed and reproduce string, and turns its results into a Report.
//
// One RapidCheck run per property. Its body draws a Case (gen_case) and runs the property; the run moves through
// phases the body tracks itself:
//   search    — cases until one fails (or the target count, or the time budget);
//   shrink    — RapidCheck walks the failure's shrink tree; a candidate counts as failing only when it fails at
//               the same ladder step (so shrinking keeps the failure and does not slide into another one), and
//               after max_shrinks candidates every candidate but the current minimum is rejected;
//   reproduce — one replayed case from a reproduce string.
#include "attncheck/check.h"

#include "attncheck/gen.h"
#include "attncheck/property.h"

#include <rapidcheck/Check.h>
#include <rapidcheck/detail/Configuration.h>
#include <rapidcheck/detail/Property.h>
#include <rapidcheck/detail/Results.h>
#include <rapidcheck/detail/TestListenerAdapter.h>

#include <chrono>
#include <stdexcept>
#include <unordered_map>

namespace attncheck {

namespace {
using Clock = std::chrono::steady_clock;
using rc::detail::CaseResult;

/// RapidCheck's discard limit per target case: a kernel that declines most cases ends the search early.
constexpr int kMaxDiscardRatio = 5;

enum class Phase { search, shrink, reproduce };

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

/// What the body of one RapidCheck run records.
struct RunState {
  const PropertyDef *def = nullptr;
  const Env *env = nullptr;
  Phase phase = Phase::search;
  std::optional<Clock::time_point> deadline;
  int max_shrinks = 0;
  const CheckOptions *opt = nullptr;
  std::size_t index = 0, count = 0;  // of this property among the selected ones

  int cases = 0, unsupported = 0, undecided = 0;
  double worst_ratio = 0;
  std::string worst;
  bool budget_exhausted = false;

  // The failure: the current minimal case and its outcome.
  bool failed = false;
  std::optional<Step> fail_step;
  Case best;
  Outcome best_outcome;
  CaseSpec original;
  int found_after = 0, shrinks_tried = 0;
  // reproduce: the last case evaluated (the replayed one) and its outcome.
  std::optional<Case> last;
  Outcome last_outcome;
};

Outcome evaluate(const RunState &st, const Case &c) {
  try {
    return st.def->run(*st.env, c);
  } catch (const std::exception &e) {
    // An exception is the engine's (or the reference's) trouble, not evidence against the kernel.
    Outcome o;
    o.verdict = Verdict::undecided;
    o.detail = std::string("the check threw: ") + e.what();
    return o;
  }
}

CaseResult body_unreported(RunState &st, const rc::Gen<Case> &gen) {
  using T = CaseResult::Type;
  if (st.phase == Phase::search && st.deadline && Clock::now() > *st.deadline) {
    // Ends RapidCheck's search at once: a "failure" that drew nothing has no shrinks, and run_property reads it
    // as the budget's stop, not as a counterexample (st.failed stays false).
    st.budget_exhausted = true;
    return {T::Failure, "not run: time budget spent"};
  }
  const Case c = *gen;
  if (st.phase == Phase::shrink) {
    if (c.same_as(st.best)) return {T::Failure, st.best_outcome.detail};
    if (st.shrinks_tried >= st.max_shrinks) return {T::Success, "not tried: shrink budget spent"};
    ++st.shrinks_tried;
  }
  const Outcome o = evaluate(st, c);
  switch (st.phase) {
    case Phase::search:
      if (o.verdict == Verdict::unsupported) {
        ++st.unsupported;
        return {T::Discard, o.detail};
      }
      ++st.cases;
      if (o.verdict == Verdict::fail) {
        st.failed = true;
        st.fail_step = o.step;
        st.best = c;
        st.best_outcome = o;
        st.original = c.spec;
        st.found_after = st.cases;
        st.phase = Phase::shrink;
        return {T::Failure, o.detail};
      }
      if (o.verdict == Verdict::undecided) ++st.undecided;
      if (o.verdict == Verdict::pass && (st.worst.empty() || o.worst_ratio > st.worst_ratio)) {
        st.worst_ratio = o.worst_ratio;
        st.worst = "case " + std::to_string(st.cases) + " (" + c.spec.describe() + "): " + o.worst;
      }
      return {T::Success, o.detail};
    case Phase::shrink:
      if (o.verdict == Verdict::fail && o.step == st.fail_step) {
        st.best = c;
        st.best_outcome = o;
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
  if (!st.opt->on_progress) return;
  st.opt->on_progress(CheckProgress{.property = st.def->id,
                                    .property_index = st.index,
                                    .property_count = st.count,
                                    .cases = st.cases + st.unsupported,
                                    .target = st.opt->cases,
                                    .shrinking = st.phase == Phase::shrink,
                                    .shrinks_tried = st.shrinks_tried});
}

CaseResult body(RunState &st, const rc::Gen<Case> &gen) {
  const CaseResult r = body_unreported(st, gen);
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

void settle_verdict(PropertyReport &pr, const RunState &st, const CheckOptions &opt) {
  const int decided = st.cases - st.undecided;
  const int needed = std::min(opt.min_cases, opt.cases);
  if (st.cases == 0 && st.unsupported > 0) {
    pr.verdict = Verdict::unsupported;
    pr.note = "the kernel declined all " + std::to_string(st.unsupported) + " cases";
  } else if (decided < needed) {
    pr.verdict = Verdict::undecided;
    pr.note = "only " + std::to_string(decided) + " decided cases (at least " + std::to_string(needed) +
              " needed)" + (st.budget_exhausted ? ": the time budget ran out" : "");
  } else {
    pr.verdict = Verdict::pass;
  }
}

PropertyReport run_property(const PropertyDef &def, const Env &env, const CheckOptions &opt, std::size_t index,
                            std::size_t count, std::optional<Clock::time_point> deadline,
                            const std::unordered_map<std::string, rc::detail::Reproduce> *reproduce) {
  PropertyReport pr;
  pr.id = std::string(def.id);
  pr.formula = std::string(def.formula);
  pr.summary = std::string(def.summary);
  pr.seed = property_seed(opt.seed, def.id, opt.dtype);
  pr.tier = tier_of(def, env.contract);
  if (pr.tier == Tier::off) {
    pr.verdict = Verdict::unsupported;
    pr.note = "nothing to check under the kernel's contract (" + env.contract.describe_changes() + ")";
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
  if (env.contract.empty_rows == EmptyRows::unspecified) co.empty_rows = false;
  co.backward = def.needs_backward;
  if (def.require) def.require(co);
  if (co.mask == Mask::causal) co.mask = co.causal;  // a property asking for "causal" gets the declared alignment
  const rc::Gen<Case> gen = gen_case(co);

  RunState st;
  st.def = &def;
  st.env = &env;
  st.phase = reproduce ? Phase::reproduce : Phase::search;
  st.deadline = deadline;
  st.max_shrinks = opt.max_shrinks;
  st.opt = &opt;
  st.index = index;
  st.count = count;

  rc::detail::TestMetadata meta;
  meta.id = run_id(def.id, opt.dtype);
  meta.description = std::string(def.formula);
  rc::detail::TestParams params;
  params.seed = pr.seed;
  params.maxSuccess = opt.cases;
  params.maxSize = rc::kNominalSize;
  params.maxDiscardRatio = kMaxDiscardRatio;
  rc::detail::TestListenerAdapter listener;
  const std::unordered_map<std::string, rc::detail::Reproduce> none;
  const auto result = rc::detail::checkProperty(rc::detail::toProperty([&st, &gen] { return body(st, gen); }),
                                                meta, params, listener, reproduce ? *reproduce : none);

  pr.cases = st.cases;
  pr.unsupported = st.unsupported;
  pr.undecided = st.undecided;
  pr.worst_ratio = st.worst_ratio;
  pr.worst = st.worst;
  pr.budget_exhausted = st.budget_exhausted;

  rc::detail::FailureResult failure;
  rc::detail::Error error;
  if (reproduce) {
    // The replayed case is the last one evaluated.
    pr.cases = st.last && st.last_outcome.verdict != Verdict::unsupported ? 1 : 0;
    if (result.match(failure) && st.last) {
      pr.verdict = pr.tier == Tier::advisory ? Verdict::warn : Verdict::fail;
      pr.counterexample = Counterexample{.minimal = *st.last,
                                         .outcome = st.last_outcome,
                                         .original = st.last->spec,
                                         .found_after = 0,
                                         .shrink_steps = static_cast<int>(failure.reproduce.shrinkPath.size()),
                                         .shrinks_tried = 0,
                                         .seed = pr.seed,
                                         .reproduce = reproduce_string(pr.seed, meta.id, failure.reproduce)};
      pr.note = "reproduced";
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

  const bool found = result.match(failure) && st.failed;  // else a failure is the time budget's stop
  if (found) {
    pr.verdict = pr.tier == Tier::advisory ? Verdict::warn : Verdict::fail;
    pr.counterexample = Counterexample{.minimal = st.best,
                                       .outcome = st.best_outcome,
                                       .original = st.original,
                                       .found_after = st.found_after,
                                       .shrink_steps = static_cast<int>(failure.reproduce.shrinkPath.size()),
                                       .shrinks_tried = st.shrinks_tried,
                                       .seed = pr.seed,
                                       .reproduce = reproduce_string(pr.seed, meta.id, failure.reproduce)};
    return pr;
  }
  if (result.match(error)) {
    pr.verdict = Verdict::undecided;
    pr.note = "RapidCheck error: " + error.description;
    return pr;
  }
  settle_verdict(pr, st, opt);  // success, the budget's stop, or gave up after too many declined cases
  return pr;
}
}  // namespace

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
      if (!replay || replay->reproduce.count(run_id(d->id, options.dtype))) selected.push_back(d);
  } else {
    for (const std::string &id : options.properties) {
      const PropertyDef *d = find_property(id);
      if (!d) throw std::invalid_argument("check: unknown property '" + id + "'");
      if (!replay || replay->reproduce.count(run_id(d->id, options.dtype))) selected.push_back(d);
    }
  }
  if (replay && selected.empty())
    throw std::invalid_argument("check: the reproduce string names no selected property for dtype " +
                                std::string(dtype_name(options.dtype)));

  const Env env{kernel, rep.profile, rep.contract};
  const Clock::time_point start = Clock::now();
  for (std::size_t n = 0; n < selected.size(); ++n) {
    std::optional<Clock::time_point> deadline;
    if (options.time_budget.count() > 0)
      deadline = start + options.time_budget * static_cast<std::int64_t>(n + 1) /
                             static_cast<std::int64_t>(selected.size());
    rep.properties.push_back(
        run_property(*selected[n], env, options, n, selected.size(), deadline,
                     replay ? &replay->reproduce : nullptr));
  }
  return rep;
}

Report check_property(const attncheck_kernel &kernel, std::string_view id, CheckOptions options) {
  options.properties = {std::string(id)};
  return check(kernel, options);
}

}  // namespace attncheck
