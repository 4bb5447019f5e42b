// Shared by shift_invariance and permutation_equivariance: the case and two modified copies of it, each run once by
// the kernel, then judged together through the screen (screen.h); a failure records the copy its check judged.
#pragma once

#include "attncheck/property.h"
#include "attncheck/screen.h"

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>

namespace attncheck::props {

/// The case and two copies, what was changed in each, and the kernel's answers: sides[0] is the case's problem,
/// sides[1] and sides[2] the copies'.
struct CaseCopies {
  std::array<Case, 2> copies;
  std::array<std::string, 2> what;  ///< the change, as a failure names it ("k + 1 on every key")
  std::array<ForwardSide, 3> sides;
  /// The Ladder's judging for side n: the case itself (0) or copy n − 1.
  void judge(Ladder &L, std::size_t n) const {
    if (n == 0) L.judging_original();
    else L.judging(copies[n - 1], what[n - 1]);
  }
};

/// The forward on the case and on both copies (`names`: O's name on each side, for the shape step); once all three
/// returned intact outputs, `compare(const CaseCopies &, ExactSource &)` judges them.
template <class Compare>
Outcome run_copies(const Env &env, const Case &c, std::array<Case, 2> copies, std::array<std::string, 2> what,
                   const std::array<const char *, 3> &names, Compare compare) {
  Problem first = copies[0].problem(), second = copies[1].problem();
  auto cc = std::make_shared<CaseCopies>(
      CaseCopies{std::move(copies), std::move(what),
                 {ForwardSide(c.problem()), ForwardSide(std::move(first)), ForwardSide(std::move(second))}});
  Ladder L;
  for (std::size_t n = 0; n < cc->sides.size(); ++n) {
    cc->judge(L, n);
    ForwardSide &side = cc->sides[n];
    side.fr = run_forward(env, side.p);
    if (!L.call(side.fr.call, "forward") || !L.intact(side.fr.out, names[n])) return L.outcome();
  }
  std::shared_ptr<const CaseCopies> runs = std::move(cc);
  return judged(env.precision, [runs, compare](ExactSource &src) { return compare(*runs, src); });
}

}  // namespace attncheck::props
