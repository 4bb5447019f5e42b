// The guard, and what a run may claim when it stops. The time budget is a guard over the whole check: when it passes,
// nothing new starts, and the properties it cut are undecided, each saying how far it got. A cancelled check and a
// kernel whose runner gave up stop a run too. A run that found no failure passes only on enough decided cases on
// enough distinct shapes; else it says what was missing and why.
#include "run_state.h"

#include <fmt/core.h>

#include <algorithm>

namespace attncheck::engine {

namespace {
/// A pass needs its decided cases on at least this many distinct shapes, or on every shape the plan has when it
/// has fewer (a shape pool's size; without a pool, the target cases): a pass on two shapes says almost nothing.
constexpr std::size_t kMinPassShapes = 3;

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
}  // namespace

bool cancelled(const RunState &st) { return st.run->opt.cancel && st.run->opt.cancel->load(); }

bool must_stop(RunState &st) {
  if (st.unavailable) return true;
  if (cancelled(st)) return st.interrupted = true;
  if (st.run->guard && Clock::now() > *st.run->guard) return st.budget_exhausted = true;
  return false;
}

bool cut_short(RunState &st) {
  if (!st.unavailable && !cancelled(st)) return false;
  st.interrupted = cancelled(st);
  return true;
}

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
  if (!st.counts.first_error.empty()) {
    // attncheck's own trouble outranks whatever else the search saw: nothing it claims can be trusted.
    pr.verdict = Verdict::error;
    pr.note = "attncheck's own check failed, a bug of attncheck and not of the kernel (please report it with this "
              "report): " + st.counts.first_error;
  } else if (st.budget_exhausted && !st.interrupted) {
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

}  // namespace attncheck::engine
