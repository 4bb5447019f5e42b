// Generators: a draw plus its shrinkable, as rc::Gen. gen_case binds the spec to its values with gen::mapcat:
// a failing case shrinks its spec first (values redrawn from the same Random for every smaller spec), then as a
// case (slices keeping the failing values, then the values).
#include "attncheck/gen.h"

#include <rapidcheck/gen/Transform.h>
#include <rapidcheck/shrinkable/Transform.h>

namespace attncheck {

rc::Gen<CaseSpec> gen_spec(const CaseOptions &opts) {
  return rc::Gen<CaseSpec>([opts](const rc::Random &random, int size) {
    return shrinkable_spec(draw_spec(random, size, opts), opts);
  });
}

rc::Gen<Case> gen_values(const CaseSpec &spec, const CaseOptions &opts) {
  return rc::Gen<Case>([spec, opts](const rc::Random &random, int) {
    return shrinkable_case(draw_case(random, spec, opts), opts);
  });
}

rc::Gen<Case> gen_case(const CaseOptions &opts) {
  return rc::gen::mapcat(gen_spec(opts), [opts](const CaseSpec &spec) { return gen_values(spec, opts); });
}

rc::Gen<double> gen_value(Family family, Dtype dt) {
  return rc::Gen<double>([family, dt](const rc::Random &random, int) {
    rc::Random r = random;
    return shrinkable_value(draw_value(r, family, dt), dt);
  });
}

}  // namespace attncheck
