// Section 4: where exp overflows, and what a naive softmax and the kernels return past that point.
//
// The test row has kKeys logits z_j = σ·M − j (σ = ±1), built exactly as q = [1, 1], k_j = [σM, −j], scale 1,
// with v_j = j + 1 (Dv = 1). Its exact softmax is softmax(−j) whatever M, so the exact output O is fixed; a
// softmax that subtracts the row max never sees an exp argument above 0, a naive one evaluates exp(σM − j).
#include "sections.h"
#include "study_internal.h"

#include "attncheck/kernel_call.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace attncheck::study {
namespace {

constexpr int kKeys = 4;
constexpr int kQkDim = 2;             ///< q = [1, 1], k_j = [σM, −j]
constexpr int kMinPow2 = 2, kMaxPow2 = 12;  ///< M = 2^2 … 2^12, plus the thresholds' neighbours
constexpr Dtype kDtypes[] = {Dtype::f32, Dtype::f16, Dtype::bf16};

/// exp computed in float and rounded to the dtype: how a naive kernel in that dtype evaluates it.
double exp_in(Dtype dt, double x) { return round_to(dt, static_cast<double>(std::exp(static_cast<float>(x)))); }

OverflowThreshold threshold(Dtype dt) {
  OverflowThreshold t;
  t.dtype = dt;
  t.max_finite = max_finite(dt);
  t.ln_max = std::log(t.max_finite);
  t.ln_min_subnormal = std::log(min_subnormal(dt));
  // Walk float by float from ln(max) to the last argument whose exp is finite in the dtype.
  float x = static_cast<float>(t.ln_max);
  while (std::isfinite(exp_in(dt, x))) x = std::nextafter(x, std::numeric_limits<float>::infinity());
  while (!std::isfinite(exp_in(dt, x))) x = std::nextafter(x, -std::numeric_limits<float>::infinity());
  t.largest_finite_arg = x;
  return t;
}

double exact_output() {
  double sum = 0, o = 0;
  for (int j = 0; j < kKeys; ++j) sum += std::exp(-j);
  for (int j = 0; j < kKeys; ++j) o += std::exp(-j) / sum * (j + 1);
  return o;
}

/// Naive softmax (no max subtraction) and P·V with every operation rounded to the dtype.
double naive_in(Dtype dt, double shift) {
  double e[kKeys], sum = 0;
  for (int j = 0; j < kKeys; ++j) {
    e[j] = exp_in(dt, round_to(dt, shift - j));
    sum = round_to(dt, sum + e[j]);
  }
  double o = 0;
  for (int j = 0; j < kKeys; ++j) o = round_to(dt, o + round_to(dt, round_to(dt, e[j] / sum) * (j + 1)));
  return o;
}

OverflowResult classify(double got, double exact, double tolerance) {
  OverflowResult r;
  r.value = got;
  if (std::isnan(got)) {
    r.outcome = Outcome::nan;
  } else if (std::isinf(got)) {
    r.outcome = Outcome::inf;
  } else {
    r.ratio = std::abs(got - exact) / tolerance;
    r.outcome = r.ratio <= 1 ? Outcome::correct : Outcome::inaccurate;
  }
  if (std::isnan(got) || std::isinf(got)) r.ratio = std::numeric_limits<double>::infinity();
  return r;
}

Problem make_problem(Dtype dt, double shift) {
  Problem p;
  p.shape = Shape{1, 1, 1, 1, kKeys, kQkDim, 1};
  p.params.scale = 1;
  p.params.mask = Mask::none;
  p.q = Tensor::contiguous(dt, {1, 1, 1, kQkDim});
  p.k = Tensor::contiguous(dt, {1, 1, kKeys, kQkDim});
  p.v = Tensor::contiguous(dt, {1, 1, kKeys, 1});
  for (int c = 0; c < kQkDim; ++c) p.q.set({0, 0, 0, c}, 1);
  for (int j = 0; j < kKeys; ++j) {
    p.k.set({0, 0, j, 0}, shift);
    p.k.set({0, 0, j, 1}, -j);
    p.v.set({0, 0, j, 0}, j + 1);
  }
  return p;
}

}  // namespace

OverflowSection run_overflow(const std::vector<const attncheck_kernel *> &kernels) {
  OverflowSection sec;
  sec.keys = kKeys;
  sec.exact_out = exact_output();
  for (Dtype dt : kDtypes) sec.thresholds.push_back(threshold(dt));
  for (const auto *k : kernels) sec.kernel_names.emplace_back(k->name);

  std::set<double> magnitudes;
  for (int e = kMinPow2; e <= kMaxPow2; ++e) magnitudes.insert(std::ldexp(1.0, e));
  for (const auto &t : sec.thresholds)
    for (double edge : {t.ln_max, -t.ln_min_subnormal}) {
      magnitudes.insert(std::floor(edge));
      magnitudes.insert(std::ceil(edge));
    }
  std::vector<double> shifts;
  for (double m : magnitudes) shifts.push_back(m);
  for (double m : magnitudes) shifts.push_back(-m);

  for (double shift : shifts) {
    for (Dtype dt : kDtypes) {
      OverflowRow row;
      row.shift = shift;
      row.dtype = dt;
      row.representable = round_to(dt, shift) == shift;
      if (!row.representable) {
        sec.rows.push_back(row);
        continue;
      }
      row.naive = classify(naive_in(dt, shift), sec.exact_out, naive_tolerance(dt, kKeys, sec.exact_out));
      const Problem p = make_problem(dt, shift);
      for (const auto *k : kernels) {
        Tensor out = make_out(p.shape, dt), lse = make_lse(p.shape);
        const CallResult cr = call_forward(*k, p, out, &lse);
        OverflowResult res;
        if (cr.status == ATTNCHECK_UNSUPPORTED) {
          res.outcome = Outcome::unsupported;
        } else if (!cr.ok()) {
          res.outcome = Outcome::failed;
        } else {
          res = classify(out.get({0, 0, 0, 0}), sec.exact_out, kernel_tolerance(p, 0));
        }
        row.kernels.push_back(res);
      }
      sec.rows.push_back(row);
    }
  }
  return sec;
}

}  // namespace attncheck::study
