// The features of SPEC.md §2.7 in the spec layer: the contract key, the logical semantics (visibility, biases), and
// the call layer that hands a kernel its ABI 1.2 arguments and the packed and paged layouts.
#include "attncheck/contract.h"
#include "attncheck/features.h"
#include "attncheck/kernel_call.h"
#include "attncheck/problem.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using namespace attncheck;

namespace {
Problem problem(Shape s, Mask m = Mask::none) {
  Problem p;
  p.shape = s;
  p.params.scale = default_scale(s.D);
  p.params.mask = m;
  p.q = Tensor::with_layout(Dtype::f32, {s.B, s.Hq, s.Lq, s.D}, Layout::bhld);
  p.k = Tensor::with_layout(Dtype::f32, {s.B, s.Hkv, s.Lk, s.D}, Layout::bhld);
  p.v = Tensor::with_layout(Dtype::f32, {s.B, s.Hkv, s.Lk, s.Dv}, Layout::bhld);
  // Every element names its own position: q = 1000·b + 100·h + i, k, v = 1000·b + 100·h + j.
  for_each_index(p.q.shape(), [&](std::span<const std::int64_t> x) { p.q.set(x, 1000.0 * x[0] + 100.0 * x[1] + x[2]); });
  for_each_index(p.k.shape(), [&](std::span<const std::int64_t> x) { p.k.set(x, 1000.0 * x[0] + 100.0 * x[1] + x[2]); });
  for_each_index(p.v.shape(), [&](std::span<const std::int64_t> x) { p.v.set(x, 1000.0 * x[0] + 100.0 * x[1] + x[2]); });
  return p;
}

/// What the echo kernel saw: its params, args and the tensors it was given.
struct Seen {
  attncheck_params params{};
  attncheck_args args{};
  std::vector<std::int64_t> q_shape, k_shape, out_shape;
  std::vector<float> k_rows;  ///< k[n, 0, r, 0] for every page n and row r (paged), or k[0, 0, r, 0] (varlen)
} seen;

/// Element (i0, i1, i2, i3) of a float32 tensor, or the bits of a uint8 one (FP8 inputs).
float at(const DLTensor *t, std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3) {
  const std::int64_t off = i0 * t->strides[0] + i1 * t->strides[1] + i2 * t->strides[2] + i3 * t->strides[3];
  const char *base = static_cast<const char *>(t->data) + t->byte_offset;
  if (t->dtype.bits == 8) return static_cast<float>(static_cast<unsigned char>(base[off]));  // ASan: not 4 bytes
  float f;
  std::memcpy(&f, base + off * 4, 4);
  return f;
}

/// Records what it is given and writes out[..., r, c] = q[..., r, 0] (so unpacking can be checked), lse = r, and a
/// dropout mask of all ones.
int echo_forward(const attncheck_params *p, const DLTensor *q, const DLTensor *k, const DLTensor *, DLTensor *out,
                 DLTensor *lse) {
  seen.params = *p;
  if (p->args) seen.args = *p->args;
  seen.q_shape.assign(q->shape, q->shape + 4);
  seen.k_shape.assign(k->shape, k->shape + 4);
  seen.out_shape.assign(out->shape, out->shape + 4);
  seen.k_rows.clear();
  for (std::int64_t n = 0; n < k->shape[0]; ++n)
    for (std::int64_t r = 0; r < k->shape[2]; ++r) seen.k_rows.push_back(at(k, n, 0, r, 0));
  for (std::int64_t h = 0; h < out->shape[1]; ++h)
    for (std::int64_t r = 0; r < out->shape[2]; ++r)
      for (std::int64_t c = 0; c < out->shape[3]; ++c) {
        const float x = at(q, 0, h, r, 0);
        const std::int64_t off = h * out->strides[1] + r * out->strides[2] + c * out->strides[3];
        std::memcpy(static_cast<char *>(out->data) + out->byte_offset + off * 4, &x, 4);
        if (lse && c == 0) {
          const float l = static_cast<float>(r);
          const std::int64_t lo = h * lse->strides[1] + r * lse->strides[2];
          std::memcpy(static_cast<char *>(lse->data) + lse->byte_offset + lo * 4, &l, 4);
        }
      }
  if (p->args && p->args->dropout_mask) {
    const DLTensor *m = p->args->dropout_mask;
    std::int64_t n = 1;
    for (int d = 0; d < m->ndim; ++d) n *= m->shape[d];
    std::memset(m->data, 1, static_cast<std::size_t>(n));
  }
  return ATTNCHECK_OK;
}
const attncheck_kernel kEcho{ATTNCHECK_ABI_VERSION, "echo", echo_forward, nullptr, nullptr};
}  // namespace

TEST_CASE("the features contract key parses names joined by plus and describes them back", "[features]") {
  const KernelContract c = parse_contract("features=window+softcap+paged causal=top-left");
  CHECK(c.features == (ATTNCHECK_FEATURE_WINDOW | ATTNCHECK_FEATURE_SOFTCAP | ATTNCHECK_FEATURE_PAGED));
  CHECK(parse_contract(c.describe()) == c);
  CHECK(c.describe_changes() == "causal=top-left features=window+softcap+paged");
  CHECK(KernelContract{}.describe_changes() == "defaults");
  CHECK(parse_contract("features=none").features == 0);
  CHECK_THROWS_WITH(parse_contract("features=window+flash"), Catch::Contains("unknown feature 'flash'"));
}

TEST_CASE("a window bounds each side around the aligned row and combines with causal", "[features]") {
  Features f;
  f.window_left = 2;
  f.window_right = 1;
  const std::int64_t Lq = 3, Lk = 6;  // bottom-right: row i aligned to key i + 3
  auto visible_keys = [&](Mask m, std::int64_t i) {
    std::vector<std::int64_t> keys;
    const RowFrame fr = row_frame(f, m, 0, i, Lq, Lk);
    for (std::int64_t j = 0; j < Lk; ++j)
      if (sees(f, m, fr, Lq, Lk, 0, 0, i, j)) keys.push_back(j);
    return keys;
  };
  CHECK(visible_keys(Mask::none, 0) == std::vector<std::int64_t>{1, 2, 3, 4});
  CHECK(visible_keys(Mask::causal, 0) == std::vector<std::int64_t>{1, 2, 3});
  CHECK(visible_keys(Mask::causal_top_left, 1) == std::vector<std::int64_t>{0, 1});
  CHECK(visible_keys(Mask::none, 2) == std::vector<std::int64_t>{3, 4, 5});
}

TEST_CASE("ALiBi biases by distance from the aligned row and the additive mask adds", "[features]") {
  Features f;
  f.alibi_slopes = {0.5, 0.25};
  f.mask_kind = MaskKind::additive;
  f.mask_B = 1;
  f.mask_H = 1;
  f.mask = {-1, 0, -std::numeric_limits<double>::infinity(), 2};  // [1,1,Lq=2,Lk=2]
  const RowFrame fr = row_frame(f, Mask::none, 0, 0, 2, 2);          // aligned to key 0
  CHECK(logit_bias(f, fr, 2, 2, 0, 1, 0, 1) == -0.25);
  CHECK(logit_bias(f, fr, 2, 2, 0, 0, 0, 0) == -1);
  CHECK_FALSE(sees(f, Mask::none, row_frame(f, Mask::none, 0, 1, 2, 2), 2, 2, 0, 0, 1, 0));
  CHECK(f.bits() == (ATTNCHECK_FEATURE_ALIBI | ATTNCHECK_FEATURE_MASK));
}

TEST_CASE("a plain call sends no features and a feature call sends its args", "[features]") {
  Problem p = problem({.Lq = 2, .Lk = 3, .D = 1, .Dv = 1});
  Tensor out = make_out(p.shape, Dtype::f32), lse = make_lse(p.shape);
  REQUIRE(call_forward(kEcho, p, out, &lse).ok());
  CHECK(seen.params.features == 0);
  CHECK(seen.params.args == nullptr);
  p.features.window_left = 1;
  p.features.softcap = 30;
  p.features.sinks = {-2};
  REQUIRE(call_forward(kEcho, p, out, &lse).ok());
  CHECK(seen.params.features == (ATTNCHECK_FEATURE_WINDOW | ATTNCHECK_FEATURE_SOFTCAP | ATTNCHECK_FEATURE_SINKS));
  CHECK(seen.args.size == sizeof(attncheck_args));
  CHECK(seen.args.window_left == 1);
  CHECK(seen.args.window_right == -1);
  CHECK(seen.args.softcap == 30.0f);
}

TEST_CASE("varlen packs each sequence's rows and keys and unpacks the outputs", "[features]") {
  // Sequences of 2 and 0 query rows (an empty one), 3 and 1 keys.
  Problem p = problem({.B = 2, .Lq = 2, .Lk = 3, .D = 1, .Dv = 2});
  p.features.storage = KvStorage::varlen;
  p.features.seqlens_q = {2, 0};
  p.features.seqlens_k = {3, 1};
  Tensor out = make_out(p.shape, Dtype::f32), lse = make_lse(p.shape);
  REQUIRE(call_forward(kEcho, p, out, &lse).ok());
  CHECK(seen.q_shape == std::vector<std::int64_t>{1, 1, 2, 1});
  CHECK(seen.k_shape == std::vector<std::int64_t>{1, 1, 4, 1});
  CHECK(seen.k_rows == std::vector<float>{0, 1, 2, 1000});  // keys 0..2 of b = 0, then key 0 of b = 1
  CHECK(seen.args.max_seqlen_q == 2);
  // Unpacked: b = 0's rows hold q's first column; b = 1 has no rows (O = 0, LSE = −∞).
  CHECK(out.get({0, 0, 1, 1}) == 1);
  CHECK(out.get({1, 0, 0, 0}) == 0);
  CHECK(lse.get({1, 0, 1}) == -std::numeric_limits<double>::infinity());
  CHECK(lse.get({0, 0, 1}) == 1);
}

TEST_CASE("a paged cache puts key j at its block table's page and leaves the rest NaN", "[features]") {
  Problem p = problem({.B = 1, .Lq = 1, .Lk = 5, .D = 1, .Dv = 1});
  p.features.storage = KvStorage::paged;
  p.features.page_size = 2;
  p.features.pages_per_seq = 3;
  p.features.num_pages = 4;
  p.features.block_table = {3, 0, 2};  // page 1 unused
  p.features.seqlens_k = {5};
  Tensor out = make_out(p.shape, Dtype::f32), lse = make_lse(p.shape);
  REQUIRE(call_forward(kEcho, p, out, &lse).ok());
  CHECK(seen.k_shape == std::vector<std::int64_t>{4, 1, 2, 1});
  // Pages 0..3, two rows each: page 3 holds keys 0, 1; page 0 keys 2, 3; page 2 key 4 and NaN; page 1 NaN.
  REQUIRE(seen.k_rows.size() == 8);
  CHECK(seen.k_rows[0] == 2);
  CHECK(seen.k_rows[1] == 3);
  CHECK(std::isnan(seen.k_rows[2]));
  CHECK(std::isnan(seen.k_rows[3]));
  CHECK(seen.k_rows[4] == 4);
  CHECK(std::isnan(seen.k_rows[5]));
  CHECK(seen.k_rows[6] == 0);
  CHECK(seen.k_rows[7] == 1);
  CHECK(seen.args.page_size == 2);
}

TEST_CASE("the dropout mask the kernel writes comes back to the caller", "[features]") {
  Problem p = problem({.Lq = 2, .Lk = 3, .D = 1, .Dv = 1});
  p.features.dropout_p = 0.5;
  p.features.dropout_seed = 7;
  Tensor out = make_out(p.shape, Dtype::f32), lse = make_lse(p.shape);
  std::vector<std::uint8_t> keep;
  REQUIRE(call_forward(kEcho, p, out, &lse, &keep).ok());
  CHECK(seen.args.dropout_seed == 7);
  CHECK(keep == std::vector<std::uint8_t>(6, 1));
}

TEST_CASE("every float8 code decodes exactly and encodes back to itself in both formats", "[features][fp8]") {
  for (Fp8 f : {Fp8::e4m3fn, Fp8::e5m2})
    for (int code = 0; code < 256; ++code) {
      const auto bits = static_cast<std::uint8_t>(code);
      const double x = fp8_to_double(bits, f);
      INFO(fp8_name(f) << " code " << code << " = " << x);
      if (std::isnan(x)) continue;
      CHECK(double_to_fp8(x, f) == bits);
    }
  CHECK(fp8_to_double(0x7e, Fp8::e4m3fn) == 448);
  CHECK(std::isnan(fp8_to_double(0x7f, Fp8::e4m3fn)));
  CHECK(fp8_to_double(0x7b, Fp8::e5m2) == 57344);
  CHECK(std::isinf(fp8_to_double(0x7c, Fp8::e5m2)));
  CHECK(fp8_to_double(0x01, Fp8::e4m3fn) == 0x1p-9);  // the smallest subnormals
  CHECK(fp8_to_double(0x01, Fp8::e5m2) == 0x1p-16);
}

TEST_CASE("float8 rounds to nearest even and overflows to NaN in e4m3fn and to infinity in e5m2", "[features][fp8]") {
  CHECK(round_to_fp8(Fp8::e4m3fn, 1.0625) == 1.0);    // halfway between 1 and 1.125: even
  CHECK(round_to_fp8(Fp8::e4m3fn, 1.1875) == 1.25);   // halfway between 1.125 and 1.25: even
  CHECK(round_to_fp8(Fp8::e4m3fn, 464) == 448);       // 448 + half an ulp: the tie goes to 448's even mantissa
  CHECK(std::isnan(round_to_fp8(Fp8::e4m3fn, 465)));  // past it: 480 is NaN's code, and e4m3fn has no infinity
  CHECK(round_to_fp8(Fp8::e5m2, 61439) == 57344);
  CHECK(std::isinf(round_to_fp8(Fp8::e5m2, 61440)));  // the tie goes to 2^16's even mantissa: infinity
  CHECK(round_to_fp8(Fp8::e4m3fn, 0x1p-10) == 0);     // half the smallest subnormal: ties to even (0)
  CHECK(round_to_fp8(Fp8::e4m3fn, -0x1.8p-9) == -0x1p-8);
  CHECK(std::signbit(round_to_fp8(Fp8::e5m2, -0.0)));
}

TEST_CASE("FP8 inputs reach the kernel as float8 bits with the descales in the args", "[features][fp8]") {
  Problem p = problem({.Lq = 1, .Lk = 2, .D = 1, .Dv = 1});
  p.q.set({0, 0, 0, 0}, 1.5);
  p.features.fp8 = Fp8::e4m3fn;
  p.features.descale_q = 0.25;
  p.features.descale_k = 2;
  p.features.descale_v = 0.5;
  Tensor out = make_out(p.shape, Dtype::f32), lse = make_lse(p.shape);
  REQUIRE(call_forward(kEcho, p, out, &lse).ok());
  CHECK(seen.params.features == ATTNCHECK_FEATURE_FP8);
  CHECK(seen.args.fp8_format == 0);
  CHECK(seen.args.descale_q == 0.25f);
  CHECK(seen.args.descale_v == 0.5f);
  // The echo kernel reads q as float32: the first byte is the float8 code of 1.5 (0x3c), not a float.
  CHECK(seen.q_shape == std::vector<std::int64_t>{1, 1, 1, 1});
  Tensor dq = make_out(p.shape, Dtype::f32), dk = p.k, dv = p.v;
  CHECK(call_backward(kEcho, p, out, &lse, dq, dk, dv).status == ATTNCHECK_UNSUPPORTED);
}
