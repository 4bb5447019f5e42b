#include "variant_kernels.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <string_view>
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
  return kTolUnits * std::max(unit_roundoff(v.accumulate), unit_roundoff(storage));
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
  const Case &c = cases()[2];  // causal Lq > Lk
  for (const Variant &v : correct_variants()) {
    const Problem p = make_problem(c.shape, c.mask, Dtype::f32, kSeed);
    const Run r = run(variant_kernel(v), p);
    Tensor dq = r.dq, dk = r.dk, dv = r.dv;
    dq.fill_storage(kNaN);
    REQUIRE(call_backward(variant_kernel(v), p, r.out, nullptr, dq, dk, dv).ok());
    INFO(v.name());
    REQUIRE(dq.to_vector() == r.dq.to_vector());
    REQUIRE(dk.to_vector() == r.dk.to_vector());
    REQUIRE(dv.to_vector() == r.dv.to_vector());
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
