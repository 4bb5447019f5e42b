#include "attncheck/tensor.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace attncheck;

TEST_CASE("every layout addresses each element once and inside its storage", "[tensor]") {
  for (Layout l : {Layout::bhld, Layout::blhd, Layout::transposed, Layout::padded}) {
    for (std::int64_t L : {1, 3, 7, 16}) {
      Tensor t = Tensor::with_layout(Dtype::f16, {2, 3, L, 5}, l, 3);
      const auto mask = t.element_mask();
      std::int64_t elems = 0;
      for (bool b : mask) elems += b;
      INFO(layout_name(l) << " L=" << L);
      REQUIRE(elems == t.numel());
      REQUIRE_FALSE(mask.front());  // the leading pad
      REQUIRE_FALSE(mask.back());   // the trailing pad
    }
  }
}

TEST_CASE("values round-trip through a strided tensor and padding stays apart", "[tensor]") {
  Tensor t = Tensor::with_layout(Dtype::bf16, {1, 2, 3, 4}, Layout::padded, 2);
  std::vector<double> vals(static_cast<std::size_t>(t.numel()));
  for (std::size_t i = 0; i < vals.size(); ++i) vals[i] = static_cast<double>(i) - 7.5;
  t.fill_storage(0);
  t.assign(vals);
  t.fill_padding(std::nan(""));
  REQUIRE(t.to_vector() == vals);
  REQUIRE(t.get({0, 1, 2, 3}) == vals.back());
  const DLTensor d = t.dl();
  REQUIRE(d.ndim == 4);
  REQUIRE(d.strides[2] == 6);
  REQUIRE(d.dtype.code == kDLBfloat);
}

TEST_CASE("a tensor whose strides leave its storage is refused", "[tensor]") {
  REQUIRE_THROWS_WITH(Tensor(Dtype::f32, {2, 2}, {2, 1}, 1, 4), Catch::Contains("outside the storage"));
}
