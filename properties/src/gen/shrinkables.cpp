// Shrinkables: values with their (lazy) rc::Shrinkable trees, built from the pure shrinkers of shrink.h.
#include "attncheck/gen.h"
#include "attncheck/shrink.h"

#include <rapidcheck/Seq.h>
#include <rapidcheck/seq/Create.h>
#include <rapidcheck/seq/Transform.h>
#include <rapidcheck/seq/Operations.h>
#include <rapidcheck/shrink/Shrink.h>
#include <rapidcheck/shrinkable/Create.h>

#include <algorithm>

namespace attncheck {

rc::Shrinkable<CaseSpec> shrinkable_spec(CaseSpec s, const CaseOptions &opts) {
  return rc::shrinkable::shrinkRecur(std::move(s), [opts](const CaseSpec &x) {
    std::vector<CaseSpec> cands = shrink::spec_shrinks(x, opts);
    std::erase_if(cands, [&](const CaseSpec &c) { return !opts.admits(c); });
    if (opts.shape_pool)  // shapes a JIT kernel has compiled first
      std::stable_partition(cands.begin(), cands.end(), [&](const CaseSpec &c) {
        return std::find(opts.shape_pool->begin(), opts.shape_pool->end(), c.shape) != opts.shape_pool->end();
      });
    return rc::seq::fromContainer(std::move(cands));
  });
}

rc::Shrinkable<double> shrinkable_value(double x, Dtype dt) {
  return rc::shrinkable::shrinkRecur(x, [dt](double y) { return rc::seq::fromContainer(shrink::value_shrinks(y, dt)); });
}

rc::Shrinkable<std::vector<double>> shrinkable_values(std::vector<double> values, Dtype dt) {
  return rc::shrinkable::shrinkRecur(std::move(values), [dt](const std::vector<double> &v) {
    // Whole-vector steps first (few candidates, big simplifications), then one element at a time (lazily: a
    // long vector has many candidates and the first failing one ends the scan).
    return rc::seq::concat(
        rc::seq::fromContainer(shrink::all_values_shrinks(v, dt)),
        rc::shrink::eachElement(v, [dt](double x) { return rc::seq::fromContainer(shrink::value_shrinks(x, dt)); }));
  });
}

rc::Shrinkable<Case> shrinkable_case(Case c, const CaseOptions &opts) {
  if (is_huge(c.spec)) return rc::shrinkable::just(std::move(c));  // gen.h: at its threshold already
  return rc::shrinkable::shrinkRecur(std::move(c), [opts](const Case &x) {
    const Dtype dt = x.spec.dtype;
    // An expanded input keeps one slice's values: a candidate changing another slice is restored by
    // broadcast_values, and such no-ops are left out (accepted, they would repeat forever).
    auto with_values = [x](std::vector<double> values) {
      Case y = x;
      y.set_flat(values);
      y.broadcast_values();
      return y;
    };
    auto changed = [x](const Case &y) { return !y.same_as(x); };
    const std::vector<double> flat = x.flat();
    return rc::seq::concat(
        rc::seq::filter(rc::seq::map(rc::seq::fromContainer(shrink::slices(x, opts)),
                                     [x](const shrink::Slice &s) { return shrink::apply(x, s); }),
                        [opts](const Case &y) { return opts.admits(y.spec); }),
        rc::seq::fromContainer(shrink::relabel_shrinks(x, opts)),
        rc::seq::filter(rc::seq::map(rc::seq::fromContainer(shrink::all_values_shrinks(flat, dt)), with_values),
                        changed),
        rc::seq::filter(rc::seq::map(rc::shrink::eachElement(flat, [dt](double v) {
                                       return rc::seq::fromContainer(shrink::value_shrinks(v, dt));
                                     }),
                                     with_values),
                        changed));
  });
}

}  // namespace attncheck
