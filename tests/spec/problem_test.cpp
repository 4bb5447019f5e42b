#include "attncheck/problem.h"

#include <catch2/catch.hpp>

using namespace attncheck;

TEST_CASE("causal visibility is bottom-right aligned", "[problem]") {
  // Lq = 2, Lk = 4: row 0 sees keys 0..2, row 1 sees 0..3.
  REQUIRE(visible(Mask::causal, 0, 2, 2, 4));
  REQUIRE_FALSE(visible(Mask::causal, 0, 3, 2, 4));
  REQUIRE(visible_count(Mask::causal, 1, 2, 4) == 4);
  // Lq = 4, Lk = 2: rows 0 and 1 see nothing, row 3 sees both.
  REQUIRE(visible_count(Mask::causal, 0, 4, 2) == 0);
  REQUIRE(visible_count(Mask::causal, 1, 4, 2) == 0);
  REQUIRE(visible_count(Mask::causal, 2, 4, 2) == 1);
  REQUIRE(visible_count(Mask::causal, 3, 4, 2) == 2);
  for (std::int64_t i = 0; i < 4; ++i)
    for (std::int64_t j = 0; j < 2; ++j)
      REQUIRE(visible(Mask::causal, i, j, 4, 2) == (j < visible_count(Mask::causal, i, 4, 2)));
}

TEST_CASE("shapes that disagree are refused with a message naming them", "[problem]") {
  auto t = [](std::vector<std::int64_t> s, Dtype dt = Dtype::f32) { return Tensor::contiguous(dt, std::move(s)); };
  REQUIRE_THROWS_WITH(shape_of(t({1, 2, 3, 4}), t({1, 2, 5, 8}), t({1, 2, 5, 4})), Catch::Contains("head dims differ"));
  REQUIRE_THROWS_WITH(shape_of(t({1, 3, 3, 4}), t({1, 2, 5, 4}), t({1, 2, 5, 4})), Catch::Contains("not a multiple"));
  REQUIRE_THROWS_WITH(shape_of(t({1, 2, 3, 4}), t({1, 2, 5, 4}), t({1, 2, 6, 4})), Catch::Contains("key lengths differ"));
  REQUIRE_THROWS_WITH(shape_of(t({2, 2, 3, 4}), t({1, 2, 5, 4}), t({1, 2, 5, 4})), Catch::Contains("batch sizes differ"));
  REQUIRE_THROWS_WITH(shape_of(t({1, 2, 3, 4}), t({1, 2, 5, 4}, Dtype::f16), t({1, 2, 5, 4})), Catch::Contains("one dtype"));
  const Tensor dout = t({1, 4, 3, 7});
  REQUIRE_THROWS_WITH(shape_of(t({1, 4, 3, 4}), t({1, 2, 5, 4}), t({1, 2, 5, 6}), &dout), Catch::Contains("dout"));
  const Shape s = shape_of(t({1, 4, 3, 4}), t({1, 2, 5, 4}), t({1, 2, 5, 6}));
  REQUIRE(s == Shape{1, 4, 2, 3, 5, 4, 6});
  REQUIRE(s.kv_head(3) == 1);
  REQUIRE(s.kv_head(1) == 0);
}
