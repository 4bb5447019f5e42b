#include "attncheck/tensor.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

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

TEST_CASE("a tensor stores a double as round_to does: one rounding, never through float twice", "[tensor]") {
  // 1 + 2^-11 + 2^-40 is above the midpoint of 1 and 1 + 2^-10 in float16 (1 + 2^-7 in bfloat16), its float is on it.
  for (Dtype dt : {Dtype::f16, Dtype::bf16}) {
    const double x = 1 + unit_roundoff(dt) + std::ldexp(1.0, -40);
    Tensor t = Tensor::with_layout(dt, {1, 1, 1, 3}, Layout::bhld, 1);
    t.assign(std::vector<double>{x, -x, 0.1});
    CHECK(t.to_vector() == std::vector<double>{round_to(dt, x), round_to(dt, -x), round_to(dt, 0.1)});
    CHECK(t.get({0, 0, 0, 0}) == 1 + 2 * unit_roundoff(dt));
  }
}

TEST_CASE("assign and to_vector store and read what set and get do, element by element, in every dtype and layout",
          "[tensor]") {
  // Values of every kind a case holds: normal, subnormal in each dtype, halfway cases, ±0, ±Inf, NaN, past the range.
  const std::vector<double> kinds{0.1,           -0.0,        1 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40),
                                  std::ldexp(1.0, -20), std::ldexp(3.0, -140), 65519.0, 65520.0, -1e39,
                                  INFINITY,      -INFINITY,   std::nan(""), 1.0 / 3};
  for (Dtype dt : {Dtype::f32, Dtype::f16, Dtype::bf16})
    for (Layout l : {Layout::bhld, Layout::blhd, Layout::transposed, Layout::padded})
      for (Broadcast b : {Broadcast::none, Broadcast::heads}) {
        const std::vector<std::int64_t> shape{2, 3, 5, 4};
        Tensor bulk = Tensor::expanded(dt, shape, l, b, 2), each = Tensor::expanded(dt, shape, l, b, 2);
        std::vector<double> vals(static_cast<std::size_t>(bulk.numel()));
        for (std::size_t i = 0; i < vals.size(); ++i)
          vals[i] = kinds[i % kinds.size()] * static_cast<double>(b == Broadcast::none ? 1 + i : 1);
        bulk.assign(vals);
        std::size_t k = 0;
        for_each_index(shape, [&](std::span<const std::int64_t> idx) { each.set(idx, vals[k++]); });
        INFO(dtype_name(dt) << " " << layout_name(l) << " " << broadcast_name(b));
        CHECK(std::equal(bulk.bytes().begin(), bulk.bytes().end(), each.bytes().begin(), each.bytes().end()));
        std::vector<double> got;
        for_each_index(shape, [&](std::span<const std::int64_t> idx) { got.push_back(each.get(idx)); });
        const std::vector<double> read = bulk.to_vector();
        REQUIRE(read.size() == got.size());
        for (std::size_t i = 0; i < got.size(); ++i)
          CHECK(std::memcmp(&read[i], &got[i], sizeof(double)) == 0);
      }
}

TEST_CASE("a tensor whose strides leave its storage is refused", "[tensor]") {
  REQUIRE_THROWS_WITH(Tensor(Dtype::f32, {2, 2}, {2, 1}, 1, 4), Catch::Contains("outside the storage"));
}

TEST_CASE("an expanded tensor reads one slice with stride 0 on its broadcast dimension", "[tensor]") {
  for (Layout l : {Layout::bhld, Layout::blhd, Layout::transposed, Layout::padded})
    for (Broadcast b : {Broadcast::batch, Broadcast::heads}) {
      INFO(layout_name(l) << " broadcast " << broadcast_name(b));
      const Tensor one = Tensor::with_layout(Dtype::f32, {b == Broadcast::batch ? 1 : 3, b == Broadcast::heads ? 1 : 2,
                                                          4, 5},
                                             l, 2);
      Tensor t = Tensor::expanded(Dtype::f32, {3, 2, 4, 5}, l, b, 2);
      const int d = broadcast_dim(b);
      REQUIRE(t.strides()[static_cast<std::size_t>(d)] == 0);
      REQUIRE(t.storage_elems() == one.storage_elems());  // the storage of one slice
      t.fill_storage(0);
      t.set({0, 0, 3, 4}, 7);
      // Every index of the broadcast dimension reads the element just written.
      CHECK(t.get({2, 0, 3, 4}) == (b == Broadcast::batch ? 7 : 0));
      CHECK(t.get({0, 1, 3, 4}) == (b == Broadcast::heads ? 7 : 0));
      CHECK(t.get({0, 0, 3, 4}) == 7);
    }
  CHECK(Tensor::expanded(Dtype::f32, {3, 2, 4, 5}, Layout::blhd, Broadcast::none).strides() ==
        Tensor::with_layout(Dtype::f32, {3, 2, 4, 5}, Layout::blhd).strides());
}

TEST_CASE("a row tensor takes the strides of its layout with a last dimension of 1", "[tensor]") {
  CHECK(Tensor::rows_with_layout(Dtype::f32, {2, 3, 4}, Layout::bhld).strides() == std::vector<std::int64_t>{12, 4, 1});
  CHECK(Tensor::rows_with_layout(Dtype::f32, {2, 3, 4}, Layout::blhd).strides() == std::vector<std::int64_t>{12, 1, 3});
  const Tensor p = Tensor::rows_with_layout(Dtype::f32, {2, 3, 4}, Layout::padded, 2);
  CHECK(p.strides() == std::vector<std::int64_t>{3 * (4 * 3 + 2), 4 * 3 + 2, 3});
  CHECK(p.offset() == 2);
  std::int64_t elems = 0;
  for (bool b : p.element_mask()) elems += b;
  CHECK(elems == p.numel());
  CHECK(Tensor::layout_strides({2, 3, 4, 5}, Layout::transposed) == std::vector<std::int64_t>{60, 20, 1, 4});
}
