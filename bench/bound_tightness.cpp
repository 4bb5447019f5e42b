// attncheck_bound_dump: the error model's bounds on a fixed set of problems, written to a file, so that two builds'
// bounds can be compared element by element (bench/bound_tightness.py prints the distribution of new/old).
//
// The problems: kProblems random ones from the error-model suite's generator (tests/support/random_problems.h) in
// float32, float16 and bfloat16, every third with softcap, every fifth with a sliding window, every seventh under
// TF32 operands, every other 16-bit one with the row sum from the rounded P; bounds from the MPFR reference's exact
// values (BoundsFrom::exact), so that both builds bound the same numbers. Deterministic for the build.
//
// Usage: attncheck_bound_dump OUT.bin     (doubles, native endian: O, LSE, dQ, dK, dV bounds of each problem in turn)
#include "attncheck/error_model.h"
#include "attncheck/reference.h"
#include "random_problems.h"

#include <cstdio>
#include <random>
#include <vector>

int main(int argc, char **argv) {
  using namespace attncheck;
  if (argc != 2) {
    std::fprintf(stderr, "usage: attncheck_bound_dump OUT.bin\n");
    return 2;
  }
  constexpr int kProblems = 90;
  constexpr std::uint64_t kSeed = 0x7167'6874;  // "tight"
  std::FILE *out = std::fopen(argv[1], "wb");
  if (!out) {
    std::fprintf(stderr, "attncheck_bound_dump: cannot write %s\n", argv[1]);
    return 2;
  }
  std::mt19937_64 rng(kSeed);
  std::size_t total = 0;
  for (int n = 0; n < kProblems; ++n) {
    const Dtype dt = n % 3 == 0 ? Dtype::f32 : n % 3 == 1 ? Dtype::f16 : Dtype::bf16;
    RandomProblemOptions opt;
    opt.max_work = 400'000;
    Problem p = random_problem(rng, dt, opt);
    if (n % 3 == 2) p.features.softcap = 20;
    if (n % 5 == 4) p.features.window_left = 5, p.features.window_right = 2;
    PrecisionProfile prof = PrecisionProfile::for_storage(dt);
    if (n % 7 == 6) prof.fp32_precision = Fp32Precision::tf32;
    if (dt != Dtype::f32 && n % 2 == 0) prof.rowsum_rounded_p = true;
    const ExactForward exact = reference_forward(p);
    const ForwardBounds fb = forward_bounds(p, exact, prof);
    const BackwardBounds bb = backward_bounds(p, exact, prof);
    for (const std::vector<double> *v : {&fb.out, &fb.lse, &bb.dq, &bb.dk, &bb.dv}) {
      std::fwrite(v->data(), sizeof(double), v->size(), out);
      total += v->size();
    }
  }
  std::fclose(out);
  std::printf("bounds=%zu problems=%d\n", total, kProblems);
  return 0;
}
