// run_study: picks the sample sizes and runs the sections.
#include "attncheck/study.h"

#include "sections.h"
#include "stats.h"

#include <cmath>

namespace attncheck::study {
namespace {

/// d_k = 2^3 … 2^9 (8 … 512).
constexpr int kMinLogDk = 3, kMaxLogDk = 9;

Plan make_plan(bool quick) {
  Plan p;
  for (int e = kMinLogDk; e <= kMaxLogDk; ++e) p.dks.push_back(1 << e);
  p.lengths = {10, 128, 1024};  // 10: the L that ln 10 ≈ 2.3 presumes; 128, 1024: realistic contexts
  p.gradient_L = 16;
  if (quick) {
    p.variance_samples = 20000;
    p.saturation_rows = 48;
    p.gradient_problems = 24;
    p.gradient_crosscheck_points = 2;
    p.accuracy_lengths = {16, 64};
    p.accuracy_dims = {16, 64};
  } else {
    p.variance_samples = 500000;
    p.saturation_rows = 1000;
    p.gradient_problems = 400;
    p.gradient_crosscheck_points = 6;
    p.accuracy_lengths = {16, 64, 256};
    p.accuracy_dims = {16, 64, 128};
  }
  return p;
}

}  // namespace

std::string_view scaling_name(Scaling s) {
  switch (s) {
    case Scaling::none: return "unscaled";
    case Scaling::inv_sqrt: return "1/√d_k";
    case Scaling::inv_linear: return "1/d_k";
  }
  return "?";
}

double scale_factor(Scaling s, int dk) {
  switch (s) {
    case Scaling::none: return 1;
    case Scaling::inv_sqrt: return 1 / std::sqrt(static_cast<double>(dk));
    case Scaling::inv_linear: return 1 / static_cast<double>(dk);
  }
  return 1;
}

std::string_view outcome_name(Outcome o) {
  switch (o) {
    case Outcome::correct: return "correct";
    case Outcome::inaccurate: return "inaccurate";
    case Outcome::inf: return "Inf";
    case Outcome::nan: return "NaN";
    case Outcome::unsupported: return "unsupported";
    case Outcome::failed: return "failed";
  }
  return "?";
}

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::right: return "right";
    case Verdict::wrong: return "wrong";
    case Verdict::misleading: return "misleading";
    case Verdict::not_measurable: return "not measurable";
  }
  return "?";
}

StudyResult run_study(const Options &options) {
  const Plan plan = make_plan(options.quick);
  StudyResult r;
  r.seed = options.seed;
  r.quick = options.quick;
  r.confidence = kConfidence;
  r.z = normal_quantile_two_sided(kConfidence);
  r.dks = plan.dks;
  std::vector<const attncheck_kernel *> kernels = options.kernels;
  if (kernels.empty() && options.use_bundled_kernels) kernels = bundled_kernels();
  kernels = flash_kernels(kernels);

  r.variance = run_variance(plan, options.seed, r.z);
  r.saturation = run_saturation(plan, options.seed, r.z);
  r.gradient = run_gradient(plan, options.seed, r.z);
  r.overflow = run_overflow(kernels);
  r.accuracy = run_accuracy(plan, options.seed, kernels);
  r.claims = check_claims(r);
  return r;
}

}  // namespace attncheck::study
