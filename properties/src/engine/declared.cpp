// The declared-shapes phase (CheckOptions::shapes): the production shapes a user names — a model's heads, lengths and
// head dims — run through every property that can take them, after its search found nothing and before its targeted
// phase. One case per shape, its dimensions, mask and declared features fixed and everything else (layout, value
// family, the features the property draws, the values) drawn from the property's seed and the shape's index, so a
// shape's case does not depend on the search or on which other shapes are declared. A failure is shrunk by walking
// its shrinkable_case tree under the property's own options (shrink_walk): the production problem shrinks to a small
// one. Its reproduce string names "<id>/<dtype>@shape", the shape's index and the path.
#include "run_state.h"

#include "attncheck/gen.h"

#include <fmt/core.h>

#include <limits>
#include <memory>
#include <stdexcept>

namespace attncheck {

std::string DeclaredShape::describe() const {
  std::string s = name + ": " + shape.describe() + (causal ? " causal" : "");
  if (features & ATTNCHECK_FEATURE_WINDOW) s += fmt::format(" window={},{}", window_left, window_right);
  if (features & ATTNCHECK_FEATURE_SOFTCAP) s += fmt::format(" softcap={:g}", softcap);
  return s;
}

namespace engine {

namespace {
/// The mask a declared shape asks for, aligned as the kernel declares (CaseOptions::causal).
Mask mask_of(const DeclaredShape &d, const CaseOptions &co) { return d.causal ? co.causal : Mask::none; }

/// Why property `def`, drawing under `co`, cannot take shape `d` for the kernel of `env`; nullopt when it can.
std::optional<std::string> not_taken(const PropertyDef &def, const CaseOptions &co, const Env &env,
                                     const DeclaredShape &d) {
  if (!def.screened) return "not taken: judged by MPFR alone, which would take hours at production sizes";
  if (co.stretch) return "not taken: its cases are stretched problems";
  if (co.dv_equals_lk) return "not taken: its cases set Dv = Lk";
  if (const std::uint32_t missing = d.features & ~env.contract.features)
    return "not taken: the shape uses features=" + feature_list(missing) + ", which the kernel does not declare";
  if (co.mask && *co.mask != mask_of(d, co))
    return std::string("not taken: its cases are ") + (*co.mask == Mask::none ? "not causal" : "causal");
  return std::nullopt;
}

/// The case of shape `d` for a property drawing under `co`, drawn from `random`: the shape's dimensions, mask and
/// features, the rest as the property draws it — every value family but extremes, as the reach regime (gen.h: float16
/// extremes in rows of thousands of keys would leave MPFR to judge the whole problem). nullopt, with `why`, when
/// the property's constraints would change the shape (rows that see no key where its contract leaves them
/// unspecified, or where it needs them).
std::optional<Case> draw_declared(const DeclaredShape &d, CaseOptions co, rc::Random random, std::string &why) {
  const Mask mask = mask_of(d, co);
  co.shape_pool = std::make_shared<const std::vector<Shape>>(1, d.shape);
  co.max_work = std::numeric_limits<std::int64_t>::max();
  co.mask = mask;
  co.features |= d.features;
  const rc::Random spec_random = random.split(), values_random = random.split();
  CaseSpec s = draw_spec(spec_random, rc::kNominalSize, co);
  if (!co.family) s.family = static_cast<Family>(random.next() % (kFamilyCount - 1));
  if (d.features & ATTNCHECK_FEATURE_WINDOW) {
    s.features.window_left = d.window_left;
    s.features.window_right = d.window_right;
  }
  if (d.features & ATTNCHECK_FEATURE_SOFTCAP) s.features.softcap = d.softcap;
  if (s.shape != d.shape || s.mask != mask || !co.admits(s)) {
    why = "not taken: the property's cases cannot keep this shape (" + s.shape.describe() + " is what they admit)";
    return std::nullopt;
  }
  return draw_case(values_random, s, co);
}

/// The Random of shape `index`'s case: the property's seed and the index alone.
rc::Random shape_random(std::uint64_t seed, std::size_t index) {
  return rc::Random(mix(seed ^ fnv1a("declared") ^ mix(index)));
}
}  // namespace

CaseResult judge_declared(RunState &st, const Case &c, const Outcome &o, bool timed_out, const std::string &slow) {
  using T = CaseResult::Type;
  ShapeRun &run = st.shapes.back();
  if (o.verdict == Verdict::unsupported) {
    count_corners(st, c, /*was_decided=*/false);
    run.note = "the kernel declined it" + (o.detail.empty() ? "" : ": " + o.detail);
    return {T::Discard, o.detail};
  }
  if (!slow.empty()) {
    run.verdict = Verdict::undecided;
    run.note = slow;
    remember_shape(st.run->shared.hung, c.spec.problem_shape());
    return {T::Success, slow};
  }
  run.verdict = o.verdict;
  if (o.verdict == Verdict::error) {
    run.note = o.detail;
    if (st.counts.first_error.empty()) st.counts.first_error = "declared shape " + run.shape + ": " + o.detail;
    return {T::Success, o.detail};
  }
  count_corners(st, c, /*was_decided=*/o.verdict != Verdict::undecided);
  run.ratio = o.verdict == Verdict::pass ? exact_if_at_least(o, -std::numeric_limits<double>::infinity()).worst_ratio
                                         : o.worst_ratio;
  if (o.verdict == Verdict::fail) {
    begin_shrink(st, c, o, timed_out, st.counts.cases);
    return {T::Failure, o.detail};
  }
  if (o.verdict == Verdict::undecided) run.note = o.detail;
  return {T::Success, o.detail};
}

std::optional<rc::detail::Reproduce> declared(RunState &st, const CaseOptions &co, std::uint64_t seed,
                                              const rc::detail::Reproduce *replay) {
  const std::vector<DeclaredShape> &shapes = st.run->opt.shapes;
  const Env &env = st.run->env;
  if (replay) {
    if (replay->size < 0 || static_cast<std::size_t>(replay->size) >= shapes.size())
      throw std::invalid_argument(fmt::format("check: the reproduce string names declared shape {}, and the check "
                                              "declares {}: give it the same shapes",
                                              replay->size + 1, shapes.size()));
    // The shape's case again, without judging it, then the recorded path and its end.
    const DeclaredShape &d = shapes[static_cast<std::size_t>(replay->size)];
    std::string why;
    const std::optional<Case> c =
        not_taken(*st.def, co, env, d) ? std::nullopt : draw_declared(d, co, shape_random(seed, replay->size), why);
    if (!c) throw std::invalid_argument("check: the reproduce string names declared shape " + d.describe() +
                                        ", which this property does not take");
    st.phase = Phase::reproduce;
    judge_case(st, follow_path(*c, co, replay->shrinkPath));
    return *replay;
  }
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    ShapeRun run;
    run.shape = shapes[i].describe();
    std::string why;
    std::optional<Case> c;
    if (must_stop(st)) {
      run.verdict = Verdict::undecided;
      run.note = "not run: the time budget was spent or the check interrupted";
    } else if (std::optional<std::string> no = not_taken(*st.def, co, env, shapes[i])) {
      run.note = std::move(*no);
    } else if (c = draw_declared(shapes[i], co, shape_random(seed, i), why); !c) {
      run.note = std::move(why);
    }
    if (c) run.spec = c->spec.describe();
    st.shapes.push_back(std::move(run));
    if (!c) continue;
    st.phase = Phase::declared;
    judge_case(st, *c);
    report_progress(st);
    if (ShapeRun &r = st.shapes.back(); r.verdict == Verdict::unsupported && r.note.empty()) {
      r.verdict = Verdict::undecided;  // the call was cut short (cut_short)
      r.note = "not run: the check was interrupted, or the kernel became unavailable";
    }
    if (st.failure.found) {
      rc::detail::Reproduce found;
      found.size = static_cast<int>(i);
      found.shrinkPath = shrink_walk(st, co);
      return found;
    }
  }
  st.phase = Phase::search;
  return std::nullopt;
}

}  // namespace engine
}  // namespace attncheck
