#include "variant_kernels.h"

#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "attncheck/kernel_call.h"
#include "attncheck/problem.h"

using namespace attncheck;
using namespace attncheck::support;

namespace {

constexpr std::uint32_t kSeed = 0x5eed;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
/// A correct variant errs by at most kTolUnits · u relative to the largest reference magnitude of each output,
/// with u the unit roundoff of its coarsest arithmetic (accumulation, storage, or P rounded to storage).
constexpr double kTolUnits = 64;
/// Logits large enough that e^s overflows float32 (s > 88.7): scale·q·k with |q|, |k| up to this.
constexpr double kOverflowAmplitude = 30;
constexpr std::int64_t kPad = 3;       ///< padding of the strided layouts
constexpr std::size_t kBugCount = 15;  ///< the Bug enumerators other than Bug::none

// ---- problems ----------------------------------------------------------------------------------------------------

struct Case {
  const char *what;
  Shape shape;
  Mask mask = Mask::none;
};

/// f32-friendly problem set: plain, GQA, causal with Lq > Lk (rows that see no key), causal with Lq < Lk,
/// causal square GQA, a single key.
const std::vector<Case> &cases() {
  static const std::vector<Case> all = {
      {"plain", Shape{2, 2, 2, 5, 40, 16, 8}},
      {"gqa", Shape{1, 4, 2, 7, 33, 8, 12}},
      {"causal Lq > Lk", Shape{1, 2, 1, 45, 40, 16, 16}, Mask::causal},
      {"causal Lq < Lk", Shape{1, 3, 1, 6, 50, 4, 4}, Mask::causal},
      {"causal square gqa", Shape{1, 4, 2, 17, 17, 8, 8}, Mask::causal},
      {"single key", Shape{1, 1, 1, 3, 1, 1, 2}},
  };
  return all;
}

void fill_uniform(Tensor &t, std::mt19937 &gen, double amplitude) {
  std::uniform_real_distribution<double> u(-amplitude, amplitude);
  for_each_index(t.shape(), [&](std::span<const std::int64_t> idx) { t.set(idx, u(gen)); });
}

/// Random q, k, v, dout uniform in [−amplitude, amplitude] (dout in [−1, 1]), default scale.
Problem make_problem(const Shape &s, Mask mask, Dtype dt, std::uint32_t seed, double amplitude = 1,
                     Layout layout = Layout::bhld) {
  std::mt19937 gen(seed);
  Problem p;
  p.shape = s;
  p.params = Params{default_scale(s.D), mask};
  const std::int64_t pad = layout == Layout::bhld ? 0 : kPad;
  p.q = Tensor::with_layout(dt, {s.B, s.Hq, s.Lq, s.D}, layout, pad);
  p.k = Tensor::with_layout(dt, {s.B, s.Hkv, s.Lk, s.D}, layout, pad);
  p.v = Tensor::with_layout(dt, {s.B, s.Hkv, s.Lk, s.Dv}, layout, pad);
  p.dout = Tensor::with_layout(dt, {s.B, s.Hq, s.Lq, s.Dv}, layout, pad);
  fill_uniform(p.q, gen, amplitude);
  fill_uniform(p.k, gen, amplitude);
  fill_uniform(p.v, gen, 1);
  fill_uniform(*p.dout, gen, 1);
  return p;
}

// ---- the plain double-precision computation ----------------------------------------------------------------------

struct Exact {
  std::vector<double> out, lse, dq, dk, dv;  // contiguous, row-major
};

/// O = softmax(scale·QKᵀ + mask)V and LSE; dQ, dK, dV with D_i = Σ dO·O — all in double, two passes (max, then sum).
Exact exact(const Problem &p) {
  const Shape &s = p.shape;
  const double scale = p.params.scale;
  Exact e;
  e.out.assign(static_cast<std::size_t>(s.B * s.Hq * s.Lq * s.Dv), 0.0);
  e.lse.assign(static_cast<std::size_t>(s.B * s.Hq * s.Lq), -kInf);
  e.dq.assign(static_cast<std::size_t>(s.B * s.Hq * s.Lq * s.D), 0.0);
  e.dk.assign(static_cast<std::size_t>(s.B * s.Hkv * s.Lk * s.D), 0.0);
  e.dv.assign(static_cast<std::size_t>(s.B * s.Hkv * s.Lk * s.Dv), 0.0);
  std::vector<double> z(static_cast<std::size_t>(s.Lk)), P(z.size()), dP(z.size());
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t h = 0; h < s.Hq; ++h)
      for (std::int64_t i = 0; i < s.Lq; ++i) {
        const std::int64_t hk = s.kv_head(h), n = visible_count(p.params.mask, i, s.Lq, s.Lk);
        if (n == 0) continue;
        double m = -kInf;
        for (std::int64_t j = 0; j < n; ++j) {
          double d = 0;
          for (std::int64_t x = 0; x < s.D; ++x) d += p.q.get({b, h, i, x}) * p.k.get({b, hk, j, x});
          z[static_cast<std::size_t>(j)] = scale * d;
          m = std::max(m, scale * d);
        }
        double l = 0;
        for (std::int64_t j = 0; j < n; ++j) l += std::exp(z[static_cast<std::size_t>(j)] - m);
        e.lse[static_cast<std::size_t>(lse_offset(s, b, h, i))] = m + std::log(l);
        for (std::int64_t j = 0; j < n; ++j)
          P[static_cast<std::size_t>(j)] = std::exp(z[static_cast<std::size_t>(j)] - m) / l;
        double Di = 0;
        for (std::int64_t c = 0; c < s.Dv; ++c) {
          double o = 0;
          for (std::int64_t j = 0; j < n; ++j) o += P[static_cast<std::size_t>(j)] * p.v.get({b, hk, j, c});
          e.out[static_cast<std::size_t>(out_offset(s, b, h, i, c))] = o;
          Di += p.dout->get({b, h, i, c}) * o;
        }
        for (std::int64_t j = 0; j < n; ++j) {
          double d = 0;
          for (std::int64_t c = 0; c < s.Dv; ++c) d += p.dout->get({b, h, i, c}) * p.v.get({b, hk, j, c});
          dP[static_cast<std::size_t>(j)] = d;
        }
        for (std::int64_t j = 0; j < n; ++j) {
          const double pj = P[static_cast<std::size_t>(j)], dS = pj * (dP[static_cast<std::size_t>(j)] - Di);
          for (std::int64_t x = 0; x < s.D; ++x) {
            e.dq[static_cast<std::size_t>(((b * s.Hq + h) * s.Lq + i) * s.D + x)] +=
                scale * dS * p.k.get({b, hk, j, x});
            e.dk[static_cast<std::size_t>(((b * s.Hkv + hk) * s.Lk + j) * s.D + x)] +=
                scale * dS * p.q.get({b, h, i, x});
          }
          for (std::int64_t c = 0; c < s.Dv; ++c)
            e.dv[static_cast<std::size_t>(((b * s.Hkv + hk) * s.Lk + j) * s.Dv + c)] += pj * p.dout->get({b, h, i, c});
        }
      }
  return e;
}

// ---- running a kernel and measuring -----------------------------------------------------------------------------

struct Run {
  Tensor out, lse, dq, dk, dv;
  CallResult fwd, bwd;
};

/// Forward then backward (with the forward's out and lse) into contiguous outputs whose storage starts as `prefill`.
Run run(const attncheck_kernel &kernel, const Problem &p, double prefill = kNaN) {
  const Shape &s = p.shape;
  const Dtype dt = p.dtype();
  Run r{make_out(s, dt),
        make_lse(s),
        Tensor::contiguous(dt, {s.B, s.Hq, s.Lq, s.D}),
        Tensor::contiguous(dt, {s.B, s.Hkv, s.Lk, s.D}),
        Tensor::contiguous(dt, {s.B, s.Hkv, s.Lk, s.Dv}),
        {},
        {}};
  for (Tensor *t : {&r.out, &r.lse, &r.dq, &r.dk, &r.dv}) t->fill_storage(prefill);
  r.fwd = call_forward(kernel, p, r.out, &r.lse);
  r.bwd = call_backward(kernel, p, r.out, &r.lse, r.dq, r.dk, r.dv);
  return r;
}

/// max_e |x_e − ref_e| / max(1, max_e |ref_e|) over the finite references; +∞ when an entry is NaN, or infinite
/// where the reference is not (or the other way round).
double error(const Tensor &t, const std::vector<double> &ref) {
  const std::vector<double> x = t.to_vector();
  double scale = 1, worst = 0;
  for (double r : ref)
    if (std::isfinite(r)) scale = std::max(scale, std::abs(r));
  for (std::size_t e = 0; e < x.size(); ++e) {
    if (std::isnan(x[e])) return kInf;
    if (!std::isfinite(ref[e]) || !std::isfinite(x[e])) {
      if (x[e] != ref[e]) return kInf;
      continue;
    }
    worst = std::max(worst, std::abs(x[e] - ref[e]) / scale);
  }
  return worst;
}

struct Errors {
  double out, lse, dq, dk, dv;
  double max() const { return std::max({out, lse, dq, dk, dv}); }
};
Errors errors(const Run &r, const Exact &e) {
  return {error(r.out, e.out), error(r.lse, e.lse), error(r.dq, e.dq), error(r.dk, e.dk), error(r.dv, e.dv)};
}

/// kTolUnits · u of the variant's coarsest arithmetic on `storage`.
double tolerance(const Variant &v, Dtype storage) {
  return kTolUnits * std::max({unit_roundoff(v.accumulate), unit_roundoff(v.accumulate_qk), unit_roundoff(storage)});
}

/// `p` with the causal alignment of `v`'s contract (top-left problems reach the kernel as ATTNCHECK_MASK_CAUSAL).
Problem aligned(Problem p, const Variant &v) {
  if (v.causal_top_left && p.params.mask == Mask::causal) p.params.mask = Mask::causal_top_left;
  return p;
}

/// Zeroes dout on the rows that see no key.
void zero_dout_of_empty_rows(Problem &p) {
  const Shape &s = p.shape;
  for (std::int64_t i = 0; i < s.Lq; ++i)
    if (visible_count(p.params.mask, i, s.Lq, s.Lk) == 0)
      for (std::int64_t b = 0; b < s.B; ++b)
        for (std::int64_t h = 0; h < s.Hq; ++h)
          for (std::int64_t c = 0; c < s.Dv; ++c) p.dout->set({b, h, i, c}, 0.0);
}

/// The results bit for bit (−0 equal to +0, NaN to NaN).
bool same(const Tensor &a, const Tensor &b) {
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  if (x.size() != y.size()) return false;
  for (std::size_t e = 0; e < x.size(); ++e)
    if (!(x[e] == y[e] || (std::isnan(x[e]) && std::isnan(y[e])))) return false;
  return true;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------

TEST_CASE("every correct variant agrees with a double-precision computation on float32 problems", "[variants]") {
  std::uint32_t seed = kSeed;
  for (const Case &c : cases()) {
    const Problem p = make_problem(c.shape, c.mask, Dtype::f32, ++seed);
    const Exact e = exact(p);
    for (const Variant &v : correct_variants()) {
      const Run r = run(variant_kernel(v), p);
      INFO(v.name() << " on " << c.what << " (" << c.shape.describe() << ")");
      REQUIRE(r.fwd.ok());
      REQUIRE(r.bwd.ok());
      const Errors err = errors(r, e);
      INFO("errors out " << err.out << " lse " << err.lse << " dq " << err.dq << " dk " << err.dk << " dv " << err.dv);
      CHECK(err.max() <= tolerance(v, Dtype::f32));
    }
  }
}

TEST_CASE("correct variants on float16 and bfloat16 storage agree with double precision to the storage precision",
          "[variants]") {
  std::uint32_t seed = kSeed;
  for (Dtype dt : {Dtype::f16, Dtype::bf16})
    for (const Case &c : cases()) {
      const Problem p = make_problem(c.shape, c.mask, dt, ++seed);
      const Exact e = exact(p);
      for (const Variant &v : correct_variants()) {
        const Run r = run(variant_kernel(v), p);
        INFO(v.name() << " on " << dtype_name(dt) << " " << c.what);
        REQUIRE(r.fwd.ok());
        REQUIRE(r.bwd.ok());
        CHECK(errors(r, e).max() <= tolerance(v, dt));
      }
    }
}

TEST_CASE("correct variants stay accurate on logits that would overflow exp", "[variants]") {
  const Case &c = cases().front();
  const Problem p = make_problem(c.shape, c.mask, Dtype::f32, kSeed, kOverflowAmplitude);
  const Exact e = exact(p);
  // Rounding a logit (or a split's LSE) of magnitude |s| errs by u·|s| absolutely, which e^(·) turns into a
  // relative error of u·|s|: the tolerance grows with the largest |LSE|.
  double magnitude = 1;
  for (double l : e.lse) magnitude = std::max(magnitude, std::abs(l));
  for (const Variant &v : correct_variants()) {
    const Run r = run(variant_kernel(v), p);
    INFO(v.name() << ", largest |LSE| " << magnitude);
    REQUIRE(r.fwd.ok());
    // Forward only: with logits this large P is nearly one-hot and the gradients lose all relative accuracy.
    CHECK(error(r.out, e.out) <= tolerance(v, Dtype::f32) * magnitude);
    CHECK(error(r.lse, e.lse) <= tolerance(v, Dtype::f32));
  }
}

TEST_CASE("a row that sees no key gets zero output, minus-infinity LSE and zero gradients", "[variants]") {
  const Shape s{1, 2, 1, 6, 3, 4, 5};  // causal, Lq − Lk = 3: rows 0, 1, 2 see nothing
  const Problem p = make_problem(s, Mask::causal, Dtype::f32, kSeed);
  for (const Variant &v : correct_variants()) {
    const Run r = run(variant_kernel(v), p);
    INFO(v.name());
    REQUIRE(r.fwd.ok());
    REQUIRE(r.bwd.ok());
    for (std::int64_t h = 0; h < s.Hq; ++h)
      for (std::int64_t i = 0; i < 3; ++i) {
        REQUIRE(r.lse.get({0, h, i}) == -kInf);
        for (std::int64_t c = 0; c < s.Dv; ++c) REQUIRE(r.out.get({0, h, i, c}) == 0.0);
        for (std::int64_t x = 0; x < s.D; ++x) REQUIRE(r.dq.get({0, h, i, x}) == 0.0);
      }
  }
}

TEST_CASE("strided layouts and NULL strides give bit-identical results to contiguous tensors", "[variants]") {
  const Case &c = cases()[1];  // gqa
  Variant v;
  v.key_block = 7;
  v.exp2_fold = true;
  const attncheck_kernel &kernel = variant_kernel(v);
  const Run base = run(kernel, make_problem(c.shape, c.mask, Dtype::bf16, kSeed));
  for (Layout layout : {Layout::blhd, Layout::transposed, Layout::padded}) {
    INFO(layout_name(layout));
    Problem p = make_problem(c.shape, c.mask, Dtype::bf16, kSeed, 1, layout);
    for (Tensor *t : {&p.q, &p.k, &p.v, &*p.dout}) t->fill_padding(kNaN);  // the padding must not be read
    const Run r = run(kernel, p);
    REQUIRE(r.fwd.ok());
    REQUIRE(r.bwd.ok());
    REQUIRE(r.out.to_vector() == base.out.to_vector());
    REQUIRE(r.lse.to_vector() == base.lse.to_vector());
    REQUIRE(r.dq.to_vector() == base.dq.to_vector());
    REQUIRE(r.dk.to_vector() == base.dk.to_vector());
    REQUIRE(r.dv.to_vector() == base.dv.to_vector());
  }
  // NULL strides mean compact row-major.
  const Problem p = make_problem(c.shape, c.mask, Dtype::bf16, kSeed);
  Tensor out = make_out(p.shape, Dtype::bf16), lse = make_lse(p.shape);
  const attncheck_params params = p.params.to_abi();
  DLTensor q = p.q.dl(), k = p.k.dl(), vv = p.v.dl(), o = out.dl(), l = lse.dl();
  for (DLTensor *t : {&q, &k, &vv, &o, &l}) t->strides = nullptr;
  REQUIRE(kernel.forward(&params, &q, &k, &vv, &o, &l) == ATTNCHECK_OK);
  REQUIRE(out.to_vector() == base.out.to_vector());
  REQUIRE(lse.to_vector() == base.lse.to_vector());
}

TEST_CASE("backward without an LSE recomputes it and gives the same gradients", "[variants]") {
  std::vector<Variant> all = correct_variants();
  for (const Variant &v : contract_variants()) all.push_back(v);
  for (Dtype dt : {Dtype::f32, Dtype::bf16})
    for (const Case &c : {cases()[2], cases()[4]})  // causal Lq > Lk (rows that see no key); causal square GQA
      for (const Variant &v : all) {
        const Problem p = aligned(make_problem(c.shape, c.mask, dt, kSeed), v);
        const Run r = run(variant_kernel(v), p);
        REQUIRE(r.fwd.ok());
        REQUIRE(r.bwd.ok());
        Tensor out = r.out, dq = r.dq, dk = r.dk, dv = r.dv;
        out.fill_storage(kNaN);
        dq.fill_storage(kNaN);
        REQUIRE(call_forward(variant_kernel(v), p, out, nullptr).ok());  // forward without an LSE
        REQUIRE(call_backward(variant_kernel(v), p, r.out, nullptr, dq, dk, dv).ok());
        INFO(v.name() << " " << dtype_name(dt) << " " << c.what);
        REQUIRE(same(out, r.out));
        if (v.nondeterministic_backward) {  // same gradients up to dQ's summation order
          const Exact e = exact(p);
          CHECK(error(dq, e.dq) <= tolerance(v, dt));
        } else {
          REQUIRE(same(dq, r.dq));
        }
        REQUIRE(same(dk, r.dk));
        REQUIRE(same(dv, r.dv));
      }
}

namespace {
/// Which output a bug must spoil.
enum class Output { out, dq, dk };
struct BugCase {
  Bug bug;
  Case problem;
  Output spoiled;
  double amplitude = 1;
};
const std::vector<BugCase> &bug_cases() {
  const Case plain = cases()[0], gqa = cases()[1], causal_tall = cases()[2], causal_wide = cases()[3],
             causal_square = cases()[4];
  static const std::vector<BugCase> all = {
      {Bug::missing_scale, plain, Output::out},
      {Bug::scale_1_over_d, plain, Output::out},
      {Bug::scale_1_over_sqrt_dv, plain, Output::out},
      {Bug::no_max_subtraction, plain, Output::out, kOverflowAmplitude},
      {Bug::no_rescale, plain, Output::out},
      {Bug::drop_last_partial_block, plain, Output::out},
      {Bug::causal_off_by_one, causal_square, Output::out},
      {Bug::causal_top_left, causal_wide, Output::out},
      {Bug::f16_dot_accumulation, plain, Output::out},
      {Bug::gqa_head_mod, gqa, Output::out},
      {Bug::nan_fully_masked_rows, causal_tall, Output::out},
      {Bug::dk_missing_scale, plain, Output::dk},
      {Bug::ds_without_d_term, plain, Output::dq},
      {Bug::output_not_zeroed, plain, Output::out},
      {Bug::read_past_last_key, plain, Output::out},
  };
  return all;
}
}  // namespace

TEST_CASE("every bug changes the result on a problem that exercises it", "[variants][bugs]") {
  REQUIRE(bug_cases().size() == all_bugs().size());
  for (const BugCase &bc : bug_cases()) {
    const Variant v = bug_variant(bc.bug);
    const Problem p = make_problem(bc.problem.shape, bc.problem.mask, Dtype::f32, kSeed, bc.amplitude);
    const Exact e = exact(p);
    const Run r = run(variant_kernel(v), p);
    REQUIRE(r.fwd.ok());
    REQUIRE(r.bwd.ok());
    const Errors err = errors(r, e);
    const double spoiled = bc.spoiled == Output::out ? err.out : bc.spoiled == Output::dq ? err.dq : err.dk;
    INFO(v.name() << " on " << bc.problem.what << ": error " << spoiled);
    CHECK(spoiled > tolerance(Variant{}, Dtype::f32));
  }
}

TEST_CASE("bugs stay invisible on problems that do not exercise them", "[variants][bugs]") {
  struct Quiet {
    Bug bug;
    Case problem;
    double scale;  // params.scale; NaN = the default 1/√D
    double prefill = kNaN;
  };
  const Case plain = cases()[0], gqa_none = {"gqa Hkv = Hq", Shape{1, 2, 2, 5, 9, 4, 4}},
             square = {"D = Dv", Shape{1, 2, 1, 5, 9, 6, 6}}, one_key = cases()[5],
             whole_blocks = {"Lk a multiple of 16", Shape{1, 1, 1, 4, 32, 4, 4}}, causal_wide = cases()[3];
  const std::vector<Quiet> quiet = {
      {Bug::missing_scale, plain, 1.0},          {Bug::scale_1_over_d, plain, 1.0 / static_cast<double>(plain.shape.D)},
      {Bug::scale_1_over_sqrt_dv, square, kNaN}, {Bug::no_max_subtraction, plain, kNaN},
      {Bug::no_rescale, one_key, kNaN},          {Bug::drop_last_partial_block, whole_blocks, kNaN},
      {Bug::causal_off_by_one, plain, kNaN},     {Bug::causal_top_left, plain, kNaN},
      {Bug::gqa_head_mod, gqa_none, kNaN},       {Bug::nan_fully_masked_rows, causal_wide, kNaN},
      {Bug::dk_missing_scale, plain, 1.0},       {Bug::output_not_zeroed, plain, kNaN, 0.0},
  };
  for (const Quiet &qc : quiet) {
    const Variant v = bug_variant(qc.bug);
    Problem p = make_problem(qc.problem.shape, qc.problem.mask, Dtype::f32, kSeed);
    if (!std::isnan(qc.scale)) p.params.scale = qc.scale;
    const Run r = run(variant_kernel(v), p, qc.prefill);
    INFO(v.name() << " on " << qc.problem.what);
    REQUIRE(r.fwd.ok());
    REQUIRE(r.bwd.ok());
    CHECK(errors(r, exact(p)).max() <= tolerance(Variant{}, Dtype::f32));
  }
}

TEST_CASE("read_past_last_key reads the next key row inside the tensor and zeros past its extent", "[variants][bugs]") {
  // Padded layout: key row Lk of kv head 0 is head padding (NaN here); of the last kv head it lies past the extent.
  const Shape s{1, 2, 2, 3, 5, 4, 4};
  Problem p = make_problem(s, Mask::none, Dtype::f32, kSeed, 1, Layout::padded);
  for (Tensor *t : {&p.q, &p.k, &p.v, &*p.dout}) t->fill_padding(kNaN);
  const Run r = run(variant_kernel(bug_variant(Bug::read_past_last_key)), p);
  REQUIRE(r.fwd.ok());
  for (std::int64_t i = 0; i < s.Lq; ++i) {
    REQUIRE(std::isnan(r.out.get({0, 0, i, 0})));     // read the padding
    REQUIRE(std::isfinite(r.out.get({0, 1, i, 0})));  // read zeros
  }
  // With zeros read, the extra key has logit 0 and value 0: O = Σ_j e^(s_j) v_j / (1 + Σ_j e^(s_j)).
  const Exact e = exact(p);
  for (std::int64_t i = 0; i < s.Lq; ++i) {
    const double l = std::exp(e.lse[static_cast<std::size_t>(lse_offset(s, 0, 1, i))]);
    for (std::int64_t c = 0; c < s.Dv; ++c)
      CHECK(r.out.get({0, 1, i, c}) ==
            Approx(e.out[static_cast<std::size_t>(out_offset(s, 0, 1, i, c))] * l / (1 + l)).epsilon(1e-5));
  }
}

TEST_CASE("variant names are unique and equal variants share one kernel", "[variants]") {
  std::set<std::string> names;
  std::vector<Variant> all = correct_variants();
  for (const Variant &v : contract_variants()) all.push_back(v);
  for (Bug b : all_bugs()) all.push_back(bug_variant(b));
  Variant odd = bug_variant(Bug::no_rescale);
  odd.key_block = 3;
  all.push_back(odd);
  for (const Variant &v : all) {
    INFO(v.name());
    REQUIRE(names.insert(v.name()).second);
    const attncheck_kernel &k = variant_kernel(v);
    REQUIRE(&k == &variant_kernel(v));
    REQUIRE(std::string(k.name) == v.name());
    REQUIRE(k.abi_version == ATTNCHECK_ABI_VERSION);
    REQUIRE(k.forward);
    REQUIRE(k.backward);
    REQUIRE(k.last_error);
  }
  REQUIRE(Variant{}.name() == "online_b1_f32acc");
  REQUIRE(bug_variant(Bug::missing_scale).name() == "bug:missing_scale");
  REQUIRE(odd.name() == "bug:no_rescale/online_b3_f32acc");
  REQUIRE(bug_variant(Bug::causal_top_left).name() == "bug:causal_top_left");
  const std::vector<Variant> cv = contract_variants();
  REQUIRE(cv.size() == 8);
  const char *suffixes[] = {"_qkf16acc", "_rowsumP",  "_gradPerHead", "_lseS",
                            "_topleft",  "_densePV", "_emptyMean",   "_nondetBwd"};
  for (std::size_t n = 0; n < cv.size(); ++n)
    CHECK(cv[n].name() == std::string("online_b16_exp2_roundp_f32acc") + suffixes[n]);
  const std::vector<Bug> bugs = all_bugs();
  REQUIRE(bugs.size() == kBugCount);
  REQUIRE(std::find(bugs.begin(), bugs.end(), Bug::none) == bugs.end());
  std::set<std::string_view> bug_names;
  for (Bug b : bugs) REQUIRE(bug_names.insert(bug_name(b)).second);
  REQUIRE(bug_names.count("none") == 0);
}

TEST_CASE("kernels refuse bad calls with a message and invalid variants with an exception", "[variants]") {
  const attncheck_kernel &kernel = variant_kernel(Variant{});
  const Problem p = make_problem(cases()[0].shape, Mask::none, Dtype::f32, kSeed);
  Shape wrong = p.shape;
  wrong.Dv += 1;
  Tensor out = make_out(wrong, Dtype::f32);
  CallResult r = call_forward(kernel, p, out, nullptr);
  REQUIRE(r.status == ATTNCHECK_ERROR);
  REQUIRE_THAT(r.message, Catch::Contains("out must have shape"));

  Problem masked = make_problem(cases()[0].shape, Mask::none, Dtype::f32, kSeed);
  masked.params.mask = static_cast<Mask>(7);
  Tensor good = make_out(p.shape, Dtype::f32);
  r = call_forward(kernel, masked, good, nullptr);
  REQUIRE(r.status == ATTNCHECK_UNSUPPORTED);
  REQUIRE_THAT(r.message, Catch::Contains("mask"));

  Tensor half = make_out(p.shape, Dtype::f16);
  r = call_forward(kernel, p, half, nullptr);
  REQUIRE(r.status == ATTNCHECK_ERROR);
  REQUIRE_THAT(r.message, Catch::Contains("dtype"));

  Variant bad;
  bad.key_block = -1;
  REQUIRE_THROWS_AS(variant_kernel(bad), std::invalid_argument);
  bad = Variant{};
  bad.splits = 0;
  REQUIRE_THROWS_AS(variant_kernel(bad), std::invalid_argument);
}

// ---- contract variants ------------------------------------------------------------------------------------------

TEST_CASE("contract_of names what each variant needs and nothing else", "[variants][contract]") {
  for (const Variant &v : correct_variants()) {
    INFO(v.name());
    KernelContract want;
    want.accumulate_qk = want.accumulate_pv = v.accumulate;
    CHECK(contract_of(v) == want);
  }
  const std::vector<Variant> cv = contract_variants();
  const char *changes[] = {"accumulate-qk=f16",     "rowsum=rounded-p", "grad-sum=per-head", "lse=storage",
                           "causal=top-left",       "defaults",         "empty-rows=unspecified", "defaults"};
  for (std::size_t n = 0; n < cv.size(); ++n) {
    INFO(cv[n].name());
    CHECK(contract_of(cv[n]).describe_changes() == changes[n]);
  }
  Variant bug = bug_variant(Bug::f16_dot_accumulation);
  CHECK(contract_of(bug) == KernelContract{});  // the bug declares the defaults: float32 q·k
}

TEST_CASE("contract variants agree with a double-precision computation", "[variants][contract]") {
  std::uint32_t seed = kSeed;
  for (Dtype dt : {Dtype::f32, Dtype::f16, Dtype::bf16})
    for (const Case &c : cases())
      for (const Variant &v : contract_variants()) {
        Problem p = aligned(make_problem(c.shape, c.mask, dt, ++seed), v);
        if (v.empty_rows_mean) zero_dout_of_empty_rows(p);  // those rows are checked on their own below
        const Exact e = exact(p);
        const Run r = run(variant_kernel(v), p);
        INFO(v.name() << " on " << dtype_name(dt) << " " << c.what);
        REQUIRE(r.fwd.ok());
        REQUIRE(r.bwd.ok());
        Errors err = errors(r, e);
        if (v.empty_rows_mean) {  // rows that see no key: compared with the unmasked problem in the next test
          Exact masked = e;
          const std::vector<double> lse = r.lse.to_vector(), out = r.out.to_vector();
          const auto Dv = static_cast<std::size_t>(p.shape.Dv);
          for (std::size_t row = 0; row < e.lse.size(); ++row)
            if (std::isinf(e.lse[row])) {
              masked.lse[row] = lse[row];
              std::copy_n(out.begin() + static_cast<std::ptrdiff_t>(row * Dv), Dv,
                          masked.out.begin() + static_cast<std::ptrdiff_t>(row * Dv));
            }
          err = errors(r, masked);
        }
        INFO("errors out " << err.out << " lse " << err.lse << " dq " << err.dq << " dk " << err.dk << " dv "
                           << err.dv);
        CHECK(err.max() <= tolerance(v, dt));
      }
}

TEST_CASE("empty_rows_mean: a row that sees no key behaves as if it saw every key", "[variants][contract]") {
  const Shape s{1, 2, 1, 6, 3, 4, 5};  // causal, Lq − Lk = 3: rows 0, 1, 2 see nothing
  Variant v = contract_variants()[6];
  REQUIRE(v.empty_rows_mean);
  for (bool dense : {false, true}) {
    v.dense_pv = dense;
    const Problem p = make_problem(s, Mask::causal, Dtype::f32, kSeed);
    Problem unmasked = p;
    unmasked.params.mask = Mask::none;
    const Exact causal = exact(p), all = exact(unmasked);
    const Run r = run(variant_kernel(v), p);
    REQUIRE(r.fwd.ok());
    REQUIRE(r.bwd.ok());
    INFO(v.name());
    for (std::int64_t h = 0; h < s.Hq; ++h)
      for (std::int64_t i = 0; i < s.Lq; ++i) {
        const Exact &want = i < 3 ? all : causal;  // dQ_i depends on row i alone
        CHECK(r.lse.get({0, h, i}) == Approx(want.lse[static_cast<std::size_t>(lse_offset(s, 0, h, i))]).margin(1e-5));
        for (std::int64_t c = 0; c < s.Dv; ++c)
          CHECK(r.out.get({0, h, i, c}) ==
                Approx(want.out[static_cast<std::size_t>(out_offset(s, 0, h, i, c))]).margin(1e-5));
        for (std::int64_t x = 0; x < s.D; ++x)
          CHECK(r.dq.get({0, h, i, x}) ==
                Approx(want.dq[static_cast<std::size_t>((h * s.Lq + i) * s.D + x)]).margin(1e-5));
      }
  }
}

TEST_CASE("lse_storage writes the LSE rounded to storage: every variant takes an lse of float32 or the storage dtype",
          "[variants][contract]") {
  const Case &c = cases()[1];  // gqa
  const Variant rounded = contract_variants()[3];
  Variant base = rounded;
  base.lse_storage = false;
  for (Dtype dt : {Dtype::f16, Dtype::bf16}) {
    const Problem p = make_problem(c.shape, c.mask, dt, kSeed);
    const Run b = run(variant_kernel(base), p), r = run(variant_kernel(rounded), p);
    REQUIRE(b.fwd.ok());
    REQUIRE(r.fwd.ok());
    const std::vector<double> full = b.lse.to_vector(), got = r.lse.to_vector();
    for (std::size_t x = 0; x < full.size(); ++x) REQUIRE(got[x] == round_to(dt, full[x]));
    REQUIRE(same(r.out, b.out));
    bool differs = false;
    for (std::size_t x = 0; x < full.size(); ++x) differs |= got[x] != full[x];
    CHECK(differs);
    for (const Variant &v : {base, rounded}) {
      INFO(v.name() << " " << dtype_name(dt));
      const Run f32 = run(variant_kernel(v), p);
      Tensor out = make_out(p.shape, dt), lse = Tensor::contiguous(dt, {p.shape.B, p.shape.Hq, p.shape.Lq});
      REQUIRE(call_forward(variant_kernel(v), p, out, &lse).ok());
      const std::vector<double> l = lse.to_vector(), l32 = f32.lse.to_vector();
      for (std::size_t x = 0; x < l.size(); ++x) REQUIRE(l[x] == round_to(dt, l32[x]));
      // Backward reads the storage-dtype LSE as it reads the same values in float32.
      Tensor lse32 = make_lse(p.shape);
      lse32.assign(l);
      Tensor dq = f32.dq, dk = f32.dk, dv = f32.dv, dq2 = f32.dq, dk2 = f32.dk, dv2 = f32.dv;
      REQUIRE(call_backward(variant_kernel(v), p, out, &lse, dq, dk, dv).ok());
      REQUIRE(call_backward(variant_kernel(v), p, out, &lse32, dq2, dk2, dv2).ok());
      REQUIRE(same(dq, dq2));
      REQUIRE(same(dk, dk2));
      REQUIRE(same(dv, dv2));
    }
    // A third dtype is refused.
    Tensor out = make_out(p.shape, dt);
    Tensor wrong = Tensor::contiguous(dt == Dtype::f16 ? Dtype::bf16 : Dtype::f16, {p.shape.B, p.shape.Hq, p.shape.Lq});
    const CallResult bad = call_forward(variant_kernel(rounded), p, out, &wrong);
    REQUIRE(bad.status == ATTNCHECK_ERROR);
    REQUIRE_THAT(bad.message, Catch::Contains("lse"));
  }
}

TEST_CASE("causal_top_left is the visibility of Bug::causal_top_left, declared", "[variants][contract]") {
  const Case &c = cases()[3];  // causal Lq < Lk
  Variant v = bug_variant(Bug::causal_top_left);
  v.bug = Bug::none;
  v.causal_top_left = true;
  const Problem p = make_problem(c.shape, c.mask, Dtype::f32, kSeed);
  const Run declared = run(variant_kernel(v), p), bug = run(variant_kernel(bug_variant(Bug::causal_top_left)), p);
  REQUIRE(declared.fwd.ok());
  REQUIRE(declared.bwd.ok());
  for (const auto &[a, b] : {std::pair{&declared.out, &bug.out}, {&declared.lse, &bug.lse}, {&declared.dq, &bug.dq},
                             {&declared.dk, &bug.dk}, {&declared.dv, &bug.dv}})
    REQUIRE(same(*a, *b));
  Problem tl = p;
  tl.params.mask = Mask::causal_top_left;
  CHECK(errors(declared, exact(tl)).max() <= tolerance(v, Dtype::f32));
  CHECK(errors(declared, exact(p)).max() > tolerance(v, Dtype::f32));  // not bottom-right
}

TEST_CASE("dense_pv: finite hidden keys change nothing, NaN or Inf in a hidden k or v leaks into visible rows",
          "[variants][contract]") {
  const Variant dense = contract_variants()[5];
  Variant sparse = dense;
  sparse.dense_pv = false;
  for (const Case &c : {cases()[2], cases()[4]}) {  // causal Lq > Lk; causal square GQA
    const Problem p = make_problem(c.shape, c.mask, Dtype::f16, kSeed);
    const Run d = run(variant_kernel(dense), p), s = run(variant_kernel(sparse), p);
    INFO(c.what);
    REQUIRE(d.fwd.ok());
    REQUIRE(d.bwd.ok());
    REQUIRE(same(d.out, s.out));
    REQUIRE(same(d.lse, s.lse));
    REQUIRE(same(d.dq, s.dq));
    REQUIRE(same(d.dk, s.dk));
    REQUIRE(same(d.dv, s.dv));
  }
  // The last key, hidden from every row but the last ones: NaN in v spoils the output of rows that do not see it,
  // NaN in k their dQ (dS = 0 for it, and 0·NaN = NaN); rows that see no key stay exactly 0.
  const Shape s = cases()[2].shape;  // Lq = 45 > Lk = 40: rows 0..4 see nothing, row 5 sees key 0 only
  for (bool in_v : {true, false}) {
    Problem p = make_problem(s, Mask::causal, Dtype::f32, kSeed);
    Tensor &t = in_v ? p.v : p.k;
    t.set({0, 0, s.Lk - 1, 0}, kNaN);
    const Run d = run(variant_kernel(dense), p), sp = run(variant_kernel(sparse), p);
    INFO((in_v ? "NaN in v" : "NaN in k"));
    REQUIRE(d.fwd.ok());
    REQUIRE(d.bwd.ok());
    const std::int64_t row = 5;  // sees key 0 only
    if (in_v) {
      CHECK(std::isnan(d.out.get({0, 0, row, 0})));
      CHECK(std::isfinite(sp.out.get({0, 0, row, 0})));
    }
    CHECK(std::isnan(d.dq.get({0, 0, row, 0})));
    CHECK(std::isfinite(sp.dq.get({0, 0, row, 0})));
    for (std::int64_t i = 0; i < 5; ++i) {
      CHECK(d.out.get({0, 0, i, 0}) == 0.0);
      CHECK(d.lse.get({0, 0, i}) == -kInf);
      CHECK(d.dq.get({0, 0, i, 0}) == 0.0);
    }
  }
}

TEST_CASE("grad_per_head: per-head parts rounded to storage, summed in float32", "[variants][contract]") {
  const Variant per_head = contract_variants()[2];
  Variant plain = per_head;
  plain.grad_per_head = false;
  // One query head per kv head: the part is the whole sum, so the results are the same bits.
  const Problem mha = make_problem(cases()[0].shape, Mask::none, Dtype::bf16, kSeed);
  const Run a = run(variant_kernel(per_head), mha), b = run(variant_kernel(plain), mha);
  REQUIRE(a.bwd.ok());
  REQUIRE(same(a.dk, b.dk));
  REQUIRE(same(a.dv, b.dv));
  // GQA: dK, dV = Σ_h round(part_h); each part from a problem holding only head h's dout.
  const Case &c = cases()[4];  // causal square GQA, G = 2
  for (Dtype dt : {Dtype::f16, Dtype::bf16}) {
    const Problem p = make_problem(c.shape, c.mask, dt, kSeed);
    const Run r = run(variant_kernel(per_head), p), q = run(variant_kernel(plain), p);
    REQUIRE(r.bwd.ok());
    const std::int64_t G = p.shape.group();
    std::vector<double> dk_sum(r.dk.to_vector().size()), dv_sum(r.dv.to_vector().size());
    for (std::int64_t h = 0; h < G; ++h) {
      Problem part = p;  // dout of the query heads h, h + G, … only: one head per kv head
      for (std::int64_t hq = 0; hq < p.shape.Hq; ++hq)
        if (hq % G != h)
          for (std::int64_t i = 0; i < p.shape.Lq; ++i)
            for (std::int64_t x = 0; x < p.shape.Dv; ++x) part.dout->set({0, hq, i, x}, 0.0);
      Tensor dq = r.dq, dk = r.dk, dv = r.dv;
      REQUIRE(call_backward(variant_kernel(plain), part, r.out, &r.lse, dq, dk, dv).ok());
      const std::vector<double> k = dk.to_vector(), v = dv.to_vector();
      for (std::size_t x = 0; x < k.size(); ++x) dk_sum[x] += k[x];
      for (std::size_t x = 0; x < v.size(); ++x) dv_sum[x] += v[x];
    }
    // The plain kernel on one head's dout gives that head's part rounded to storage (as a float32 sum of G values
    // the order of which does not matter for G = 2), then the sum is rounded once more.
    std::vector<double> dk_want(dk_sum.size()), dv_want(dv_sum.size());
    for (std::size_t x = 0; x < dk_sum.size(); ++x) dk_want[x] = round_to(dt, static_cast<float>(dk_sum[x]));
    for (std::size_t x = 0; x < dv_sum.size(); ++x) dv_want[x] = round_to(dt, static_cast<float>(dv_sum[x]));
    INFO(dtype_name(dt));
    REQUIRE(G == 2);
    CHECK(r.dk.to_vector() == dk_want);
    CHECK(r.dv.to_vector() == dv_want);
    CHECK((r.dk.to_vector() != q.dk.to_vector() || r.dv.to_vector() != q.dv.to_vector()));
  }
}

TEST_CASE("rowsum_rounded_p: l from the rounded P changes the LSE in bfloat16, nothing in float32",
          "[variants][contract]") {
  const Variant rowsum = contract_variants()[1];
  Variant exact_sum = rowsum;
  exact_sum.rowsum_rounded_p = false;
  const Case &c = cases()[0];
  const Problem p32 = make_problem(c.shape, c.mask, Dtype::f32, kSeed);
  const Run a = run(variant_kernel(rowsum), p32), b = run(variant_kernel(exact_sum), p32);
  REQUIRE(same(a.out, b.out));
  REQUIRE(same(a.lse, b.lse));
  const Problem p = make_problem(c.shape, c.mask, Dtype::bf16, kSeed);
  const Run r = run(variant_kernel(rowsum), p), e = run(variant_kernel(exact_sum), p);
  CHECK(r.lse.to_vector() != e.lse.to_vector());
  CHECK(errors(r, exact(p)).max() <= tolerance(rowsum, Dtype::bf16));
}

TEST_CASE("nondeterministic_backward: dQ changes in the last bits from call to call, within tolerance: thread-safe",
          "[variants][contract]") {
  const Variant v = contract_variants()[7];
  const Problem p = make_problem(cases()[0].shape, Mask::none, Dtype::f32, kSeed);
  const Exact e = exact(p);
  const Run first = run(variant_kernel(v), p);
  REQUIRE(first.bwd.ok());
  bool differs = false;
  for (int call = 0; call < 4; ++call) {
    Tensor dq = first.dq, dk = first.dk, dv = first.dv;
    REQUIRE(call_backward(variant_kernel(v), p, first.out, &first.lse, dq, dk, dv).ok());
    differs |= !same(dq, first.dq);
    CHECK(error(dq, e.dq) <= tolerance(v, Dtype::f32));
    REQUIRE(same(dk, first.dk));
    REQUIRE(same(dv, first.dv));
  }
  CHECK(differs);
  // Concurrent calls: each result is a valid dQ.
  constexpr int kThreads = 4;
  std::vector<Tensor> dqs(kThreads, first.dq), dks(kThreads, first.dk), dvs(kThreads, first.dv);
  std::vector<int> status(kThreads, ATTNCHECK_ERROR);
  {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        for (int rep = 0; rep < 8; ++rep)
          status[static_cast<std::size_t>(t)] =
              call_backward(variant_kernel(v), p, first.out, &first.lse, dqs[static_cast<std::size_t>(t)],
                            dks[static_cast<std::size_t>(t)], dvs[static_cast<std::size_t>(t)])
                  .status;
      });
    for (std::thread &th : threads) th.join();
  }
  for (int t = 0; t < kThreads; ++t) {
    REQUIRE(status[static_cast<std::size_t>(t)] == ATTNCHECK_OK);
    CHECK(error(dqs[static_cast<std::size_t>(t)], e.dq) <= tolerance(v, Dtype::f32));
  }
}

TEST_CASE("accumulate_qk: float16 logits within float16's tolerance, not the float32 variant's bits",
          "[variants][contract]") {
  const Variant qk = contract_variants()[0];
  Variant f32 = qk;
  f32.accumulate_qk = Dtype::f32;
  const Problem p = make_problem(cases()[0].shape, Mask::none, Dtype::f32, kSeed);
  const Run r = run(variant_kernel(qk), p), b = run(variant_kernel(f32), p);
  REQUIRE(r.fwd.ok());
  CHECK(errors(r, exact(p)).max() <= tolerance(qk, Dtype::f32));
  CHECK(!same(r.out, b.out));
  CHECK(errors(r, exact(p)).max() > tolerance(f32, Dtype::f32));  // the float16 logits show
}

// ---- scale bugs: visible only on long rows or huge tensors -------------------------------------------------------

namespace {

/// `v` without its bug: the same configuration, correct.
Variant without_bug(Variant v) {
  v.bug = Bug::none;
  return v;
}

/// Both runs' five results bit for bit.
bool same_run(const Run &a, const Run &b) {
  return same(a.out, b.out) && same(a.lse, b.lse) && same(a.dq, b.dq) && same(a.dk, b.dk) && same(a.dv, b.dv);
}

/// max_e |a_e − b_e|; +∞ when the sizes differ or a difference is not finite.
double max_difference(const Tensor &a, const Tensor &b) {
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  if (x.size() != y.size()) return kInf;
  double worst = 0;
  for (std::size_t e = 0; e < x.size(); ++e) {
    const double d = std::abs(x[e] - y[e]);
    worst = std::isfinite(d) ? std::max(worst, d) : kInf;
    if (std::isinf(worst)) break;
  }
  return worst;
}

/// Amplitude of the queries of tail_heavy: a tail key's logit exceeds the others' by 2·8/√2 ≈ 11.3.
constexpr double kTailQuery = 8;

/// A long-row problem (B = Hq = Hkv = 1, D = Dv = 2, float32, no mask) whose keys from `tail` on carry nearly all
/// the weight of every row: q_i = (kTailQuery, ·); k_j = (±1, ·) and v_j = (±1, ·), + from key `tail` on; the
/// second components are random (so the values differ per key).
Problem tail_heavy(std::int64_t Lq, std::int64_t Lk, std::int64_t tail) {
  Problem p = make_problem(Shape{1, 1, 1, Lq, Lk, 2, 2}, Mask::none, Dtype::f32, kSeed);
  for (std::int64_t i = 0; i < Lq; ++i) p.q.set({0, 0, i, 0}, kTailQuery);
  for (std::int64_t j = 0; j < Lk; ++j) {
    const double sign = j >= tail ? 1.0 : -1.0;
    p.k.set({0, 0, j, 0}, sign);
    p.v.set({0, 0, j, 0}, sign);
  }
  return p;
}

/// A random long-row problem: causal GQA (Hq = 2, Hkv = 1), Lq = `Lq`, D = Dv = 4, float32.
Problem long_row(std::int64_t Lq, std::int64_t Lk, std::uint32_t seed) {
  return make_problem(Shape{1, 2, 1, Lq, Lk, 4, 4}, Mask::causal, Dtype::f32, seed);
}

/// `p` with only its first n keys (B, Hkv, D, Dv as in p; contiguous).
Problem first_keys(const Problem &p, std::int64_t n) {
  const Shape &s = p.shape;
  Problem r = p;
  r.shape.Lk = n;
  r.k = Tensor::contiguous(p.dtype(), {s.B, s.Hkv, n, s.D});
  r.v = Tensor::contiguous(p.dtype(), {s.B, s.Hkv, n, s.Dv});
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t h = 0; h < s.Hkv; ++h)
      for (std::int64_t j = 0; j < n; ++j) {
        for (std::int64_t x = 0; x < s.D; ++x) r.k.set({b, h, j, x}, p.k.get({b, h, j, x}));
        for (std::int64_t x = 0; x < s.Dv; ++x) r.v.set({b, h, j, x}, p.v.get({b, h, j, x}));
      }
  return r;
}

}  // namespace

TEST_CASE("scale bugs are listed apart from all_bugs with canonical names and the default contract",
          "[variants][bugs][scale]") {
  const std::vector<Bug> scale = scale_bugs(), all = all_bugs();
  REQUIRE(scale == std::vector<Bug>{Bug::block_counter_8bit, Bug::split_combine_over_two,
                                    Bug::decode_drops_tail_block, Bug::offsets_int32});
  std::set<std::string_view> names{"none"};
  for (Bug b : all) names.insert(bug_name(b));
  for (Bug b : scale) {
    const Variant v = bug_variant(b);
    INFO(v.name());
    REQUIRE(std::find(all.begin(), all.end(), b) == all.end());
    REQUIRE(names.insert(bug_name(b)).second);
    REQUIRE(v.name() == "bug:" + std::string(bug_name(b)));
    REQUIRE(std::string(variant_kernel(v).name) == v.name());
    CHECK(contract_of(v) == KernelContract{});
  }
  CHECK(bug_variant(Bug::block_counter_8bit).key_block == 8);
  CHECK(bug_variant(Bug::split_combine_over_two).key_block == 16);
  CHECK(bug_variant(Bug::decode_drops_tail_block).key_block == 64);
  CHECK(bug_variant(Bug::offsets_int32) == Variant{.bug = Bug::offsets_int32});
  CHECK(kSplitKeys == 1024);
  CHECK(kDecodeLongRow == 4096);
  Variant odd = bug_variant(Bug::split_combine_over_two);
  odd.splits = 3;
  CHECK(odd.name() == "bug:split_combine_over_two/online_b16_split3_f32acc");
}

TEST_CASE("block_counter_8bit gives the bits of its bug-free configuration on rows of up to 2048 keys",
          "[variants][bugs][scale]") {
  const Variant bug = bug_variant(Bug::block_counter_8bit);
  REQUIRE(bug.key_block * 256 == 2048);
  for (const Problem &p : {long_row(3, 2048, kSeed), long_row(1, 2047, kSeed + 1), tail_heavy(2, 2048, 1024)}) {
    INFO(p.shape.describe());
    const Run r = run(variant_kernel(bug), p), want = run(variant_kernel(without_bug(bug)), p);
    REQUIRE(r.fwd.ok());
    REQUIRE(r.bwd.ok());
    CHECK(same_run(r, want));
  }
}

TEST_CASE("block_counter_8bit: past 2048 keys a block reads the keys 2048 before its own", "[variants][bugs][scale]") {
  const Variant bug = bug_variant(Bug::block_counter_8bit);
  for (std::int64_t Lk : {2049, 2560}) {
    const Problem p = tail_heavy(2, Lk, 2048);
    const Run r = run(variant_kernel(bug), p), good = run(variant_kernel(without_bug(bug)), p);
    REQUIRE(r.fwd.ok());
    REQUIRE(r.bwd.ok());
    const double d_out = max_difference(r.out, good.out), d_lse = max_difference(r.lse, good.lse);
    INFO("Lk = " << Lk << ": O differs by " << d_out << ", LSE by " << d_lse);
    CHECK(d_out > 1.0);  // the tail's v ≈ +1 replaced by the head's −1
    CHECK(d_lse > 1.0);
    // Exactly: the bug-free kernel on the keys (and values) of block b mod 256 in place of block b's.
    Problem wrapped = p;
    for (std::int64_t j = 2048; j < Lk; ++j)
      for (std::int64_t x = 0; x < 2; ++x) {
        wrapped.k.set({0, 0, j, x}, p.k.get({0, 0, j - 2048, x}));
        wrapped.v.set({0, 0, j, x}, p.v.get({0, 0, j - 2048, x}));
      }
    CHECK(same_run(r, run(variant_kernel(without_bug(bug)), wrapped)));
  }
}

TEST_CASE("split_combine_over_two gives the bits of one or two bug-free splits on rows of up to 2048 keys",
          "[variants][bugs][scale]") {
  const Variant bug = bug_variant(Bug::split_combine_over_two);
  struct Below {
    Problem p;
    int splits;  // ⌈Lk / 1024⌉
  };
  const std::vector<Below> below = {{long_row(3, 1024, kSeed), 1}, {long_row(2, 1025, kSeed + 1), 2},
                                    {long_row(3, 2048, kSeed + 2), 2}, {tail_heavy(2, 2048, 1024), 2}};
  for (const Below &c : below) {
    Variant want = without_bug(bug);
    want.splits = c.splits;
    INFO(c.p.shape.describe() << " against " << want.name());
    const Run r = run(variant_kernel(bug), c.p), w = run(variant_kernel(want), c.p);
    REQUIRE(r.fwd.ok());
    REQUIRE(r.bwd.ok());
    CHECK(same_run(r, w));
  }
}

TEST_CASE("split_combine_over_two: a third split that carries the weight spoils O and LSE past 2048 keys",
          "[variants][bugs][scale]") {
  const Variant bug = bug_variant(Bug::split_combine_over_two);
  Variant three = without_bug(bug);
  three.splits = 3;
  for (std::int64_t Lk : {2049, 3072}) {
    const std::int64_t tail = 2 * ((Lk + 2) / 3);  // the third split's first key
    const Problem p = tail_heavy(2, Lk, tail);
    Tensor out = make_out(p.shape, Dtype::f32), lse = make_lse(p.shape);
    Tensor good_out = out, good_lse = lse;
    REQUIRE(call_forward(variant_kernel(bug), p, out, &lse).ok());
    REQUIRE(call_forward(variant_kernel(three), p, good_out, &good_lse).ok());
    const double d_out = max_difference(out, good_out), d_lse = max_difference(lse, good_lse);
    INFO("Lk = " << Lk << ": O differs by " << d_out << ", LSE by " << d_lse);
    CHECK(d_out > 10.0);  // the third split weighed e^(LSE₃ − M) ≫ 1 and normalized by the first two alone
    CHECK(d_lse > 1.0);
    CHECK(errors(run(variant_kernel(three), p), exact(p)).max() <= tolerance(three, Dtype::f32));
  }
}

TEST_CASE("decode_drops_tail_block gives the bug-free bits on short rows and prefill calls and whole blocks",
          "[variants][bugs][scale]") {
  const Variant bug = bug_variant(Bug::decode_drops_tail_block);
  // Lq = 1 with Lk ≤ 4096 (a partial block of 63 keys); Lq = 2 past 4096; Lq = 1 past 4096 in whole blocks.
  for (const Problem &p : {long_row(1, 4095, kSeed), tail_heavy(1, 4095, 4032), long_row(2, 4100, kSeed + 1),
                           tail_heavy(2, 4100, 4096), long_row(1, 4160, kSeed + 2)}) {
    INFO(p.shape.describe());
    const Run r = run(variant_kernel(bug), p), want = run(variant_kernel(without_bug(bug)), p);
    REQUIRE(r.fwd.ok());
    REQUIRE(r.bwd.ok());
    CHECK(same_run(r, want));
  }
}

TEST_CASE("decode_drops_tail_block: a decode row of more than 4096 keys loses its partial last block in forward only",
          "[variants][bugs][scale]") {
  const Variant bug = bug_variant(Bug::decode_drops_tail_block), good = without_bug(bug);
  for (std::int64_t Lk : {4097, 4100, 4159}) {
    const Problem p = tail_heavy(1, Lk, 4096);
    const Run r = run(variant_kernel(bug), p), w = run(variant_kernel(good), p);
    REQUIRE(r.fwd.ok());
    const double d_out = max_difference(r.out, w.out), d_lse = max_difference(r.lse, w.lse);
    INFO("Lk = " << Lk << ": O differs by " << d_out << ", LSE by " << d_lse);
    CHECK(d_out > 1.0);
    CHECK(d_lse > 1.0);
    // Exactly the bug-free forward over the first 4096 keys.
    const Problem head = first_keys(p, 4096);
    const Run h = run(variant_kernel(good), head);
    CHECK(same(r.out, h.out));
    CHECK(same(r.lse, h.lse));
    // Backward is correct: given the bug-free forward's results, or none (it recomputes the LSE), it gives the
    // bug-free gradients.
    for (const bool given : {true, false}) {
      Tensor dq = w.dq, dk = w.dk, dv = w.dv;
      dq.fill_storage(kNaN);
      REQUIRE(call_backward(variant_kernel(bug), p, w.out, given ? &w.lse : nullptr, dq, dk, dv).ok());
      INFO((given ? "with the LSE" : "without an LSE"));
      CHECK(same(dq, w.dq));
      CHECK(same(dk, w.dk));
      CHECK(same(dv, w.dv));
    }
  }
}

TEST_CASE("offsets_int32 gives the bug-free bits on ordinary tensors", "[variants][bugs][scale]") {
  const Variant bug = bug_variant(Bug::offsets_int32);
  std::uint32_t seed = kSeed;
  for (Dtype dt : {Dtype::f32, Dtype::bf16})
    for (const Case &c : cases())
      for (Layout layout : {Layout::bhld, Layout::padded}) {
        const Problem p = make_problem(c.shape, c.mask, dt, ++seed, 1, layout);
        INFO(c.what << " " << dtype_name(dt) << " " << layout_name(layout));
        const Run r = run(variant_kernel(bug), p);
        REQUIRE(r.fwd.ok());
        REQUIRE(r.bwd.ok());
        CHECK(same_run(r, run(variant_kernel(Variant{}), p)));
      }
}

namespace {

/// An anonymous private mapping reserved without swap (MAP_NORESERVE): only the pages written are committed.
class SparseMapping {
 public:
  explicit SparseMapping(std::size_t bytes)
      : bytes_(bytes),
        base_(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)) {}
  ~SparseMapping() {
    if (ok()) munmap(base_, bytes_);
  }
  SparseMapping(const SparseMapping &) = delete;
  SparseMapping &operator=(const SparseMapping &) = delete;
  bool ok() const { return base_ != MAP_FAILED; }
  float *floats() const { return static_cast<float *>(base_); }

 private:
  std::size_t bytes_;
  void *base_;
};

/// Writes batch b of the [B, 1, Lk, X] float32 tensor t compactly ([Lk, X]) at `at`.
void put_batch(float *at, const Tensor &t, std::int64_t b) {
  const std::int64_t Lk = t.shape()[2], X = t.shape()[3];
  for (std::int64_t j = 0; j < Lk; ++j)
    for (std::int64_t x = 0; x < X; ++x) at[j * X + x] = static_cast<float>(t.get({b, 0, j, x}));
}

/// Forward then backward of `kernel` on p's q and dout, with k and v read from `kdata` and `vdata` with strides
/// {batch_stride, Lk·X, X, 1}; the results contiguous, pre-filled with NaN.
Run run_strided_kv(const attncheck_kernel &kernel, const Problem &p, float *kdata, float *vdata,
                   std::int64_t batch_stride) {
  const Shape &s = p.shape;
  Run r{make_out(s, Dtype::f32),
        make_lse(s),
        Tensor::contiguous(Dtype::f32, {s.B, s.Hq, s.Lq, s.D}),
        Tensor::contiguous(Dtype::f32, {s.B, s.Hkv, s.Lk, s.D}),
        Tensor::contiguous(Dtype::f32, {s.B, s.Hkv, s.Lk, s.Dv}),
        {},
        {}};
  for (Tensor *t : {&r.out, &r.lse, &r.dq, &r.dk, &r.dv}) t->fill_storage(kNaN);
  std::array<std::int64_t, 4> kstrides{batch_stride, s.Lk * s.D, s.D, 1}, vstrides{batch_stride, s.Lk * s.Dv, s.Dv, 1};
  DLTensor k = p.k.dl(), v = p.v.dl();
  k.data = kdata;
  v.data = vdata;
  k.byte_offset = v.byte_offset = 0;
  k.strides = kstrides.data();
  v.strides = vstrides.data();
  const attncheck_params params = p.params.to_abi();
  const DLTensor q = p.q.dl(), dout = p.dout->dl();
  DLTensor out = r.out.dl(), lse = r.lse.dl(), dq = r.dq.dl(), dk = r.dk.dl(), dv = r.dv.dl();
  r.fwd.status = kernel.forward(&params, &q, &k, &v, &out, &lse);
  r.bwd.status = kernel.backward(&params, &q, &k, &v, &out, &lse, &dout, &dq, &dk, &dv);
  return r;
}

}  // namespace

TEST_CASE("offsets_int32 reads the wrong keys once an element offset exceeds INT32_MAX", "[variants][bugs][scale]") {
  constexpr std::int64_t kTwo31 = std::int64_t{1} << 31;
  const Shape s{2, 1, 1, 3, 5, 4, 4};  // B = 2: batch 1 of k and v one batch stride after batch 0
  const std::int64_t n = s.Lk * s.D;   // floats of one batch of k (and of v: D = Dv)
  const Problem p = make_problem(s, Mask::none, Dtype::f32, kSeed), decoy = make_problem(s, Mask::none, Dtype::f32, 7);
  // k and v in one sparse mapping of 2³² + 2n floats (16 GiB of address space; four pages are written): k's data
  // pointer at float 2³¹, v's n floats later, batch 0 there and batch 1 one batch stride further. Batch stride
  // 2³¹ − n puts batch 1's last element at offset 2³¹ − 1 (still right); 2³¹ puts batch 1 at offsets 2³¹ + r, which
  // an int32 wraps to r − 2³¹: the start of the mapping, where the decoy's batch 1 lies.
  SparseMapping map(static_cast<std::size_t>(2 * kTwo31 + 2 * n) * sizeof(float));
  if (!map.ok()) {
    WARN("no 16 GiB sparse mapping (MAP_NORESERVE refused): the offset wrap past 2^31 is not exercised");
    return;
  }
  float *const kdata = map.floats() + kTwo31, *const vdata = kdata + n;
  put_batch(map.floats(), decoy.k, 1);
  put_batch(map.floats() + n, decoy.v, 1);
  put_batch(kdata, p.k, 0);
  put_batch(vdata, p.v, 0);
  const Variant bug = bug_variant(Bug::offsets_int32);
  const Run plain = run(variant_kernel(Variant{}), p);  // the same problem in ordinary tensors
  for (const std::int64_t stride : {kTwo31 - n, kTwo31}) {
    put_batch(kdata + stride, p.k, 1);
    put_batch(vdata + stride, p.v, 1);
    const Run r = run_strided_kv(variant_kernel(bug), p, kdata, vdata, stride),
              good = run_strided_kv(variant_kernel(Variant{}), p, kdata, vdata, stride);
    INFO("batch stride " << stride);
    REQUIRE(r.fwd.ok());
    REQUIRE(r.bwd.ok());
    REQUIRE(good.fwd.ok());
    REQUIRE(same_run(good, plain));  // the huge layout itself is read right
    if (stride < kTwo31) {
      CHECK(same_run(r, good));
    } else {
      CHECK(max_difference(r.out, good.out) > 0.1);
      // Exactly: batch 1 computed with the decoy's keys and values, batch 0 untouched.
      Problem swapped = p;
      for (std::int64_t j = 0; j < s.Lk; ++j)
        for (std::int64_t x = 0; x < s.D; ++x) {
          swapped.k.set({1, 0, j, x}, decoy.k.get({1, 0, j, x}));
          swapped.v.set({1, 0, j, x}, decoy.v.get({1, 0, j, x}));
        }
      CHECK(same_run(r, run(variant_kernel(Variant{}), swapped)));
    }
  }
}

namespace {
/// A single-key problem per row: LSE_i = s_i1 exactly, so the LSE shows the kernel's logit. q row i has its first
/// element spread over [−spread, spread] (D = 1, k = 1): x_i = scale·q_i.
Problem single_key_rows(double spread, double softcap, Dtype dt) {
  constexpr std::int64_t kRows = 257;
  Problem p = make_problem(Shape{1, 1, 1, kRows, 1, 1, 1}, Mask::none, dt, kSeed);
  for (std::int64_t i = 0; i < kRows; ++i)
    p.q.set({0, 0, i, 0}, spread * (2.0 * static_cast<double>(i) / (kRows - 1) - 1));
  p.k.set({0, 0, 0, 0}, 1.0);
  p.v.set({0, 0, 0, 0}, 1.0);
  p.params.scale = 1;
  p.features.softcap = softcap;
  return p;
}

/// max_i |LSE_i − c·tanh(x_i/c)| relative to c·tanh(x_i/c) (relative) or absolute over c (absolute).
double softcap_error(const Variant &v, const Problem &p, bool relative) {
  Tensor out = Tensor::contiguous(p.dtype(), {1, 1, p.shape.Lq, 1}), lse = Tensor::contiguous(Dtype::f32, {1, 1, p.shape.Lq});
  REQUIRE(call_forward(variant_kernel(v), p, out, &lse).ok());
  const double c = p.features.softcap;
  double worst = 0;
  for (std::int64_t i = 0; i < p.shape.Lq; ++i) {
    const double want = c * std::tanh(p.q.get({0, 0, i, 0}) / c), got = lse.get({0, 0, i});
    if (want == 0) continue;
    worst = std::max(worst, std::fabs(got - want) / (relative ? std::fabs(want) : c));
  }
  return worst;
}
}  // namespace

TEST_CASE("softcap variants compute c·tanh(x/c), and the tanh approximations err up to their stated maxima",
          "[variants][softcap]") {
  const Problem p = single_key_rows(40, 5, Dtype::f32);
  Variant v;
  v.softcap = true;
  CHECK(softcap_error(v, p, true) < 1e-6);  // float tanh: a few ulps
  v.tanh = Tanh::approx;                     // chopped to 12 bits: within 2^-11 relative, and near it
  const double rel = softcap_error(v, p, true);
  CHECK(rel < std::exp2(-11) + 1e-6);
  CHECK(rel > std::exp2(-12));
  v.tanh = Tanh::approx_f16;                 // float16 grid: within 2^-11 absolute on t
  CHECK(softcap_error(v, p, false) < std::exp2(-11) + 1e-6);
  CHECK(softcap_error(v, p, false) > std::exp2(-13));
  v.tanh = Tanh::approx_bf16;                // bfloat16 grid: within 2^-8 absolute on t
  CHECK(softcap_error(v, p, false) < std::exp2(-8) + 1e-6);
  CHECK(softcap_error(v, p, false) > std::exp2(-10));
}

TEST_CASE("a variant without softcap declines every feature, and one with it declines the others", "[variants][softcap]") {
  Problem p = single_key_rows(1, 2, Dtype::f32);
  Tensor out = Tensor::contiguous(Dtype::f32, {1, 1, p.shape.Lq, 1});
  CHECK(call_forward(variant_kernel(Variant{}), p, out, nullptr).status == ATTNCHECK_UNSUPPORTED);
  Variant capped;
  capped.softcap = true;
  CHECK(call_forward(variant_kernel(capped), p, out, nullptr).ok());
  p.features.sinks = {0.5};
  CHECK(call_forward(variant_kernel(capped), p, out, nullptr).status == ATTNCHECK_UNSUPPORTED);
}

TEST_CASE("the softcap bugs: the cap before the scale, and a backward without the chain factor",
          "[variants][softcap][bugs]") {
  REQUIRE(softcap_bugs() == std::vector<Bug>{Bug::softcap_unscaled, Bug::softcap_no_chain});
  const std::vector<Bug> ordinary = all_bugs();
  for (Bug b : softcap_bugs()) {
    const Variant v = bug_variant(b);
    CHECK(v.softcap);
    CHECK(contract_of(v).describe_changes() == "tanh=approx features=softcap");
    CHECK(std::find(ordinary.begin(), ordinary.end(), b) == ordinary.end());
  }
  // Forward: only softcap_unscaled changes the logits (when scale ≠ 1).
  Problem p = single_key_rows(40, 5, Dtype::f32);
  p.params.scale = 0.25;
  Variant good = bug_variant(Bug::softcap_unscaled);
  good.bug = Bug::none;
  Tensor o1 = Tensor::contiguous(Dtype::f32, {1, 1, p.shape.Lq, 1}), l1 = Tensor::contiguous(Dtype::f32, {1, 1, p.shape.Lq});
  Tensor o2 = o1, l2 = l1, l3 = l1;
  REQUIRE(call_forward(variant_kernel(good), p, o1, &l1).ok());
  REQUIRE(call_forward(variant_kernel(bug_variant(Bug::softcap_unscaled)), p, o2, &l2).ok());
  REQUIRE(call_forward(variant_kernel(bug_variant(Bug::softcap_no_chain)), p, o2, &l3).ok());
  CHECK(l1.get({0, 0, 0}) != l2.get({0, 0, 0}));
  CHECK(l1.get({0, 0, 0}) == l3.get({0, 0, 0}));
}

TEST_CASE("the reach bugs are listed apart and wrong only past a group of 8 or a batch of 2",
          "[variants][bugs][reach]") {
  REQUIRE(reach_bugs() == std::vector<Bug>{Bug::gqa_group_past_8, Bug::kv_batch_wraps_2});
  const std::vector<Bug> ordinary = all_bugs();
  std::set<std::string_view> names{"none"};
  for (Bug b : ordinary) names.insert(bug_name(b));
  for (Bug b : reach_bugs()) {
    CHECK(std::find(ordinary.begin(), ordinary.end(), b) == ordinary.end());
    CHECK(names.insert(bug_name(b)).second);
    CHECK(bug_variant(b).name() == "bug:" + std::string(bug_name(b)));
  }
  struct Reach {
    Bug bug;
    Shape quiet, loud;  // correct on `quiet` (the largest shape of the old draws), wrong on `loud`
  };
  const std::vector<Reach> reach = {
      {Bug::gqa_group_past_8, Shape{1, 2 * kGroupTile, 2, 3, 5, 4, 4}, Shape{1, 2 * (kGroupTile + 1), 2, 3, 5, 4, 4}},
      {Bug::gqa_group_past_8, Shape{1, 64, 1, 3, 5, 4, 4}, Shape{1, 128, 2, 3, 5, 4, 4}},  // MQA: one kv head to read
      {Bug::kv_batch_wraps_2, Shape{2, 2, 1, 3, 5, 4, 4}, Shape{3, 2, 1, 3, 5, 4, 4}},
  };
  for (const Reach &x : reach) {
    const Variant v = bug_variant(x.bug);
    INFO(v.name());
    for (const Shape &s : {x.quiet, x.loud}) {
      const Problem p = make_problem(s, Mask::none, Dtype::f32, kSeed);
      const Run r = run(variant_kernel(v), p);
      REQUIRE(r.fwd.ok());
      REQUIRE(r.bwd.ok());
      const Errors err = errors(r, exact(p));
      INFO(s.describe() << ": largest error " << err.max() << ", of out " << err.out);
      if (s == x.quiet) CHECK(err.max() <= tolerance(Variant{}, Dtype::f32));
      else CHECK(err.out > tolerance(Variant{}, Dtype::f32));
    }
  }
}

TEST_CASE("the layout bugs are listed apart and wrong only for an expanded v, an LSE or a dO of its own layout",
          "[variants][bugs][layout]") {
  REQUIRE(layout_bugs() ==
          std::vector<Bug>{Bug::v_zero_stride_as_compact, Bug::lse_assumed_compact, Bug::dout_assumed_compact});
  const std::vector<Bug> ordinary = all_bugs();
  std::set<std::string_view> names{"none"};
  for (Bug b : ordinary) names.insert(bug_name(b));
  for (Bug b : reach_bugs()) names.insert(bug_name(b));
  for (Bug b : layout_bugs()) {
    CHECK(std::find(ordinary.begin(), ordinary.end(), b) == ordinary.end());
    CHECK(names.insert(bug_name(b)).second);
  }
  const Shape s{3, 4, 2, 5, 6, 4, 3};
  const Problem base = make_problem(s, Mask::none, Dtype::f32, kSeed);
  // The same values with v expanded on the batch (v of batch 0 everywhere), or materialized.
  Problem expanded = base, materialized = base;
  expanded.v = Tensor::expanded(Dtype::f32, {s.B, s.Hkv, s.Lk, s.Dv}, Layout::bhld, Broadcast::batch, kPad);
  expanded.v.fill_storage(kNaN);
  for_each_index(expanded.v.shape(), [&](std::span<const std::int64_t> i) {
    expanded.v.set(i, base.v.get({0, i[1], i[2], i[3]}));
  });
  materialized.v = Tensor::with_layout(Dtype::f32, {s.B, s.Hkv, s.Lk, s.Dv}, Layout::bhld);
  materialized.v.assign(expanded.v.to_vector());
  // dO transposed and padded (not compact).
  Problem transposed = base;
  transposed.dout = Tensor::with_layout(Dtype::f32, {s.B, s.Hq, s.Lq, s.Dv}, Layout::transposed, kPad);
  transposed.dout->fill_storage(kNaN);
  transposed.dout->assign(base.dout->to_vector());

  struct Call {
    Bug bug;
    const Problem &p;
    Layout lse;
    bool loud;
  };
  const std::vector<Call> calls = {
      {Bug::v_zero_stride_as_compact, materialized, Layout::bhld, false},
      {Bug::v_zero_stride_as_compact, expanded, Layout::bhld, true},
      {Bug::lse_assumed_compact, base, Layout::bhld, false},
      {Bug::lse_assumed_compact, base, Layout::blhd, true},
      {Bug::lse_assumed_compact, base, Layout::padded, true},
      {Bug::dout_assumed_compact, base, Layout::bhld, false},
      {Bug::dout_assumed_compact, transposed, Layout::bhld, true},
  };
  const double tol = tolerance(Variant{}, Dtype::f32);
  for (const Call &c : calls) {
    INFO(bug_name(c.bug) << ", lse " << layout_name(c.lse) << ", loud " << c.loud);
    const attncheck_kernel k = variant_kernel(bug_variant(c.bug)), ok = variant_kernel(Variant{});
    auto errs = [&](const attncheck_kernel &kernel) {
      Run r = run(kernel, c.p);
      r.lse = Tensor::rows_with_layout(r.lse.dtype(), {s.B, s.Hq, s.Lq}, c.lse, kPad);
      r.lse.fill_storage(kNaN);
      r.fwd = call_forward(kernel, c.p, r.out, &r.lse);
      r.bwd = call_backward(kernel, c.p, r.out, &r.lse, r.dq, r.dk, r.dv);
      REQUIRE(r.fwd.ok());
      REQUIRE(r.bwd.ok());
      return errors(r, exact(c.p));
    };
    CHECK(errs(ok).max() <= tol);  // the correct kernel reads every one of these layouts
    const Errors e = errs(k);
    INFO("largest error " << e.max());
    if (c.loud) CHECK(e.max() > tol);
    else CHECK(e.max() <= tol);
  }
}

TEST_CASE("the history and empty-sequence bugs are listed apart, and the history bugs are right on a first call and "
          "wrong after their history",
          "[variants][bugs][history]") {
  REQUIRE(history_bugs() == std::vector<Bug>{Bug::scale_cached_per_shape, Bug::result_cached_by_address});
  std::set<std::string_view> names{"none"};
  for (const std::vector<Bug> &list : {all_bugs(), reach_bugs(), layout_bugs()})
    for (Bug b : list) names.insert(bug_name(b));
  for (const std::vector<Bug> &list : {history_bugs(), empty_bugs()})
    for (Bug b : list) CHECK(names.insert(bug_name(b)).second);  // every name its own
  CHECK(empty_bugs() == std::vector<Bug>{Bug::empty_kv_unwritten, Bug::empty_q_grads_unwritten});
  const double tol = tolerance(Variant{}, Dtype::f32);
  // A shape no other test uses: its first call sets the cached scale.
  const Shape s{1, 2, 1, 3, 7, 5, 3};
  const Problem p = make_problem(s, Mask::none, Dtype::f32, kSeed);
  const attncheck_kernel &scale_bug = variant_kernel(bug_variant(Bug::scale_cached_per_shape));
  CHECK(errors(run(scale_bug, p), exact(p)).max() <= tol);
  Problem other = p;
  other.params.scale = 2 * p.params.scale;
  CHECK(errors(run(scale_bug, other), exact(other)).out > tol);  // computed at the first call's scale
  // The same buffers with new values: the last result comes back.
  const attncheck_kernel &result_bug = variant_kernel(bug_variant(Bug::result_cached_by_address));
  Problem same = p;
  CHECK(errors(run(result_bug, same), exact(same)).max() <= tol);
  std::vector<double> v = same.v.to_vector();
  for (double &x : v) x = -x;
  same.v.assign(v);
  CHECK(errors(run(result_bug, same), exact(same)).out > tol);
  const Problem moved = same;  // new buffers: computed again
  CHECK(errors(run(result_bug, moved), exact(moved)).out <= tol);
}
