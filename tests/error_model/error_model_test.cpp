// The error model is sound (correct kernels of every summation order never exceed it) and tight (a precision
// shortcut does).
#include "attncheck/compare.h"
#include "attncheck/error_model.h"
#include "attncheck/kernel_call.h"
#include "random_problems.h"
#include "attncheck/reference.h"
#include "variant_kernels.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <utility>

using namespace attncheck;
using support::Bug;
using support::Variant;

namespace {

/// Small problems keep the MPFR reference fast enough for thousands of cases.
constexpr std::int64_t kSmallWork = 6000;
constexpr std::uint64_t kSeed = 20261129;

struct Check {
  Worst fwd, bwd;                 ///< the worst of O and LSE; of dQ, dK and dV
  Worst out, lse, dq, dk, dv;     ///< each output's worst
};

/// Worst ratio per output of each variant.
struct Worsts {
  double all = 0, out = 0, lse = 0, dq = 0, dk = 0, dv = 0;
  void merge(const Check &c) {
    all = std::max({all, c.fwd.ratio, c.bwd.ratio});
    out = std::max(out, c.out.ratio);
    lse = std::max(lse, c.lse.ratio);
    dq = std::max(dq, c.dq.ratio);
    dk = std::max(dk, c.dk.ratio);
    dv = std::max(dv, c.dv.ratio);
  }
};

/// The profile of the contract under which `v` is correct (the default one, with its accumulation dtypes, for the
/// correct variants).
PrecisionProfile profile_of(Dtype storage, const Variant &v) { return support::contract_of(v).precision(storage); }

/// Runs one kernel on one problem and compares forward and backward with the bounds of `prof` (LSE returned in
/// prof.lse). `empty_rows_unspecified`: rows that see no key are not checked in forward (their dout must be 0).
Check run(const attncheck_kernel &k, const Problem &p, const ExactForward &ef, const ExactBackward &eb,
          const PrecisionProfile &prof, bool empty_rows_unspecified = false) {
  Check c;
  Tensor out = make_out(p.shape, p.dtype()), lse = Tensor::contiguous(prof.lse, {p.shape.B, p.shape.Hq, p.shape.Lq});
  REQUIRE(call_forward(k, p, out, &lse).ok());
  ForwardBounds fb = forward_bounds(p, ef, prof);
  if (empty_rows_unspecified) {
    const double inf = std::numeric_limits<double>::infinity();
    for (std::size_t r = 0; r < ef.lse.size(); ++r)
      if (std::isinf(ef.lse[r])) {
        fb.lse[r] = inf;
        for (std::int64_t col = 0; col < p.shape.Dv; ++col)
          fb.out[r * static_cast<std::size_t>(p.shape.Dv) + static_cast<std::size_t>(col)] = inf;
      }
  }
  c.fwd = c.out = compare(out, ef.out, fb.out);
  c.lse = compare(lse, ef.lse, fb.lse);
  c.fwd.merge(c.lse);
  Tensor dq = Tensor::contiguous(p.dtype(), p.q.shape()), dk = Tensor::contiguous(p.dtype(), p.k.shape()),
         dv = Tensor::contiguous(p.dtype(), p.v.shape());
  REQUIRE(call_backward(k, p, out, &lse, dq, dk, dv).ok());
  const BackwardBounds bb = backward_bounds(p, ef, prof);
  c.bwd = c.dq = compare(dq, eb.dq, bb.dq);
  c.dk = compare(dk, eb.dk, bb.dk);
  c.dv = compare(dv, eb.dv, bb.dv);
  c.bwd.merge(c.dk);
  c.bwd.merge(c.dv);
  return c;
}

/// Every correct variant within its profile's bound on `p`; returns the worst ratio seen.
double check_sound(const Problem &p, std::map<std::string, double> &worst_by_variant) {
  const ExactForward ef = reference_forward(p);
  const ExactBackward eb = reference_backward(p);
  double worst = 0;
  for (const Variant &v : support::correct_variants()) {
    const Check c = run(support::variant_kernel(v), p, ef, eb, profile_of(p.dtype(), v));
    INFO(v.name() << " on " << p.shape.describe() << " " << mask_name(p.params.mask) << " " << p.q.describe());
    INFO("forward: " << c.fwd.describe());
    INFO("backward: " << c.bwd.describe());
    REQUIRE(c.fwd.ratio <= 1);
    REQUIRE(c.bwd.ratio <= 1);
    double &w = worst_by_variant[v.name()];
    w = std::max({w, c.fwd.ratio, c.bwd.ratio});
    worst = std::max({worst, c.fwd.ratio, c.bwd.ratio});
  }
  return worst;
}

void report(const char *title, const std::map<std::string, double> &worst_by_variant) {
  std::cout << title << " — worst error ÷ bound per variant:\n";
  for (const auto &[name, w] : worst_by_variant) std::cout << "  " << name << ": " << w << '\n';
}

/// Zeroes dout on the rows that see no key: their exact gradient is zero whatever dout is, and a kernel whose
/// empty rows are unspecified (empty-rows=unspecified) then has nothing to propagate from them.
void zero_dout_of_empty_rows(Problem &p) {
  const Shape &s = p.shape;
  for (std::int64_t i = 0; i < s.Lq; ++i) {
    if (visible_count(p.params.mask, i, s.Lq, s.Lk) > 0) continue;
    for (std::int64_t b = 0; b < s.B; ++b)
      for (std::int64_t h = 0; h < s.Hq; ++h)
        for (std::int64_t c = 0; c < s.Dv; ++c) p.dout->set({b, h, i, c}, 0.0);
  }
}

/// A problem with its exact results.
struct Solved {
  Problem p;
  ExactForward ef;
  ExactBackward eb;
  explicit Solved(Problem problem) : p(std::move(problem)) {
    zero_dout_of_empty_rows(p);
    ef = reference_forward(p);
    eb = reference_backward(p);
  }
};

/// Runs variant `v` on `p` (causal masks in the alignment of its contract) against the bounds of `prof`.
Check run_variant(const Variant &v, const Solved &p, std::optional<Solved> &top_left, const PrecisionProfile &prof) {
  const KernelContract kc = support::contract_of(v);
  const bool unspecified = kc.empty_rows == EmptyRows::unspecified;
  if (kc.causal == CausalAlign::top_left && p.p.params.mask == Mask::causal) {
    if (!top_left) {
      Problem tl = p.p;
      tl.params.mask = Mask::causal_top_left;
      top_left.emplace(std::move(tl));
    }
    return run(support::variant_kernel(v), top_left->p, top_left->ef, top_left->eb, prof, unspecified);
  }
  return run(support::variant_kernel(v), p.p, p.ef, p.eb, prof, unspecified);
}

/// support::contract_variants() and mixes of the contract options with other summation orders: split-KV, per-key,
/// reversed and two-pass row sums of the rounded P; per-head gradients with D from P and without P rounding;
/// bfloat16 logits; dense P·V with mean empty rows and a nondeterministic dQ.
const std::vector<Variant> &contract_mixes() {
  static const std::vector<Variant> all = [] {
    std::vector<Variant> v = support::contract_variants();
    using enum Dtype;
    v.push_back({.key_block = 16, .splits = 5, .exp2_fold = true, .round_p = true, .reciprocal_norm = true,
                 .rowsum_rounded_p = true});
    v.push_back({.reverse_keys = true, .round_p = true, .rowsum_rounded_p = true, .lse_storage = true});
    v.push_back({.key_block = 0, .splits = 2, .round_p = true, .rowsum_rounded_p = true, .grad_per_head = true});
    v.push_back({.key_block = 7, .reverse_keys = true, .round_p = true, .d_from_p = true, .grad_per_head = true});
    v.push_back({.key_block = 64, .grad_per_head = true, .nondeterministic_backward = true});
    v.push_back({.key_block = 3, .exp2_fold = true, .accumulate_qk = bf16, .lse_storage = true});
    v.push_back({.accumulate = f16, .key_block = 16, .round_p = true, .rowsum_rounded_p = true, .grad_per_head = true});
    v.push_back({.key_block = 16, .splits = 3, .round_p = true, .dense_pv = true, .empty_rows_mean = true,
                 .nondeterministic_backward = true});
    return v;
  }();
  return all;
}

/// Every contract variant (and mix) within the bound of its contract's profile on `problem`; records the worst ratio
/// per variant.
void check_contract_sound(Problem problem, std::map<std::string, Worsts> &worst_by_variant) {
  const Solved p(std::move(problem));
  std::optional<Solved> top_left;
  for (const Variant &v : contract_mixes()) {
    const Check c = run_variant(v, p, top_left, profile_of(p.p.dtype(), v));
    INFO(v.name() << " [" << support::contract_of(v).describe_changes() << "] on " << p.p.shape.describe() << " "
                  << mask_name(p.p.params.mask) << " " << p.p.q.describe());
    INFO("forward: " << c.fwd.describe());
    INFO("backward: " << c.bwd.describe());
    REQUIRE(c.fwd.ratio <= 1);
    REQUIRE(c.bwd.ratio <= 1);
    worst_by_variant[v.name()].merge(c);
  }
}

void report(const std::string &title, const std::map<std::string, Worsts> &worst_by_variant) {
  std::cout << title << " — worst error ÷ bound per variant (and per output):\n";
  for (const auto &[name, w] : worst_by_variant)
    std::cout << "  " << name << ": " << w.all << "  (out " << w.out << ", lse " << w.lse << ", dq " << w.dq
              << ", dk " << w.dk << ", dv " << w.dv << ")\n";
}

}  // namespace

TEST_CASE("gamma_n is n·u / (1 − n·u) and infinite past n·u = 1", "[error_model]") {
  REQUIRE(gamma_n(10, 0.01) == Approx(0.1 / 0.9));
  REQUIRE(std::isinf(gamma_n(100, 0.01)));
  REQUIRE(gamma_n(0, 0.5) == 0);
}

TEST_CASE("error ratios follow the checks' conventions", "[error_model]") {
  const double inf = std::numeric_limits<double>::infinity();
  REQUIRE(error_ratio(1.0, 1.0, 0.0) == 0);
  REQUIRE(error_ratio(-inf, -inf, 0.0) == 0);
  REQUIRE(std::isinf(error_ratio(std::nan(""), 1.0, 1e9)));
  REQUIRE(std::isinf(error_ratio(1.5, 1.0, 0.0)));
  REQUIRE(std::isinf(error_ratio(0.0, -inf, 1.0)));
  REQUIRE(error_ratio(1.5, 1.0, 0.25) == 2);
}

TEST_CASE("bounds are zero exactly where the contract fixes the value", "[error_model]") {
  std::mt19937_64 rng(kSeed);
  // Causal with Lq > Lk: the first Lq − Lk rows see no key.
  const Shape s{1, 2, 1, 5, 2, 4, 3};
  const Problem p = make_problem(rng, s, Dtype::f32, Values::normal, Mask::causal);
  const ExactForward ef = reference_forward(p);
  const PrecisionProfile prof = PrecisionProfile::for_storage(Dtype::f32);
  const ForwardBounds fb = forward_bounds(p, ef, prof);
  const BackwardBounds bb = backward_bounds(p, ef, prof);
  for (std::int64_t h = 0; h < s.Hq; ++h)
    for (std::int64_t i = 0; i < s.Lq; ++i) {
      const bool empty = visible_count(Mask::causal, i, s.Lq, s.Lk) == 0;
      INFO("h=" << h << " i=" << i);
      REQUIRE((fb.lse[static_cast<std::size_t>(lse_offset(s, 0, h, i))] == 0) == empty);
      for (std::int64_t c = 0; c < s.Dv; ++c)
        REQUIRE((fb.out[static_cast<std::size_t>(out_offset(s, 0, h, i, c))] == 0) == empty);
      for (std::int64_t d = 0; d < s.D; ++d)
        REQUIRE((bb.dq[static_cast<std::size_t>((h * s.Lq + i) * s.D + d)] == 0) == empty);
    }
}

TEST_CASE("filler keys widen a row's bound with their count and weight and leave it alone at count 0",
          "[error_model]") {
  std::mt19937_64 rng(kSeed);
  const Shape s{1, 2, 1, 3, 4, 5, 3};
  const Problem p = make_problem(rng, s, Dtype::f16, Values::normal, Mask::none);
  const ExactForward ef = reference_forward(p);
  const PrecisionProfile prof = PrecisionProfile::for_storage(Dtype::f16);
  const ForwardBounds plain = forward_bounds(p, ef, prof);
  const std::size_t rows = ef.lse.size();
  CHECK(forward_bounds(p, ef, prof, std::vector<FillerKeys>(rows)).out == plain.out);  // count 0: no filler
  FillerKeys far;  // 65,532 keys, 200 below every LSE: only n grows
  far.count = 65532;
  far.max_logit = *std::min_element(ef.lse.begin(), ef.lse.end()) - 200;
  far.max_abs_logit = far.max_abs_dot = 300;
  far.max_abs_v = 4;
  const ForwardBounds lng = forward_bounds(p, ef, prof, std::vector<FillerKeys>(rows, far));
  std::vector<FillerKeys> heavy(rows, far);  // weighing e^{−2} of each row: a weight the bound must carry
  for (std::size_t x = 0; x < rows; ++x) heavy[x].max_logit = ef.lse[x] - 2 - std::log(far.count);
  const ForwardBounds weighty = forward_bounds(p, ef, prof, heavy);
  for (std::size_t x = 0; x < plain.out.size(); ++x) {
    CHECK(lng.out[x] > plain.out[x]);
    CHECK(weighty.out[x] > lng.out[x] + 0.1);  // δ = e^{−2}: its (max|v| + |O|)·δ/(1 − δ) at least
  }
  for (std::size_t x = 0; x < rows; ++x) {
    CHECK(lng.lse[x] > plain.lse[x]);
    CHECK(weighty.lse[x] > std::exp(-2.0));
  }
}

TEST_CASE("correct kernels of every summation order stay within the bound on thousands of problems",
          "[error_model][soundness]") {
  constexpr int kProblemsPerDtype = 700;
  for (Dtype dt : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    std::mt19937_64 rng(kSeed + static_cast<std::uint64_t>(dt));
    std::map<std::string, double> worst_by_variant;
    RandomProblemOptions opt;
    opt.max_work = kSmallWork;
    for (int c = 0; c < kProblemsPerDtype; ++c) check_sound(random_problem(rng, dt, opt), worst_by_variant);
    report(("random small problems, " + std::string(dtype_name(dt))).c_str(), worst_by_variant);
  }
}

TEST_CASE("correct kernels stay within the bound on long rows and huge logits", "[error_model][soundness]") {
  std::mt19937_64 rng(kSeed + 1);
  std::map<std::string, double> worst_by_variant;
  for (Dtype dt : {Dtype::f32, Dtype::f16, Dtype::bf16})
    for (std::int64_t Lk : {1024, 2049})
      for (Values vals : {Values::normal, Values::large_logits, Values::dominant_key, Values::small_ints})
        for (Mask m : {Mask::none, Mask::causal}) {
          const Shape s{1, 2, 1, 2, Lk, 16, 8};
          check_sound(make_problem(rng, s, dt, vals, m, Layout::bhld), worst_by_variant);
        }
  report("long rows (Lk 1024, 2049) and logits up to 1e4", worst_by_variant);
}

TEST_CASE("accumulating q·k in float16 while declaring float32 accumulation exceeds the bound",
          "[error_model][tightness]") {
  // The bug (float16 q·k, float32 declared) and the correct kernel of contract accumulate-qk=f16 judged under the
  // default contract both exceed it; the latter stays within its own contract's bound. In bfloat16 a contract that
  // allows the row sum of the rounded P (an LSE error up to −ln(1 − 2⁻⁸)) hides the float16 q·k error of
  // unit-variance logits (0.70× the bound); with logits of standard deviation 4 (q·4) it still shows.
  std::mt19937_64 rng(kSeed + 2);
  const Variant qk16 = support::contract_variants()[0];
  REQUIRE(qk16.accumulate_qk == Dtype::f16);
  for (Dtype dt : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    const Shape s{1, 1, 1, 64, 64, 64, 64};
    const Problem p = make_problem(rng, s, dt, Values::normal, Mask::none);
    struct Case {
      std::string what;
      Problem p;
      KernelContract contract;  ///< what the kernels declare (accumulate-qk=f32)
    };
    std::vector<Case> cases{{"N(0,1)", p, KernelContract{}}};
    if (dt == Dtype::bf16) {
      Problem wide = p;
      for_each_index(wide.q.shape(), [&](std::span<const std::int64_t> idx) { wide.q.set(idx, 4 * wide.q.get(idx)); });
      cases.push_back({"q·4, rowsum=rounded-p", wide, parse_contract("rowsum=rounded-p")});
    }
    for (const Case &c : cases) {
      const ExactForward ef = reference_forward(c.p);
      const ExactBackward eb = reference_backward(c.p);
      const PrecisionProfile declared = c.contract.precision(dt);
      KernelContract own_contract = support::contract_of(qk16);
      own_contract.rowsum_rounded_p = c.contract.rowsum_rounded_p;
      const Check bad = run(support::variant_kernel(support::bug_variant(Bug::f16_dot_accumulation)), c.p, ef, eb,
                            declared);
      const Check undeclared = run(support::variant_kernel(qk16), c.p, ef, eb, declared);
      const Check own = run(support::variant_kernel(qk16), c.p, ef, eb, own_contract.precision(dt));
      std::cout << "f16 q·k accumulation, " << dtype_name(dt) << " storage, " << c.what << ", L=D=64: forward "
                << bad.fwd.ratio << ", backward " << bad.bwd.ratio << " × bound; the accumulate-qk=f16 kernel: forward "
                << undeclared.fwd.ratio << " × the declared-f32 bound, " << std::max(own.fwd.ratio, own.bwd.ratio)
                << " × its own\n";
      INFO(dtype_name(dt) << " storage, " << c.what << ": " << bad.fwd.describe());
      CHECK(bad.fwd.ratio > 1);
      CHECK(undeclared.fwd.ratio > 1);
      CHECK(own.fwd.ratio <= 1);
      CHECK(own.bwd.ratio <= 1);
    }
  }
}

TEST_CASE("a row sum of the rounded P exceeds the LSE bound unless the profile allows it",
          "[error_model][tightness][contract]") {
  std::mt19937_64 rng(kSeed + 4);
  const Variant v = support::contract_variants()[1];
  REQUIRE(v.rowsum_rounded_p);
  for (Dtype dt : {Dtype::f16, Dtype::bf16}) {
    const Shape s{1, 1, 1, 16, 16, 16, 16};
    const Problem p = make_problem(rng, s, dt, Values::normal, Mask::none);
    const ExactForward ef = reference_forward(p);
    const ExactBackward eb = reference_backward(p);
    const PrecisionProfile allowed = profile_of(dt, v);
    PrecisionProfile denied = allowed;
    denied.rowsum_rounded_p = false;
    REQUIRE(allowed.rowsum_rounded_p);
    const Check own = run(support::variant_kernel(v), p, ef, eb, allowed);
    const Check without = run(support::variant_kernel(v), p, ef, eb, denied);
    std::cout << "row sum of the rounded P, " << dtype_name(dt) << " storage, N(0,1), L=D=16: LSE "
              << without.lse.ratio << " × the bound without the allowance (O " << without.out.ratio << "), "
              << own.lse.ratio << " × with it (O " << own.out.ratio << ")\n";
    INFO(dtype_name(dt) << ": " << without.lse.describe());
    CHECK(own.fwd.ratio <= 1);
    CHECK(own.bwd.ratio <= 1);
    CHECK(without.lse.ratio > 1);
  }
}

TEST_CASE("GQA gradients summed from per-head parts rounded to storage exceed the dK, dV bound unless allowed",
          "[error_model][tightness][contract]") {
  // Without P rounding (round-p=no) nothing else in the bound is at the storage precision before the final store.
  std::mt19937_64 rng(kSeed + 5);
  Variant plain = support::contract_variants()[2];
  REQUIRE(plain.grad_per_head);
  plain.round_p = false;
  for (Dtype dt : {Dtype::f16, Dtype::bf16}) {
    const Shape s{1, 8, 2, 3, 64, 8, 8};
    const Problem p = make_problem(rng, s, dt, Values::normal, Mask::none);
    const ExactForward ef = reference_forward(p);
    const ExactBackward eb = reference_backward(p);
    const PrecisionProfile allowed = parse_contract("round-p=no", support::contract_of(plain)).precision(dt);
    PrecisionProfile denied = allowed;
    denied.grad_per_head = false;
    REQUIRE(allowed.grad_per_head);
    const Check own = run(support::variant_kernel(plain), p, ef, eb, allowed);
    const Check without = run(support::variant_kernel(plain), p, ef, eb, denied);
    std::cout << "per-head GQA gradients, P not rounded, " << dtype_name(dt) << " storage, " << s.describe()
              << ": dK " << without.dk.ratio << ", dV " << without.dv.ratio << " × the bound without the allowance; "
              << std::max(own.dk.ratio, own.dv.ratio) << " × with it\n";
    CHECK(own.bwd.ratio <= 1);
    CHECK(std::max(without.dk.ratio, without.dv.ratio) > 1);
  }
  // FlashAttention-like (P and dS rounded to storage): the dS, P roundings already in the bound cover most of the
  // per-head roundings; random GQA problems still find an excess.
  const Variant fa = support::contract_variants()[2];
  for (Dtype dt : {Dtype::f16, Dtype::bf16}) {
    std::mt19937_64 gen(kSeed + 77);
    RandomProblemOptions opt;
    opt.max_work = 20000;
    double worst_without = 0, worst_own = 0;
    for (int n = 0; n < 400;) {
      const Problem p = random_problem(gen, dt, opt);
      if (p.shape.group() == 1) continue;
      ++n;
      const ExactForward ef = reference_forward(p);
      const ExactBackward eb = reference_backward(p);
      PrecisionProfile denied = profile_of(dt, fa);
      denied.grad_per_head = false;
      const Check own = run(support::variant_kernel(fa), p, ef, eb, profile_of(dt, fa));
      const Check without = run(support::variant_kernel(fa), p, ef, eb, denied);
      INFO(p.shape.describe() << " " << mask_name(p.params.mask) << ": " << own.bwd.describe());
      REQUIRE(own.bwd.ratio <= 1);
      worst_own = std::max(worst_own, own.bwd.ratio);
      worst_without = std::max({worst_without, without.dk.ratio, without.dv.ratio});
    }
    std::cout << "per-head GQA gradients, FlashAttention-like, " << dtype_name(dt)
              << " storage, 400 random GQA problems: worst dK, dV " << worst_without
              << " × the bound without the allowance; " << worst_own << " × with it\n";
    CHECK(worst_without > 1);
  }
}

TEST_CASE("float16 arithmetic throughout is within its own profile's bound and outside float32's",
          "[error_model][tightness]") {
  std::mt19937_64 rng(kSeed + 3);
  Variant v;
  v.accumulate = Dtype::f16;
  v.key_block = 16;
  const Shape s{1, 2, 1, 32, 48, 64, 32};
  const Problem p = make_problem(rng, s, Dtype::f32, Values::normal, Mask::none);
  const ExactForward ef = reference_forward(p);
  const ExactBackward eb = reference_backward(p);
  const Check own = run(support::variant_kernel(v), p, ef, eb, profile_of(Dtype::f32, v));
  const Check declared_f32 = run(support::variant_kernel(v), p, ef, eb, PrecisionProfile::for_storage(Dtype::f32));
  INFO("own profile: " << own.fwd.describe() << " / " << own.bwd.describe());
  REQUIRE(own.fwd.ratio <= 1);
  REQUIRE(own.bwd.ratio <= 1);
  INFO("declared f32: " << declared_f32.fwd.describe());
  REQUIRE(declared_f32.fwd.ratio > 1);
}

TEST_CASE("kernels of every contract option stay within their contract's bound on thousands of problems",
          "[error_model][soundness][contract]") {
  constexpr int kProblemsPerDtype = 700;
  for (Dtype dt : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    std::mt19937_64 rng(kSeed + 10 + static_cast<std::uint64_t>(dt));
    std::map<std::string, Worsts> worst_by_variant;
    RandomProblemOptions opt;
    opt.max_work = kSmallWork;
    for (int c = 0; c < kProblemsPerDtype; ++c) check_contract_sound(random_problem(rng, dt, opt), worst_by_variant);
    report("contract variants, random small problems, " + std::string(dtype_name(dt)), worst_by_variant);
  }
}

TEST_CASE("kernels of every contract option stay within their contract's bound on GQA problems and long rows",
          "[error_model][soundness][contract]") {
  std::mt19937_64 rng(kSeed + 20);
  for (Dtype dt : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    std::map<std::string, Worsts> gqa, long_rows;
    // GQA, G = 2 and 4: dK, dV of a kv head sum over G query heads (per-head parts with grad_per_head).
    for (const Shape &s : {Shape{1, 4, 2, 17, 33, 8, 8}, Shape{1, 4, 1, 64, 17, 16, 8}, Shape{2, 8, 2, 3, 129, 8, 4},
                           Shape{1, 2, 1, 129, 65, 4, 16}})
      for (Values vals : {Values::normal, Values::uniform, Values::small_ints, Values::large_logits,
                          Values::dominant_key})
        for (Mask m : {Mask::none, Mask::causal})
          check_contract_sound(make_problem(rng, s, dt, vals, m, Layout::bhld), gqa);
    report("contract variants, GQA (G = 2, 4), " + std::string(dtype_name(dt)), gqa);
    // Long rows: the row sum of 1024+ rounded weights.
    for (std::int64_t Lk : {1024, 2049})
      for (Values vals : {Values::normal, Values::large_logits, Values::dominant_key, Values::small_ints})
        for (Mask m : {Mask::none, Mask::causal}) {
          const Shape s{1, 2, 1, 2, Lk, 16, 8};
          check_contract_sound(make_problem(rng, s, dt, vals, m, Layout::bhld), long_rows);
        }
    report("contract variants, long rows (Lk 1024, 2049), " + std::string(dtype_name(dt)), long_rows);
  }
}
