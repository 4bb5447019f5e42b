#include "attncheck/tensor.h"

#include <cassert>
#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace attncheck {

std::string_view layout_name(Layout l) {
  switch (l) {
    case Layout::bhld: return "bhld";
    case Layout::blhd: return "blhd";
    case Layout::transposed: return "transposed";
    case Layout::padded: return "padded";
  }
  return "?";
}

Tensor::Tensor(Dtype dt, std::vector<std::int64_t> shape, std::vector<std::int64_t> strides, std::int64_t offset,
               std::int64_t storage_elems)
    : dtype_(dt), shape_(std::move(shape)), strides_(std::move(strides)), offset_(offset),
      storage_elems_(storage_elems),
      storage_(static_cast<std::size_t>(storage_elems) * static_cast<std::size_t>(dtype_size(dt))) {
  if (shape_.size() != strides_.size()) throw std::invalid_argument("tensor: shape and strides differ in rank");
  // The last element must lie inside the storage.
  std::int64_t last = offset_;
  for (std::size_t d = 0; d < shape_.size(); ++d) {
    if (shape_[d] < 0) throw std::invalid_argument("tensor: negative dimension");
    if (shape_[d] > 0) last += (shape_[d] - 1) * strides_[d];
  }
  if (numel() > 0 && (last >= storage_elems_ || offset_ < 0))
    throw std::invalid_argument("tensor: strides reach outside the storage");
}

Tensor Tensor::contiguous(Dtype dt, std::vector<std::int64_t> shape) {
  std::vector<std::int64_t> strides(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d)
    strides[static_cast<std::size_t>(d)] =
        strides[static_cast<std::size_t>(d) + 1] * std::max<std::int64_t>(shape[static_cast<std::size_t>(d) + 1], 1);
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  return Tensor(dt, std::move(shape), std::move(strides), 0, std::max<std::int64_t>(n, 1));
}

std::string_view broadcast_name(Broadcast b) {
  switch (b) {
    case Broadcast::none: return "none";
    case Broadcast::batch: return "batch";
    case Broadcast::heads: return "heads";
  }
  return "?";
}

int broadcast_dim(Broadcast b) { return b == Broadcast::batch ? 0 : (b == Broadcast::heads ? 1 : -1); }

namespace {
/// Strides of a rank-4 layout and the elements its storage spans (without the pad before and after).
std::pair<std::vector<std::int64_t>, std::int64_t> layout_span(const std::vector<std::int64_t> &shape, Layout layout,
                                                               std::int64_t pad) {
  if (shape.size() != 4) throw std::invalid_argument("tensor: layouts are defined for rank 4");
  const std::int64_t B = shape[0], H = shape[1], L = shape[2], X = shape[3];
  switch (layout) {
    case Layout::bhld: return {{H * L * X, L * X, X, 1}, B * H * L * X};
    case Layout::blhd: return {{L * H * X, X, H * X, 1}, B * L * H * X};
    case Layout::transposed: return {{H * X * L, X * L, 1, L}, B * H * X * L};
    case Layout::padded: {
      const std::int64_t row = X + pad, head = L * row + pad;
      return {{H * head, head, row, 1}, B * H * head};
    }
  }
  throw std::invalid_argument("tensor: unknown layout");
}
}  // namespace

std::vector<std::int64_t> Tensor::layout_strides(const std::vector<std::int64_t> &shape, Layout layout,
                                                 std::int64_t pad) {
  return layout_span(shape, layout, pad).first;
}

Tensor Tensor::with_layout(Dtype dt, std::vector<std::int64_t> shape, Layout layout, std::int64_t pad) {
  auto [st, span] = layout_span(shape, layout, pad);
  return Tensor(dt, std::move(shape), std::move(st), pad, std::max<std::int64_t>(span, 1) + 2 * pad);
}

Tensor Tensor::expanded(Dtype dt, std::vector<std::int64_t> shape, Layout layout, Broadcast b, std::int64_t pad) {
  const int d = broadcast_dim(b);
  if (d < 0) return with_layout(dt, std::move(shape), layout, pad);
  std::vector<std::int64_t> one = shape;
  one[static_cast<std::size_t>(d)] = 1;  // the storage of one slice
  auto [st, span] = layout_span(one, layout, pad);
  st[static_cast<std::size_t>(d)] = 0;
  return Tensor(dt, std::move(shape), std::move(st), pad, std::max<std::int64_t>(span, 1) + 2 * pad);
}

Tensor Tensor::rows_with_layout(Dtype dt, std::vector<std::int64_t> shape, Layout layout, std::int64_t pad) {
  if (shape.size() != 3) throw std::invalid_argument("tensor: row layouts are defined for rank 3");
  auto [st, span] = layout_span({shape[0], shape[1], shape[2], 1}, layout, pad);
  st.pop_back();
  return Tensor(dt, std::move(shape), std::move(st), pad, std::max<std::int64_t>(span, 1) + 2 * pad);
}

std::int64_t Tensor::numel() const {
  std::int64_t n = 1;
  for (auto s : shape_) n *= s;
  return n;
}

std::int64_t Tensor::index(std::span<const std::int64_t> idx) const {
  assert(idx.size() == shape_.size());
  std::int64_t i = offset_;
  for (std::size_t d = 0; d < idx.size(); ++d) i += idx[d] * strides_[d];
  return i;
}

namespace {
/// x as a float on its way to a 16-bit dtype: x itself when it is a float (one rounding follows), else x rounded
/// to the dtype first (exact as a float), so that no double is rounded twice.
float narrowed(Dtype dt, double x) {
  const float f = static_cast<float>(x);
  return f == x ? f : static_cast<float>(round_to(dt, x));
}

/// Storage element `at` of dtype D widened exactly, and x stored there rounded to D (round_to's one rounding).
template <Dtype D>
double load_as(const std::byte *p, std::int64_t at) {
  if constexpr (D == Dtype::f32) {
    float f;
    std::memcpy(&f, p + at * static_cast<std::int64_t>(sizeof f), sizeof f);
    return f;
  } else {
    std::uint16_t h;
    std::memcpy(&h, p + at * static_cast<std::int64_t>(sizeof h), sizeof h);
    return D == Dtype::f16 ? f16_bits_to_float(h) : bf16_bits_to_float(h);
  }
}
template <Dtype D>
void store_as(std::byte *p, std::int64_t at, double x) {
  if constexpr (D == Dtype::f32) {
    const float f = static_cast<float>(x);
    std::memcpy(p + at * static_cast<std::int64_t>(sizeof f), &f, sizeof f);
  } else {
    const float f = narrowed(D, x);
    const std::uint16_t h = D == Dtype::f16 ? float_to_f16_bits(f) : float_to_bf16_bits(f);
    std::memcpy(p + at * static_cast<std::int64_t>(sizeof h), &h, sizeof h);
  }
}

/// f(std::integral_constant<Dtype, dt>{}): the dtype chosen once, so that a loop inside f converts without a switch
/// per element (to_vector, assign).
template <class F>
decltype(auto) by_dtype(Dtype dt, F &&f) {
  switch (dt) {
    case Dtype::f16: return f(std::integral_constant<Dtype, Dtype::f16>{});
    case Dtype::bf16: return f(std::integral_constant<Dtype, Dtype::bf16>{});
    case Dtype::f32: break;
  }
  return f(std::integral_constant<Dtype, Dtype::f32>{});
}
}  // namespace

double Tensor::get_storage(std::int64_t s) const {
  return by_dtype(dtype_, [&](auto d) { return load_as<d.value>(storage_.data(), s); });
}

void Tensor::set_storage(std::int64_t s, double x) {
  by_dtype(dtype_, [&](auto d) { store_as<d.value>(storage_.data(), s, x); });
}

std::vector<double> Tensor::to_vector() const {
  std::vector<double> out(static_cast<std::size_t>(std::max<std::int64_t>(numel(), 0)));
  double *o = out.data();
  by_dtype(dtype_, [&](auto d) {
    for_each_storage_index(shape_, strides_, offset_,
                           [&](std::int64_t at) { *o++ = load_as<d.value>(storage_.data(), at); });
  });
  return out;
}

void Tensor::assign(std::span<const double> values) {
  if (static_cast<std::int64_t>(values.size()) != numel()) throw std::invalid_argument("tensor: assign size");
  const double *v = values.data();
  by_dtype(dtype_, [&](auto d) {
    for_each_storage_index(shape_, strides_, offset_,
                           [&](std::int64_t at) { store_as<d.value>(storage_.data(), at, *v++); });
  });
}

void Tensor::fill_storage(double x) {
  if (storage_elems_ == 0) return;
  // The first element, then copies of what is filled so far, doubling: memcpy speed on tensors of billions.
  set_storage(0, x);
  const std::size_t total = static_cast<std::size_t>(storage_elems_) * dtype_size(dtype_);
  for (std::size_t filled = dtype_size(dtype_); filled < total;) {
    const std::size_t n = std::min(filled, total - filled);
    std::memcpy(storage_.data() + filled, storage_.data(), n);
    filled += n;
  }
}

std::vector<bool> Tensor::element_mask() const {
  std::vector<bool> m(static_cast<std::size_t>(storage_elems_), false);
  for_each_storage_index(shape_, strides_, offset_, [&](std::int64_t at) { m[static_cast<std::size_t>(at)] = true; });
  return m;
}

void Tensor::fill_padding(double x) {
  const auto m = element_mask();
  for (std::int64_t s = 0; s < storage_elems_; ++s)
    if (!m[static_cast<std::size_t>(s)]) set_storage(s, x);
}

DLTensor Tensor::dl() {
  DLTensor t{};
  t.data = storage_.data();
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = static_cast<int32_t>(shape_.size());
  t.dtype = to_dlpack(dtype_);
  t.shape = shape_.data();
  t.strides = strides_.data();
  t.byte_offset = static_cast<std::uint64_t>(offset_ * dtype_size(dtype_));
  return t;
}

DLTensor Tensor::dl() const { return const_cast<Tensor *>(this)->dl(); }

std::string Tensor::describe() const {
  std::ostringstream os;
  os << dtype_name(dtype_) << '[';
  for (std::size_t d = 0; d < shape_.size(); ++d) os << (d ? "," : "") << shape_[d];
  os << "] strides [";
  for (std::size_t d = 0; d < strides_.size(); ++d) os << (d ? "," : "") << strides_[d];
  os << ']';
  return os.str();
}

}  // namespace attncheck
