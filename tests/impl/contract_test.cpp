// The ABI contract of the bundled kernels beyond accuracy: rows without keys, optional lse, NULL strides,
// refusals with messages, independence from what the outputs held, untouched inputs and padding, determinism.
#include "impl_support.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>

using namespace implt;

namespace {
/// (kernel, dtype) pairs the bundled kernels support.
struct Config {
  const char *name;
  Dtype dtype;
};
constexpr Config kConfigs[] = {{"naive", Dtype::f32}, {"flash", Dtype::f32}, {"flash", Dtype::f16},
                               {"flash", Dtype::bf16}};

std::vector<std::byte> bytes_of(const Tensor &t) { return {t.bytes().begin(), t.bytes().end()}; }
bool same_bytes(const Tensor &a, const Tensor &b) {
  return a.bytes().size() == b.bytes().size() && std::memcmp(a.bytes().data(), b.bytes().data(), a.bytes().size()) == 0;
}
/// Elements equal bit for bit (as widened doubles: −0 ≠ +0 is not distinguished, NaN never equal).
bool same_values(const Tensor &a, const Tensor &b) { return a.to_vector() == b.to_vector(); }

Problem small_problem(std::uint64_t seed, Dtype dt, Shape s, Mask mask) {
  std::mt19937_64 rng(seed);
  return make_problem(rng, dt, s, mask, default_scale(s.D));
}
}  // namespace

TEST_CASE("rows that see no key give exactly zero output, minus infinity lse and zero gradients", "[impl]") {
  // Causal with Lq > Lk: the first Lq − Lk rows see nothing — here whole query blocks of flash and part of one.
  const Shape shapes[] = {{1, 2, 1, 5, 2, 8, 3}, {2, 4, 2, 130, 3, 16, 24}};
  for (const Config &c : kConfigs)
    for (const Shape &s : shapes) {
      INFO(c.name << " " << dtype_name(c.dtype) << " " << s.describe());
      const Problem p = small_problem(7, c.dtype, s, Mask::causal);
      std::mt19937_64 rng(8);
      Outputs o(rng, p);
      REQUIRE(run(kernel(c.name), p, o).ok());
      for (std::int64_t b = 0; b < s.B; ++b)
        for (std::int64_t h = 0; h < s.Hq; ++h)
          for (std::int64_t i = 0; i < s.Lq; ++i) {
            const bool empty = visible_count(Mask::causal, i, s.Lq, s.Lk) == 0;
            const double lse = o.lse.get({b, h, i});
            REQUIRE(std::isfinite(lse) != empty);
            if (empty) REQUIRE(lse == -std::numeric_limits<double>::infinity());
            for (std::int64_t x = 0; x < s.Dv; ++x) {
              REQUIRE_FALSE(std::isnan(o.out.get({b, h, i, x})));
              if (empty) REQUIRE(o.out.get({b, h, i, x}) == 0.0);
            }
            for (std::int64_t x = 0; x < s.D; ++x) {
              REQUIRE_FALSE(std::isnan(o.dq.get({b, h, i, x})));
              if (empty) REQUIRE(o.dq.get({b, h, i, x}) == 0.0);
            }
          }
      for (const Tensor *t : {&o.dk, &o.dv})
        for (double x : t->to_vector()) REQUIRE(std::isfinite(x));
    }
}

TEST_CASE("forward without lse writes the same output", "[impl]") {
  for (const Config &c : kConfigs) {
    INFO(c.name << " " << dtype_name(c.dtype));
    const Problem p = small_problem(11, c.dtype, {2, 4, 2, 70, 33, 24, 40}, Mask::causal);
    Tensor with = make_out(p.shape, c.dtype), without = make_out(p.shape, c.dtype), lse = make_lse(p.shape);
    REQUIRE(call_forward(kernel(c.name), p, with, &lse).ok());
    REQUIRE(call_forward(kernel(c.name), p, without, nullptr).ok());
    REQUIRE(same_bytes(with, without));
  }
}

TEST_CASE("NULL strides mean compact row-major", "[impl]") {
  for (const Config &c : kConfigs) {
    INFO(c.name << " " << dtype_name(c.dtype));
    const Shape s{1, 2, 1, 65, 66, 8, 5};
    std::mt19937_64 rng(12);
    Problem p;
    p.shape = s;
    p.params = Params{default_scale(s.D), Mask::none};
    p.q = Tensor::contiguous(c.dtype, {s.B, s.Hq, s.Lq, s.D});
    p.k = Tensor::contiguous(c.dtype, {s.B, s.Hkv, s.Lk, s.D});
    p.v = Tensor::contiguous(c.dtype, {s.B, s.Hkv, s.Lk, s.Dv});
    p.dout = Tensor::contiguous(c.dtype, {s.B, s.Hq, s.Lq, s.Dv});
    for (Tensor *t : {&p.q, &p.k, &p.v, &*p.dout}) fill_normal(rng, *t);
    Tensor out = make_out(s, c.dtype), lse = make_lse(s), out2 = out, lse2 = lse;
    Tensor dq = Tensor::contiguous(c.dtype, {s.B, s.Hq, s.Lq, s.D});
    Tensor dk = Tensor::contiguous(c.dtype, {s.B, s.Hkv, s.Lk, s.D});
    Tensor dv = Tensor::contiguous(c.dtype, {s.B, s.Hkv, s.Lk, s.Dv});
    Tensor dq2 = dq, dk2 = dk, dv2 = dv;
    const attncheck_kernel &k = kernel(c.name);
    REQUIRE(call_forward(k, p, out, &lse).ok());
    REQUIRE(call_backward(k, p, out, &lse, dq, dk, dv).ok());

    // The same call with every strides pointer NULL.
    const attncheck_params params = p.params.to_abi();
    auto bare = [](DLTensor t) {
      t.strides = nullptr;
      return t;
    };
    const DLTensor q = bare(p.q.dl()), kk = bare(p.k.dl()), v = bare(p.v.dl()), dout = bare(p.dout->dl());
    DLTensor o = bare(out2.dl()), l = bare(lse2.dl()), gq = bare(dq2.dl()), gk = bare(dk2.dl()), gv = bare(dv2.dl());
    REQUIRE(k.forward(&params, &q, &kk, &v, &o, &l) == ATTNCHECK_OK);
    REQUIRE(k.backward(&params, &q, &kk, &v, &o, &l, &dout, &gq, &gk, &gv) == ATTNCHECK_OK);
    REQUIRE(same_bytes(out, out2));
    REQUIRE(same_bytes(lse, lse2));
    REQUIRE(same_bytes(dq, dq2));
    REQUIRE(same_bytes(dk, dk2));
    REQUIRE(same_bytes(dv, dv2));
  }
}

TEST_CASE("bad shapes, dtypes and devices are refused with ATTNCHECK_ERROR and a message", "[impl]") {
  const Shape s{1, 4, 2, 5, 7, 8, 6};
  for (const char *name : {"naive", "flash"}) {
    const attncheck_kernel &k = kernel(name);
    const Problem p = small_problem(13, Dtype::f32, s, Mask::none);
    Tensor out = make_out(s, Dtype::f32), lse = make_lse(s);
    Tensor dq = Tensor::contiguous(Dtype::f32, {s.B, s.Hq, s.Lq, s.D});
    Tensor dk = Tensor::contiguous(Dtype::f32, {s.B, s.Hkv, s.Lk, s.D});
    Tensor dv = Tensor::contiguous(Dtype::f32, {s.B, s.Hkv, s.Lk, s.Dv});
    REQUIRE(call_forward(k, p, out, &lse).ok());

    const attncheck_params params = p.params.to_abi();
    const DLTensor q0 = p.q.dl(), k0 = p.k.dl(), v0 = p.v.dl(), dout0 = p.dout->dl();
    const DLTensor o0 = out.dl(), l0 = lse.dl(), gq0 = dq.dl(), gk0 = dk.dl(), gv0 = dv.dl();
    // Calls forward and backward with one tensor replaced; both must refuse with a message containing `what`.
    auto refused = [&](const char *which, DLTensor bad, const char *what) {
      const int want = ATTNCHECK_ERROR;
      INFO(name << ": bad " << which << ", expecting a message with \"" << what << "\"");
      auto sub = [&](const char *n, const DLTensor &t) { return std::strcmp(which, n) == 0 ? bad : t; };
      const DLTensor q = sub("q", q0), kk = sub("k", k0), v = sub("v", v0), dout = sub("dout", dout0);
      DLTensor o = sub("out", o0), l = sub("lse", l0), gq = sub("dq", gq0), gk = sub("dk", gk0), gv = sub("dv", gv0);
      // Forward has no dout, dq, dk, dv.
      const bool forward_too = which[0] != 'd';
      if (forward_too) {
        CHECK(k.forward(&params, &q, &kk, &v, &o, &l) == want);
        CHECK_THAT(std::string(k.last_error()), Catch::Contains(what));
      }
      CHECK(k.backward(&params, &q, &kk, &v, &o, &l, &dout, &gq, &gk, &gv) == want);
      CHECK_THAT(std::string(k.last_error()), Catch::Contains(what));
    };
    std::int64_t wrong_d[4] = {s.B, s.Hkv, s.Lk, s.D + 1};
    DLTensor t = k0;
    t.shape = wrong_d;
    refused("k", t, "head dims differ");
    std::int64_t wrong_out[4] = {s.B, s.Hq, s.Lq + 1, s.Dv};
    t = o0;
    t.shape = wrong_out;
    refused("out", t, "out must have shape");
    t = o0;
    t.dtype = to_dlpack(Dtype::f16);
    refused("out", t, "dtype");
    t = q0;
    t.dtype = DLDataType{kDLFloat, 64, 1};
    refused("q", t, "float32, float16 and bfloat16");
    t = l0;
    t.dtype = to_dlpack(Dtype::f16);
    refused("lse", t, "lse must be float32");
    std::int64_t wrong_lse[3] = {s.B, s.Hq + 1, s.Lq};
    t = l0;
    t.shape = wrong_lse;
    refused("lse", t, "lse must be float32 [B,Hq,Lq]");
    t = v0;
    t.device = DLDevice{kDLCUDA, 0};
    refused("v", t, "kDLCPU");
    std::int64_t wrong_heads[4] = {s.B, 3, s.Lk, s.D};
    t = k0;
    t.shape = wrong_heads;
    refused("k", t, "kv heads differ");
    std::int64_t wrong_dq[4] = {s.B, s.Hq, s.Lq, s.D + 2};
    t = gq0;
    t.shape = wrong_dq;
    refused("dq", t, "dq must have shape");
    t = gk0;
    t.dtype = to_dlpack(Dtype::bf16);
    refused("dk", t, "dtype");
    std::int64_t wrong_dout[4] = {s.B, s.Hq, s.Lq, s.Dv + 1};
    t = dout0;
    t.shape = wrong_dout;
    refused("dout", t, "dout must have shape");

    // Backward needs the forward's lse.
    {
      const DLTensor q = q0, kk = k0, v = v0, dout = dout0;
      DLTensor o = o0, gq = gq0, gk = gk0, gv = gv0;
      CHECK(k.backward(&params, &q, &kk, &v, &o, nullptr, &dout, &gq, &gk, &gv) == ATTNCHECK_ERROR);
      CHECK_THAT(std::string(k.last_error()), Catch::Contains("lse"));
      // An unknown mask is unsupported, not an error.
      const attncheck_params odd{params.scale, 7, 0, nullptr};
      DLTensor l = l0;
      CHECK(k.forward(&odd, &q, &kk, &v, &o, &l) == ATTNCHECK_UNSUPPORTED);
      CHECK_THAT(std::string(k.last_error()), Catch::Contains("mask"));
    }
  }
  // naive is float32 only.
  const Problem p = small_problem(14, Dtype::f16, s, Mask::none);
  Tensor out = make_out(s, Dtype::f16), lse = make_lse(s);
  const CallResult r = call_forward(kernel("naive"), p, out, &lse);
  CHECK(r.status == ATTNCHECK_UNSUPPORTED);
  CHECK_THAT(r.message, Catch::Contains("float32 only"));
}

TEST_CASE("what the outputs held before makes no difference and their padding is not written", "[impl]") {
  for (const Config &c : kConfigs) {
    INFO(c.name << " " << dtype_name(c.dtype));
    const Problem p = small_problem(15, c.dtype, {2, 2, 1, 67, 65, 9, 17}, Mask::causal);
    std::mt19937_64 rng_a(16), rng_b(16);  // the same layouts for both runs
    Outputs a(rng_a, p), b(rng_b, p);
    constexpr double kFill = -96.0;  // exact in every dtype; a plausible value, unlike NaN
    for (Tensor *t : {&b.out, &b.lse, &b.dq, &b.dk, &b.dv}) t->fill_storage(kFill);
    REQUIRE(run(kernel(c.name), p, a).ok());
    REQUIRE(run(kernel(c.name), p, b).ok());
    REQUIRE(same_values(a.out, b.out));
    REQUIRE(same_values(a.lse, b.lse));
    REQUIRE(same_values(a.dq, b.dq));
    REQUIRE(same_values(a.dk, b.dk));
    REQUIRE(same_values(a.dv, b.dv));
    for (const Tensor *t : {&b.out, &b.lse, &b.dq, &b.dk, &b.dv}) {
      const auto elem = t->element_mask();
      for (std::int64_t i = 0; i < t->storage_elems(); ++i)
        if (!elem[static_cast<std::size_t>(i)]) REQUIRE(t->get_storage(i) == kFill);
    }
  }
}

TEST_CASE("inputs are never modified", "[impl]") {
  for (const Config &c : kConfigs) {
    INFO(c.name << " " << dtype_name(c.dtype));
    const Problem p = small_problem(17, c.dtype, {1, 4, 2, 66, 129, 12, 7}, Mask::none);
    std::mt19937_64 rng(18);
    Outputs o(rng, p);
    const auto q = bytes_of(p.q), k = bytes_of(p.k), v = bytes_of(p.v), dout = bytes_of(*p.dout);
    REQUIRE(call_forward(kernel(c.name), p, o.out, &o.lse).ok());
    const auto out = bytes_of(o.out), lse = bytes_of(o.lse);
    REQUIRE(call_backward(kernel(c.name), p, o.out, &o.lse, o.dq, o.dk, o.dv).ok());
    CHECK(bytes_of(p.q) == q);
    CHECK(bytes_of(p.k) == k);
    CHECK(bytes_of(p.v) == v);
    CHECK(bytes_of(*p.dout) == dout);
    CHECK(bytes_of(o.out) == out);  // out and lse are backward's inputs
    CHECK(bytes_of(o.lse) == lse);
  }
}

TEST_CASE("flash gives the same bits with any number of threads", "[impl][flash]") {
  for (Dtype dt : {Dtype::f32, Dtype::bf16}) {
    const Problem p = small_problem(19, dt, {2, 4, 2, 200, 150, 32, 24}, Mask::causal);
    auto run_with = [&](int threads) {
      attncheck_builtin_set_threads(threads);
      std::mt19937_64 rng(20);
      Outputs o(rng, p);
      REQUIRE(run(kernel("flash"), p, o).ok());
      return o;
    };
    const Outputs one = run_with(1), three = run_with(3), eight = run_with(8);
    ::setenv("ATTNCHECK_THREADS", "2", 1);
    const Outputs from_env = run_with(0);
    ::unsetenv("ATTNCHECK_THREADS");
    for (const Outputs *o : {&three, &eight, &from_env}) {
      CHECK(same_bytes(one.out, o->out));
      CHECK(same_bytes(one.lse, o->lse));
      CHECK(same_bytes(one.dq, o->dq));
      CHECK(same_bytes(one.dk, o->dk));
      CHECK(same_bytes(one.dv, o->dv));
    }
  }
  attncheck_builtin_set_threads(0);
}
