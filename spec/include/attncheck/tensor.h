// A host tensor with explicit strides (in elements), as the ABI passes it: owned storage, exact element access,
// and a DLTensor view. Storage around and between the elements (padding) is kept so that checks can fill it with
// NaN and see whether a kernel reads or writes it.
#pragma once

#include "attncheck/dtype.h"

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <new>
#include <span>
#include <string>
#include <vector>

namespace attncheck {

/// Memory layouts of a rank-4 [B, H, L, X] tensor.
enum class Layout : std::uint8_t {
  bhld,        ///< contiguous, X fastest then L, H, B (PyTorch's default)
  blhd,        ///< [B, L, H, X] in memory (FlashAttention's layout): strides {L·H·X, X, H·X, 1}
  transposed,  ///< L fastest: strides {H·X·L, X·L, 1, L} — the last dimension is not contiguous
  padded,      ///< bhld with every row and every head padded by `pad` elements
};
std::string_view layout_name(Layout l);

/// A dimension of a rank-4 [B, H, L, X] input read with stride 0 (what `torch.expand` gives: one K/V shared by every
/// batch entry — a common prefix — or by every head). The ABI allows any stride on the inputs; outputs never alias.
enum class Broadcast : std::uint8_t {
  none,
  batch,  ///< stride 0 on B: every batch entry reads batch 0's storage
  heads,  ///< stride 0 on H: every head reads head 0's storage
};
std::string_view broadcast_name(Broadcast b);  ///< "none", "batch", "heads"
/// The dimension index a broadcast zeroes (0 for batch, 1 for heads; −1 for none).
int broadcast_dim(Broadcast b);

/// DLPack promises `data` aligned to 256 bytes (the first element is at data + byte_offset).
inline constexpr std::size_t kDLPackAlignment = 256;

/// std::allocator with kDLPackAlignment-aligned blocks.
template <class T>
struct DLPackAllocator {
  using value_type = T;
  DLPackAllocator() = default;
  template <class U>
  DLPackAllocator(const DLPackAllocator<U> &) noexcept {}
  T *allocate(std::size_t n) {
    return static_cast<T *>(::operator new(n * sizeof(T), std::align_val_t{kDLPackAlignment}));
  }
  void deallocate(T *p, std::size_t) noexcept { ::operator delete(p, std::align_val_t{kDLPackAlignment}); }
  template <class U>
  bool operator==(const DLPackAllocator<U> &) const noexcept {
    return true;
  }
};

class Tensor {
 public:
  Tensor() = default;
  /// Elements at offset + Σ index[d]·strides[d] of a buffer of `storage_elems` elements (zero-filled).
  Tensor(Dtype dt, std::vector<std::int64_t> shape, std::vector<std::int64_t> strides, std::int64_t offset,
         std::int64_t storage_elems);
  /// Contiguous row-major tensor.
  static Tensor contiguous(Dtype dt, std::vector<std::int64_t> shape);
  /// Rank-4 tensor in the given layout; `pad` extra elements per padded row/head (Layout::padded only) and
  /// `pad` elements before the first and after the last element for every layout.
  static Tensor with_layout(Dtype dt, std::vector<std::int64_t> shape, Layout layout, std::int64_t pad = 0);
  /// with_layout's strides for a rank-4 shape (no storage allocated).
  static std::vector<std::int64_t> layout_strides(const std::vector<std::int64_t> &shape, Layout layout,
                                                  std::int64_t pad = 0);
  /// with_layout with the dimension `b` names read with stride 0: the storage of one slice, which every index of
  /// that dimension reads (a read-only input; writing one element writes it for the whole dimension).
  static Tensor expanded(Dtype dt, std::vector<std::int64_t> shape, Layout layout, Broadcast b, std::int64_t pad = 0);
  /// A rank-3 [B, H, L] tensor (the LSE) with the strides `layout` gives a [B, H, L, 1] tensor: bhld and transposed
  /// are compact, blhd is [B, L, H] in memory, padded puts `pad` elements after every row and head.
  static Tensor rows_with_layout(Dtype dt, std::vector<std::int64_t> shape, Layout layout, std::int64_t pad = 0);

  Dtype dtype() const { return dtype_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  const std::vector<std::int64_t> &shape() const { return shape_; }
  const std::vector<std::int64_t> &strides() const { return strides_; }
  std::int64_t dim(int d) const { return shape_[static_cast<std::size_t>(d)]; }
  std::int64_t numel() const;
  std::int64_t offset() const { return offset_; }
  std::int64_t storage_elems() const { return storage_elems_; }

  /// Storage index of a multi-index (no bounds check beyond debug asserts).
  std::int64_t index(std::span<const std::int64_t> idx) const;
  std::int64_t index(std::initializer_list<std::int64_t> idx) const {
    return index(std::span<const std::int64_t>(idx.begin(), idx.size()));
  }
  /// Element widened exactly to double.
  double get(std::span<const std::int64_t> idx) const { return get_storage(index(idx)); }
  double get(std::initializer_list<std::int64_t> idx) const { return get_storage(index(idx)); }
  /// Stores x rounded to the dtype (round_to).
  void set(std::span<const std::int64_t> idx, double x) { set_storage(index(idx), x); }
  void set(std::initializer_list<std::int64_t> idx, double x) { set_storage(index(idx), x); }
  double get_storage(std::int64_t storage_index) const;
  void set_storage(std::int64_t storage_index, double x);

  /// All elements in row-major order of the logical shape, widened exactly.
  std::vector<double> to_vector() const;
  /// Sets every element from row-major `values` (rounded to the dtype).
  void assign(std::span<const double> values);
  /// Sets every storage element (elements and padding) to x.
  void fill_storage(double x);
  /// Sets every storage element that is not an element of the tensor (the padding) to x.
  void fill_padding(double x);
  /// True when storage element `storage_index` belongs to the tensor.
  std::vector<bool> element_mask() const;

  /// A DLTensor viewing this tensor (kDLCPU; shape/strides point into this object: keep it alive and unmoved).
  /// As DLPack specifies: `data` is the 256-byte-aligned start of the storage and `byte_offset` locates the first
  /// element (so a kernel that ignores byte_offset reads the padding in front of it).
  DLTensor dl();
  DLTensor dl() const;  ///< same, for inputs (the ABI's const DLTensor*)

  std::span<const std::byte> bytes() const { return storage_; }
  std::span<std::byte> bytes() { return storage_; }
  std::string describe() const;  ///< e.g. "f16[2,4,17,64] strides [4352,1088,64,1]"

 private:
  Dtype dtype_ = Dtype::f32;
  std::vector<std::int64_t> shape_, strides_;
  std::int64_t offset_ = 0, storage_elems_ = 0;
  std::vector<std::byte, DLPackAllocator<std::byte>> storage_;
};

/// Visits every multi-index of `shape` in row-major order.
template <class F>
void for_each_index(const std::vector<std::int64_t> &shape, F &&f) {
  std::vector<std::int64_t> idx(shape.size(), 0);
  for (auto n : shape)
    if (n <= 0) return;
  while (true) {
    f(std::span<const std::int64_t>(idx));
    int d = static_cast<int>(shape.size()) - 1;
    while (d >= 0 && ++idx[static_cast<std::size_t>(d)] == shape[static_cast<std::size_t>(d)]) {
      idx[static_cast<std::size_t>(d)] = 0;
      --d;
    }
    if (d < 0) return;
  }
}

/// f(offset) for every element of a strided tensor of `shape` and `strides` (in elements) starting at `offset`, in
/// row-major order of the shape: the innermost dimension a strided loop, the others an odometer (no index vector per
/// element). Nothing for an empty tensor; f(offset) once for rank 0.
template <class F>
void for_each_storage_index(const std::vector<std::int64_t> &shape, const std::vector<std::int64_t> &strides,
                            std::int64_t offset, F &&f) {
  for (auto n : shape)
    if (n <= 0) return;
  if (shape.empty()) {
    f(offset);
    return;
  }
  const std::size_t last = shape.size() - 1;
  const std::int64_t inner = shape[last], step = strides[last];
  std::vector<std::int64_t> idx(last, 0);
  std::int64_t base = offset;
  while (true) {
    for (std::int64_t x = 0, at = base; x < inner; ++x, at += step) f(at);
    int d = static_cast<int>(last) - 1;
    for (; d >= 0; --d) {
      const auto u = static_cast<std::size_t>(d);
      base += strides[u];
      if (++idx[u] < shape[u]) break;
      base -= strides[u] * shape[u];
      idx[u] = 0;
    }
    if (d < 0) return;
  }
}

}  // namespace attncheck
