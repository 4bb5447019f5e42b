// Minimum evidence for a pass: a property passes only when its decided cases reach a stated variety of shapes;
// a shape pool draws its shapes among those the kernel accepts, and grows past the ones it declines.
#include "attncheck/check.h"
#include "property_support.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <mutex>
#include <vector>

using namespace attncheck;
using namespace attncheck::test;

namespace {
const attncheck_kernel &correct() { return support::variant_kernel(support::Variant{}); }

Shape shape_of(const DLTensor *q, const DLTensor *k, const DLTensor *v) {
  return Shape{.B = q->shape[0], .Hq = q->shape[1], .Hkv = k->shape[1], .Lq = q->shape[2], .Lk = k->shape[2],
               .D = q->shape[3], .Dv = v->shape[3]};
}

/// The distinct shapes the kernels below ran (accepted), in order.
std::vector<Shape> g_ran;
std::mutex g_ran_mutex;

int run_recorded(const attncheck_params *p, const DLTensor *q, const DLTensor *k, const DLTensor *v, DLTensor *out,
                 DLTensor *lse) {
  {
    const std::lock_guard lock(g_ran_mutex);
    const Shape s = shape_of(q, k, v);
    if (std::find(g_ran.begin(), g_ran.end(), s) == g_ran.end()) g_ran.push_back(s);
  }
  return correct().forward(p, q, k, v, out, lse);
}

/// A kernel that implements only Dv = D (as jax.nn.dot_product_attention does).
int declines_dv(const attncheck_params *p, const DLTensor *q, const DLTensor *k, const DLTensor *v, DLTensor *out,
                DLTensor *lse) {
  if (v->shape[3] != q->shape[3]) return ATTNCHECK_UNSUPPORTED;
  return run_recorded(p, q, k, v, out, lse);
}

/// A kernel that implements one key, one or two queries, of head dimension 1 only: the pool's all-ones shape and its
/// Lq = 2 one, and no third.
int one_key_only(const attncheck_params *p, const DLTensor *q, const DLTensor *k, const DLTensor *v, DLTensor *out,
                 DLTensor *lse) {
  if (k->shape[2] != 1 || q->shape[2] > 2 || q->shape[3] != 1 || v->shape[3] != 1 || q->shape[0] != 1 ||
      q->shape[1] != 1)
    return ATTNCHECK_UNSUPPORTED;
  return run_recorded(p, q, k, v, out, lse);
}

/// declines_dv with a planted bug: the scale taken as 1.
int declines_dv_missing_scale(const attncheck_params *p, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                              DLTensor *out, DLTensor *lse) {
  if (v->shape[3] != q->shape[3]) return ATTNCHECK_UNSUPPORTED;
  return bug(support::Bug::missing_scale).forward(p, q, k, v, out, lse);
}

const attncheck_kernel kDeclinesDv{ATTNCHECK_ABI_VERSION, "declines_dv", &declines_dv, nullptr, nullptr};
const attncheck_kernel kRecorded{ATTNCHECK_ABI_VERSION, "recorded", &run_recorded, nullptr, nullptr};
const attncheck_kernel kDeclinesDvMissingScale{ATTNCHECK_ABI_VERSION, "declines_dv_missing_scale",
                                               &declines_dv_missing_scale, nullptr, nullptr};
/// The properties whose cases set Dv = Lk (v = I).
const std::vector<std::string> kDvEqualsLk{"variance_normalization", "sum_to_one"};
const attncheck_kernel kOneKeyOnly{ATTNCHECK_ABI_VERSION, "one_key_only", &one_key_only, nullptr, nullptr};

CheckOptions pooled(int shapes) {
  CheckOptions o = options();
  o.properties = {"accuracy"};
  o.shape_pool = shapes;
  return o;
}
}  // namespace

TEST_CASE("a kernel that declines Dv ≠ D gets a shape pool of shapes it accepts, and passes on at least three") {
  g_ran.clear();
  const RunReport r = check(kDeclinesDv, pooled(CheckOptions::kAutoShapePool));
  INFO(r.text());
  CHECK(r.find("accuracy")->verdict == Verdict::pass);
  CHECK(g_ran.size() >= 3);
  for (const Shape &s : g_ran) CHECK(s.Dv == s.D);
}

TEST_CASE("a kernel whose declines leave two shapes is undecided with the reason, never a pass") {
  g_ran.clear();
  const RunReport r = check(kOneKeyOnly, pooled(CheckOptions::kAutoShapePool));
  INFO(r.text());
  const PropertyReport &p = *r.find("accuracy");
  REQUIRE(g_ran.size() < 3);
  CHECK(p.verdict == Verdict::undecided);
  CHECK_THAT(p.note, Catch::Contains("distinct shapes (at least 3 needed)"));
  CHECK_THAT(p.note, Catch::Contains("the kernel declined"));
  CHECK_THAT(p.note, Catch::Contains("raise the shape pool"));
}

TEST_CASE("the same kernel, seed and pool give the same verdict and note") {
  const RunReport a = check(kOneKeyOnly, pooled(CheckOptions::kAutoShapePool));
  const RunReport b = check(kOneKeyOnly, pooled(CheckOptions::kAutoShapePool));
  CHECK(a.find("accuracy")->note == b.find("accuracy")->note);
  CHECK(a.text() == b.text());
}

TEST_CASE("the report's text shows decided / planned cases where they differ, and why") {
  const RunReport r = check(kOneKeyOnly, pooled(0));  // without a pool, RapidCheck gives up on the declined draws
  const std::string text = r.text();
  INFO(text);
  const PropertyReport &p = *r.find("accuracy");
  REQUIRE(p.cases < 100);
  std::string counted = "[";  // appended, not "[" + string&&: GCC 12 warns falsely there (-Wrestrict, PR 105329)
  counted += std::to_string(p.cases - p.undecided);
  counted += " / 100 decided]";
  CHECK_THAT(text, Catch::Contains(counted));
  CHECK_THAT(text, Catch::Contains(p.note));
  CHECK_THAT(p.note, Catch::Contains("the kernel declined"));
  CHECK_THAT(check(correct(), pooled(0)).text(), !Catch::Contains(" decided]"));
}

TEST_CASE("properties that set Dv = Lk draw D = Lk too for a kernel that declines Dv ≠ D, and decide their cases") {
  for (const int pool : {0, CheckOptions::kAutoShapePool}) {
    g_ran.clear();
    CheckOptions o = pooled(pool);
    o.properties = kDvEqualsLk;
    const RunReport r = check(kDeclinesDv, o);
    INFO("shape pool " << pool << "\n" << r.text());
    for (const std::string &id : kDvEqualsLk) {
      const PropertyReport &p = *r.find(id);
      CHECK(p.verdict == Verdict::pass);
      CHECK(p.cases - p.undecided >= o.min_cases);
    }
    CHECK(std::any_of(g_ran.begin(), g_ran.end(), [](const Shape &s) { return s.D == s.Lk && s.Lk > 1; }));
  }
}

TEST_CASE("a kernel that accepts Dv ≠ D keeps the draws with D ≠ Lk for the properties that set Dv = Lk") {
  g_ran.clear();
  CheckOptions o = pooled(0);
  o.properties = kDvEqualsLk;
  const RunReport r = check(kRecorded, o);
  INFO(r.text());
  CHECK(r.find("variance_normalization")->verdict == Verdict::pass);
  CHECK(std::any_of(g_ran.begin(), g_ran.end(), [](const Shape &s) { return s.D != s.Dv; }));
}

TEST_CASE("a missing scale in a kernel that declines Dv ≠ D is caught by variance_normalization, shrunk with D = Dv = Lk") {
  CheckOptions o = pooled(0);
  o.properties = {"variance_normalization"};
  const RunReport r = check(kDeclinesDvMissingScale, o);
  INFO(r.text());
  const PropertyReport &p = *r.find("variance_normalization");
  CHECK(p.verdict == Verdict::fail);
  REQUIRE(p.counterexample);
  const Shape &s = p.counterexample->minimal.spec.shape;
  CHECK(s.D == s.Lk);
  CHECK(s.Dv == s.Lk);
  CHECK(s.Lk <= 4);  // shrunk: D follows the keys down
}
