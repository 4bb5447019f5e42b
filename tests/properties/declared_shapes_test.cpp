// The engine's declared-shapes phase (CheckOptions::shapes): a bug that lives only at a production shape the search
// never draws is caught on the shape and shrunk; correct kernels pass every shape; a property that cannot take a
// shape says why; the phase is part of the plan, and its counterexample replays.
#include "attncheck/check.h"
#include "feature_support.h"
#include "property_support.h"

#include <catch2/catch.hpp>

using namespace attncheck;
using namespace attncheck::test;
using support::Bug;

namespace {
/// A decode call of a GQA model past 4,096 keys (Lk % 64 ≠ 0): where Bug::decode_drops_tail_block lives.
DeclaredShape long_decode() {
  return {.name = "decode",
          .shape = {.B = 1, .Hq = 8, .Hkv = 2, .Lq = 1, .Lk = support::kDecodeLongRow + 37, .D = 64, .Dv = 64}};
}
/// A prefill with a sliding window.
DeclaredShape windowed_prefill() {
  return {.name = "local prefill",
          .shape = {.B = 2, .Hq = 6, .Hkv = 3, .Lq = 80, .Lk = 80, .D = 40, .Dv = 40},
          .causal = true,
          .features = ATTNCHECK_FEATURE_WINDOW,
          .window_left = 31,
          .window_right = 0};
}
CheckOptions with_shapes(std::vector<DeclaredShape> shapes, CheckOptions o = options()) {
  o.shapes = std::move(shapes);
  return o;
}
constexpr int kFewCases = 20;
/// A short check of `properties`: the shapes are what these tests are about.
CheckOptions few(std::vector<std::string> properties, CheckOptions o = options()) {
  o.properties = std::move(properties);
  o.cases = kFewCases;
  return o;
}
}  // namespace

TEST_CASE("declared shapes: a bug only past 4,096 keys in a decode call is missed by the search and caught on the "
          "shape, shrunk") {
  const RunReport searched = check_property(bug(Bug::decode_drops_tail_block), "accuracy", options());
  INFO(searched.text());
  CHECK(searched.verdict() == Verdict::pass);
  const RunReport r = check_property(bug(Bug::decode_drops_tail_block), "accuracy", with_shapes({long_decode()}));
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const PropertyReport &p = r.properties[0];
  REQUIRE(p.shapes.size() == 1);
  CHECK(p.shapes[0].verdict == Verdict::fail);
  CHECK(p.shapes[0].ratio > 1);
  CHECK(p.note.find("found on declared shape decode") != std::string::npos);
  const Shape m = p.counterexample->minimal.spec.shape;
  CHECK(p.counterexample->original.shape == long_decode().shape);
  CHECK(m.Lk > support::kDecodeLongRow);  // what the bug needs stays; the rest shrinks
  CHECK(m.B * m.Hq * m.Lq * m.Lk * m.D < long_decode().shape.work() / 8);
}

TEST_CASE("declared shapes: a declared shape's counterexample replays from its reproduce string") {
  const RunReport r = check_property(bug(Bug::decode_drops_tail_block), "accuracy", with_shapes({long_decode()}));
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *r.properties[0].counterexample;
  CheckOptions again = with_shapes({long_decode()});
  again.reproduce = c.reproduce;
  const RunReport back = check_property(bug(Bug::decode_drops_tail_block), "accuracy", again);
  INFO(back.text());
  REQUIRE(back.verdict() == Verdict::fail);
  CHECK(back.properties[0].note.find("reproduced") != std::string::npos);
  CHECK(back.properties[0].counterexample->minimal.same_as(c.minimal));
  again.shapes.clear();  // the reproduce string needs the shapes it was found with
  CHECK_THROWS_WITH(check_property(bug(Bug::decode_drops_tail_block), "accuracy", again),
                    Catch::Contains("give it the same shapes"));
}

namespace {
/// Every shape of `r` passes `ids` (each ran it: the kernel took it).
void every_shape_passes(const RunReport &r, std::initializer_list<std::string_view> ids, std::size_t shapes) {
  INFO(r.text());
  CHECK(r.verdict() == Verdict::pass);
  for (const std::string_view id : ids) {
    const PropertyReport *p = r.find(id);
    REQUIRE(p != nullptr);
    REQUIRE(p->shapes.size() == shapes);
    for (const ShapeRun &s : p->shapes) {
      INFO(id << " " << s.shape << ": " << s.note);
      CHECK(s.verdict == Verdict::pass);
      CHECK(s.ratio <= 1);
    }
  }
}
}  // namespace

TEST_CASE("declared shapes: correct kernels of every summation order pass a long decode shape") {
  for (const support::Variant &v : summation_orders())
    every_shape_passes(check(support::variant_kernel(v), with_shapes({long_decode()}, few({"accuracy", "lse"}))),
                       {"accuracy", "lse"}, 1);
}

TEST_CASE("declared shapes: the feature kernel and the bundled flash pass a windowed shape, in float32 and bfloat16") {
  for (const Dtype dt : {Dtype::f32, Dtype::bf16}) {
    every_shape_passes(check(support::feature_kernel(support::FeatureBug::none),
                             with_shapes({windowed_prefill(), long_decode()},
                                         few({"accuracy", "window"}, feature_bug_options(support::FeatureBug::none, dt)))),
                       {"accuracy", "window"}, 2);
    every_shape_passes(check(builtin("flash"), with_shapes({windowed_prefill(), long_decode()},
                                                           few({"accuracy", "lse", "window"}, builtin_options("flash", dt)))),
                       {"accuracy", "lse", "window"}, 2);
  }
}

TEST_CASE("declared shapes: a property that cannot take a shape says why, and a feature the kernel does not declare "
          "is not drawn") {
  const RunReport r = check(support::variant_kernel({}), with_shapes({windowed_prefill(), long_decode()},
                                                                    few({"accuracy", "causal", "sum_to_one"})));
  INFO(r.text());
  CHECK(r.verdict() == Verdict::pass);
  const PropertyReport &accuracy = *r.find("accuracy");
  CHECK(accuracy.shapes[0].verdict == Verdict::unsupported);
  CHECK(accuracy.shapes[0].note.find("features=window, which the kernel does not declare") != std::string::npos);
  CHECK(accuracy.shapes[1].verdict == Verdict::pass);
  const PropertyReport &causal = *r.find("causal");  // MPFR alone: too slow at production sizes
  CHECK(causal.shapes[1].note.find("judged by MPFR alone") != std::string::npos);
  const PropertyReport &sum = *r.find("sum_to_one");  // v = 1 with Dv = Lk? or other constraints: a reason always
  for (const ShapeRun &s : sum.shapes)
    if (s.verdict == Verdict::unsupported) CHECK_FALSE(s.note.empty());
}

TEST_CASE("declared shapes: the phase is part of the plan, so the same seed gives the same lines") {
  const auto lines = [] {
    RunReport r = check_property(support::variant_kernel({}), "accuracy", with_shapes({long_decode()}));
    return r.properties[0].shapes;
  };
  const std::vector<ShapeRun> a = lines(), b = lines();
  CHECK(a == b);
  REQUIRE(a.size() == 1);
  CHECK_FALSE(a[0].spec.empty());
}
