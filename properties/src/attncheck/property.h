// Properties: what any attention kernel (reached through the ABI) must satisfy, one per file, each a PropertyDef
// in the registry. The engine (check.h) generates cases for a property, runs it, and shrinks its failures.
//
// HOW TO ADD A PROPERTY (one new file plus one registry line):
//   1. Create properties/src/props/<id>.cpp (the CMake build picks up every file there):
//
//        #include "attncheck/property.h"
//        namespace attncheck::props {
//        namespace {
//        Outcome run(const Env &env, const Case &c) {
//          const Problem p = c.problem();                      // NaN in every input padding element
//          ForwardRun fr = run_forward(env, p);                // NaN-filled outputs, padding checked by L.intact
//          Ladder L;                                           // shape → finite → mask → sums → values
//          if (!L.call(fr.call, "forward") || !L.intact(fr.out, "O") || !L.intact(fr.lse, "LSE")) return L.outcome();
//          const ExactForward exact = reference_forward(p);   // or the exact values the math fixes
//          const ForwardBounds bound = forward_bounds(p, exact, env.precision);
//          L.finite("O", fr.out, exact.out, bound.out);        // each check is a no-op after a failure
//          L.masked("O", fr.out, exact.out, bound.out);
//          L.within(Step::values, "O", fr.out, exact.out, bound.out);
//          return L.outcome();
//        }
//        }  // namespace
//        const PropertyDef &my_id_property() {
//          static const PropertyDef def{
//              .id = "my_id",                                  // stable; the file is props/my_id.cpp
//              .formula = "O(q, k + c) = O(q, k)  …",          // one line of math
//              .summary = "…",                                 // one sentence
//              .run = &run,
//          };
//          return def;
//        }
//        }  // namespace attncheck::props
//
//   2. Add one line `ATTNCHECK_PROPERTY(my_id)` to properties/src/props/registry.def, at the place the property
//      should appear in reports.
//
//   3. Test it in tests/properties/<id>_test.cpp: a correct variant kernel passes (support::correct_variants()) and
//      a planted bug fails within the default case budget with a small shrunk counterexample (see causal_test.cpp).
//      A CTest check fails while a registered id has no such file.
//
// A property gets a generated Case and returns an Outcome; it must be deterministic (same case ⇒ same outcome) and
// must not keep state between calls. Use `require` to narrow the cases it receives (fixed mask, dout, Dv = Lk …);
// set needs_backward when it calls the kernel's backward (the property is then unsupported for kernels without
// one). Bounds come from the error model (error_model.h) under env.precision; floats in details are printed with
// hex_and_decimal (compare.h).
#pragma once

#include "attncheck/case.h"
#include "attncheck/error_model.h"
#include "attncheck/kernel_abi.h"
#include "attncheck/kernel_call.h"
#include "attncheck/ladder.h"
#include "attncheck/problem.h"
#include "attncheck/results.h"
#include "attncheck/tensor.h"

#include <functional>
#include <memory>
#include <span>
#include <utility>
#include <string_view>
#include <vector>

namespace attncheck {

/// What a property runs against: the kernel, the contract it declares, and the precision profile that contract
/// gives for the run's storage dtype (contract.precision(dtype)).
struct Env {
  const attncheck_kernel &kernel;
  PrecisionProfile precision;
  KernelContract contract;
};

/// How the declared contract makes a property count: Tier (results.h).

/// Output padding elements around every kernel output (checked untouched by Ladder::intact).
inline constexpr std::int64_t kOutputPad = 3;

/// A forward call: out (in the problem's layout) and lse, both NaN-filled (padding included) before the call.
struct ForwardRun {
  CallResult call;
  Tensor out, lse;
  /// The kernel was given lse (its contract says lse=f32 or lse=storage); false for lse=none: lse stays all NaN
  /// and no check may read it.
  bool has_lse = true;
  /// With dropout: the mask the kernel wrote, [B, Hq, Lq, Lk] (kDropoutUnwritten where it wrote nothing).
  std::vector<std::uint8_t> dropout_keep;
};
/// kernel.forward on `p`; the outputs are NaN before the call so that unwritten elements show. lse is float32, in
/// the storage dtype, or not passed, as env.contract.lse says.
ForwardRun run_forward(const Env &env, const Problem &p);

/// A backward call: dq, dk, dv in the layouts of q, k, v, NaN-filled (padding included) before the call.
struct BackwardRun {
  CallResult call;
  Tensor dq, dk, dv;
};
/// kernel.backward on `p` (p.dout required) given the forward's own out and lse.
BackwardRun run_backward(const Env &env, const Problem &p, const ForwardRun &fwd);

/// A problem and the kernel's forward on it, with its exact values and bounds once computed: one side of a
/// metamorphic relation (a shifted or permuted problem against the original).
struct ForwardSide {
  explicit ForwardSide(Problem problem) : p(std::move(problem)) {}
  Problem p;
  ForwardRun fr;
  ExactForward exact;
  ForwardBounds bound;
};

/// Step values, kernel against kernel: b's O against `a_got`, the other side's O mapped into b's frame (shifted,
/// permuted), within a_bound + β_O(b) + extra element-wise — the triangle inequality through the exact values, so
/// a correct kernel on both problems stays within it. `a_exact`, `a_bound` are a's exact O and bound in the same
/// frame; `extra` (empty = 0) covers an exact difference between the two problems' results. An element where either
/// side may legitimately overflow (SPEC.md §4.5) is undecided.
bool within_each_other(Ladder &L, std::string_view name, const std::vector<double> &a_got,
                       const std::vector<double> &a_exact, const std::vector<double> &a_bound, const ForwardSide &b,
                       const std::vector<double> &extra = {});

/// Contract semantics in one place (SPEC.md §3.1): what a declaration takes out of a comparison. Under
/// empty-rows=unspecified the rows of `p` that see no key (row_sees_no_key; a varlen sequence's rows past its length
/// are the call layer's, not these) are the kernel's to fill, so that no check judges them: their O and LSE in `r`
/// become the exact values (0; −∞, or the sink). Every property that compares a forward against exact values, or two
/// forwards with each other, passes its runs through here. True when there was such a row: the problem's backward,
/// whose dK and dV those rows feed, is then not judged either.
bool leave_unspecified_rows(const KernelContract &c, const Problem &p, const ExactForward &exact, ForwardRun &r);
/// Some row of `p` sees no key (a varlen sequence's rows past its length aside): the rows leave_unspecified_rows
/// leaves to the kernel under empty-rows=unspecified.
bool any_row_sees_no_key(const Problem &p);

/// What a judge of outputs saw: each output tensor it compared, with its exact values and bounds as the ladder read
/// them (the judge of given tensors, given.h, counts the elements beyond their bounds). May be empty.
using SeenTensor = std::function<void(std::string_view tensor, const Tensor &got, const std::vector<double> &exact,
                                      const std::vector<double> &bound)>;

/// The accuracy ladder's comparisons on a forward's results `fr` of `p` (its call returned intact outputs): O and
/// LSE against the reference within the error model's bounds under `precision` (finite → mask → sums (LSE) →
/// values (O)), the rows `contract` leaves to the kernel (leave_unspecified_rows) unjudged; through the screen.
Outcome forward_ladder(const PrecisionProfile &precision, const KernelContract &contract, const Problem &p,
                       std::shared_ptr<const ForwardRun> fr, SeenTensor seen = {});
/// gradient_accuracy's comparisons on a backward's results `br` of `p` given the forward's `fr` (both calls returned
/// intact outputs): the forward's O and LSE (finite and values), then dQ, dK, dV within their bounds (SPEC.md §4.4).
Outcome backward_ladder(const PrecisionProfile &precision, const Problem &p, std::shared_ptr<const ForwardRun> fr,
                        std::shared_ptr<const BackwardRun> br, SeenTensor seen = {});

/// The accuracy ladder of one problem: the kernel's forward against the reference, O and LSE within the error
/// model's bounds under env.precision (shape → finite → mask → sums (LSE) → values (O)); the rows the contract leaves
/// to the kernel (leave_unspecified_rows) unjudged.
Outcome forward_accuracy(const Env &env, const Problem &p);
/// The same ladder with exact values and bounds from `exact_and_bounds` (called once the call returned intact
/// outputs): for problems whose answer is not reference_forward's (a stretched one, stretch.h).
Outcome forward_accuracy(const Env &env, const Problem &p,
                         const std::function<std::pair<ExactForward, ForwardBounds>()> &exact_and_bounds);

/// One property: a stable id, its formula, and the check of one case.
struct PropertyDef {
  std::string_view id;       ///< stable, lowercase, named after the math; the file is props/<id>.cpp
  std::string_view formula;  ///< one line
  std::string_view summary;  ///< one sentence: what a failure means
  bool needs_backward = false;               ///< calls the backward: unsupported for kernels without one
  void (*require)(CaseOptions &) = nullptr;  ///< narrows the generated cases (called after the engine's defaults)
  Tier (*tier)(const KernelContract &) = nullptr;  ///< nullptr: always required
  /// The ABI 1.2 feature the property checks (ATTNCHECK_FEATURE_*), 0 for none: off (declined) unless the kernel's
  /// contract declares it.
  std::uint32_t feature = 0;
  /// Corners (coverage.h) every case reaches by construction, beyond its own: the problems the property derives
  /// from each case (empty_sequences calls the kernel with Lq = 0 and with Lk = 0).
  std::span<const std::string_view> reaches{};
  /// After the search, the targeted phase (check.h) mutates this property's worst cases toward error ÷ bound 1:
  /// set where the verdict is a per-element bound that holds on any input the generators draw — never for a
  /// statistical test (more cases would raise its false alarms) nor one that needs a fixed value family.
  bool targeted = false;
  /// Judges its comparisons through the screen (screen.h: judged(), judged_runs()): report.json counts the elements
  /// the fast reference decided and those sent to MPFR.
  bool screened = false;
  Outcome (*run)(const Env &env, const Case &c) = nullptr;
};

/// Runs property `def` on one case: check.h's evaluate, for the engine and the properties' tests.
Outcome evaluate(const PropertyDef &def, const Env &env, const Case &c);

/// The property's tier under `contract`.
Tier tier_of(const PropertyDef &def, const KernelContract &contract);
/// Its tier on a run of storage dtype `dtype`: off too when the contract does not declare that dtype (dtypes=).
Tier tier_of(const PropertyDef &def, const KernelContract &contract, Dtype dtype);

/// Every registered property, in registry order (properties/src/props/registry.def).
std::span<const PropertyDef *const> all_properties();
/// The property with this id, or nullptr.
const PropertyDef *find_property(std::string_view id);

}  // namespace attncheck
