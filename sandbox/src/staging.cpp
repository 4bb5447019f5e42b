#include "staging.h"

#include <cstring>
#include <stdexcept>
#include <type_traits>

namespace attncheck::sandbox {

namespace {
/// Canary byte: all-ones bytes are a NaN in float32, float16, bfloat16 and float64 alike (sign, exponent and
/// mantissa all set), and a value no kernel computes by accident.
constexpr unsigned char kCanary = 0xFF;

std::uint64_t round_up(std::uint64_t n, std::uint64_t page) { return (n + page - 1) / page * page; }

std::string plural(std::int64_t n, const char *what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

/// Copies the run of `len` elements of `esize` bytes `step` elements apart at `from` to the same places at `to`: one
/// memcpy when they are contiguous, else element by element (a fixed-size copy for the usual sizes).
void copy_run(std::byte *to, const std::byte *from, std::int64_t len, std::int64_t step, std::size_t esize) {
  if (step == 1) {
    std::memcpy(to, from, static_cast<std::size_t>(len) * esize);
    return;
  }
  const std::int64_t bytes = step * static_cast<std::int64_t>(esize);
  auto each = [&]<std::size_t kSize>(std::integral_constant<std::size_t, kSize>) {
    for (std::int64_t j = 0; j < len; ++j) std::memcpy(to + j * bytes, from + j * bytes, kSize);
  };
  switch (esize) {
    case 2: each(std::integral_constant<std::size_t, 2>{}); break;
    case 4: each(std::integral_constant<std::size_t, 4>{}); break;
    default:
      for (std::int64_t j = 0; j < len; ++j) std::memcpy(to + j * bytes, from + j * bytes, esize);
  }
}
}  // namespace

template <class F>
void Staging::for_each_run(const Region &r, F &&f) {
  if (r.empty) return;
  if (r.shape.empty()) return f(std::int64_t{0}, std::int64_t{1}, std::int64_t{1});
  const int n = static_cast<int>(r.shape.size()) - 1;  // the odometer runs over every dim but the last
  const std::int64_t len = r.shape.back(), step = r.strides.back();
  std::vector<std::int64_t> idx(static_cast<std::size_t>(n), 0);
  std::int64_t off = 0;
  while (true) {
    f(off, len, step);
    int d = n - 1;  // bump the last outer index, carry into the ones before
    for (; d >= 0; --d) {
      const auto du = static_cast<std::size_t>(d);
      if (++idx[du] < r.shape[du]) {
        off += r.strides[du];
        break;
      }
      off -= (r.shape[du] - 1) * r.strides[du];
      idx[du] = 0;
    }
    if (d < 0) return;
  }
}

Staging::Staging(const std::vector<Arg> &args, std::size_t page) : page_(page) {
  if (args.size() > static_cast<std::size_t>(wire::kMaxTensors + wire::kMaxArgTensors))
    throw std::invalid_argument("too many tensors");
  std::uint64_t cursor = 0;  // where the next region's leading guard page goes
  for (const Arg &a : args) {
    Region r;
    r.arg = a;
    if (a.tensor) {
      const DLTensor &t = *a.tensor;
      const std::string name = a.name;
      if (t.device.device_type != kDLCPU)
        throw std::invalid_argument("sandbox: tensor " + name + " is not on kDLCPU");
      if (t.ndim < 0 || t.ndim > wire::kMaxRank)
        throw std::invalid_argument("sandbox: tensor " + name + " has rank " + std::to_string(t.ndim) +
                                    ", the sandbox carries at most " + std::to_string(wire::kMaxRank));
      const unsigned bits = static_cast<unsigned>(t.dtype.bits) * t.dtype.lanes;
      if (bits == 0 || bits % 8 != 0)
        throw std::invalid_argument("sandbox: tensor " + name + " has a dtype of " + std::to_string(bits) +
                                    " bits, not whole bytes");
      r.esize = bits / 8;
      r.shape.assign(t.shape, t.shape + t.ndim);
      r.strides.resize(static_cast<std::size_t>(t.ndim));
      std::int64_t compact = 1;  // strides == NULL: compact row-major (DLPack)
      for (int d = t.ndim - 1; d >= 0; --d) {
        const auto du = static_cast<std::size_t>(d);
        r.strides[du] = t.strides ? t.strides[d] : compact;
        compact *= r.shape[du];
      }
      r.empty = false;
      for (std::size_t d = 0; d < r.shape.size(); ++d) {
        if (r.shape[d] < 0) throw std::invalid_argument("sandbox: tensor " + name + " has a negative dimension");
        if (r.shape[d] == 0) r.empty = true;
        const std::int64_t reach = (r.shape[d] - 1) * r.strides[d];
        (reach < 0 ? r.min_off : r.max_off) += reach;
      }
      if (!r.empty && !t.data) throw std::invalid_argument("sandbox: tensor " + name + " has no data");
      const std::uint64_t span =
          r.empty ? 0 : static_cast<std::uint64_t>(r.max_off - r.min_off + 1) * r.esize;
      // At least one page of canary before the first element catches writes just before it.
      const std::uint64_t region = round_up(span, page) + page;
      r.lead_guard = cursor;
      r.begin = cursor + page;
      r.end = r.begin + region;
      r.elem0 = r.end - span + static_cast<std::uint64_t>(-r.min_off) * r.esize;  // lowest element at end - span
      cursor = r.end + page;  // the trailing guard page
    }
    regions_.push_back(std::move(r));
  }
  total_ = cursor + page;  // a final page so the memory is never empty
}

void Staging::write(std::byte *shm) {
  for (Region &r : regions_) {
    if (!r.arg.tensor) continue;
    std::byte *base = shm + r.begin;
    const std::uint64_t n = r.end - r.begin;
    std::memset(base, kCanary, n);
    r.is_elem.assign(n / r.esize, 0);
    const auto *src = static_cast<const std::byte *>(r.arg.tensor->data) + r.arg.tensor->byte_offset;
    const auto elem0 = static_cast<std::int64_t>(r.elem0), begin = static_cast<std::int64_t>(r.begin);
    const auto esize = static_cast<std::int64_t>(r.esize);
    const std::int64_t slot0 = (elem0 - begin) / esize;  // element [0,…,0]'s slot
    for_each_run(r, [&](std::int64_t off, std::int64_t len, std::int64_t step) {
      copy_run(shm + elem0 + off * esize, src + off * esize, len, step, r.esize);
      if (step == 1) {
        std::memset(r.is_elem.data() + slot0 + off, 1, static_cast<std::size_t>(len));
        return;
      }
      for (std::int64_t j = 0; j < len; ++j) r.is_elem[static_cast<std::size_t>(slot0 + off + j * step)] = 1;
    });
    r.snapshot.assign(base, base + n);
  }
}

std::optional<CallFault> Staging::check(const std::byte *shm) const {
  // Inputs before outputs: a changed input is the worse fault, and it would make the outputs meaningless.
  for (const bool outputs : {false, true}) {
    for (const Region &r : regions_) {
      if (!r.arg.tensor || (r.arg.output != nullptr) != outputs) continue;
      const std::byte *base = shm + r.begin;
      std::int64_t count = 0, first = -1;
      for (std::size_t slot = 0; slot < r.is_elem.size(); ++slot) {
        if (outputs && r.is_elem[slot]) continue;
        // A span of slots to compare (an input's whole region, a run of an output's non-elements): one memcmp when
        // it is clean, element by element when not.
        std::size_t end = slot + 1;
        while (end < r.is_elem.size() && !(outputs && r.is_elem[end])) ++end;
        const std::size_t at = slot * r.esize, bytes = (end - slot) * r.esize;
        if (std::memcmp(base + at, r.snapshot.data() + at, bytes) != 0)
          for (std::size_t x = slot; x < end; ++x)
            if (std::memcmp(base + x * r.esize, r.snapshot.data() + x * r.esize, r.esize) != 0 && count++ == 0)
              first = static_cast<std::int64_t>(x);
        slot = end - 1;
      }
      if (count == 0) continue;
      const std::int64_t element =
          (static_cast<std::int64_t>(r.begin) + first * static_cast<std::int64_t>(r.esize) -
           static_cast<std::int64_t>(r.elem0)) / static_cast<std::int64_t>(r.esize);
      const char *where = element < r.min_off                          ? " (before the first)"
                          : element > r.max_off                        ? " (past the last)"
                          : !r.is_elem[static_cast<std::size_t>(first)] ? " (in its padding)"
                                                                        : "";
      CallFault f;
      f.tensor = r.arg.name;
      f.element = element;
      if (!outputs) {
        f.kind = CallFault::wrote_input;
        f.message = "wrote input " + f.tensor + " at element " + std::to_string(element) + where;
        if (count > 1) f.message += " (and " + plural(count - 1, "more element") + ")";
      } else {
        f.kind = CallFault::wrote_outside;
        f.message = "wrote " + plural(count, "element") + " outside " + f.tensor + ", first at element " +
                    std::to_string(element) + where;
      }
      return f;
    }
  }
  return std::nullopt;
}

void Staging::copy_out(const std::byte *shm) const {
  for (const Region &r : regions_) {
    if (!r.arg.output) continue;
    auto *dst = static_cast<std::byte *>(r.arg.output->data) + r.arg.output->byte_offset;
    const auto esize = static_cast<std::int64_t>(r.esize), elem0 = static_cast<std::int64_t>(r.elem0);
    for_each_run(r, [&](std::int64_t off, std::int64_t len, std::int64_t step) {
      copy_run(dst + off * esize, shm + elem0 + off * esize, len, step, r.esize);
    });
  }
}

std::string Staging::attribute(std::uint64_t off) const {
  for (const Region &r : regions_) {
    if (!r.arg.tensor) continue;
    const std::string name = r.arg.name;
    const std::uint64_t first = r.end - (r.empty ? 0 : static_cast<std::uint64_t>(r.max_off - r.min_off + 1) * r.esize);
    if (off >= r.lead_guard && off < r.lead_guard + page_)
      return std::to_string(first - off) + " bytes before the start of " + name;
    if (off >= r.end && off < r.end + page_) return std::to_string(off - r.end) + " bytes past the end of " + name;
  }
  return "";
}

void Staging::fill(wire::Tensor *dst, std::size_t first, std::size_t n) const {
  for (std::size_t i = first; i < first + n; ++i) {
    wire::Tensor &w = dst[i - first];
    w = wire::Tensor{};
    if (i >= regions_.size() || !regions_[i].arg.tensor) continue;
    const Region &r = regions_[i];
    const DLTensor &t = *r.arg.tensor;
    w.present = 1;
    w.ndim = t.ndim;
    w.dtype = t.dtype;
    w.device = t.device;
    for (std::size_t d = 0; d < r.shape.size(); ++d) {
      w.shape[d] = r.shape[d];
      w.strides[d] = r.strides[d];
    }
    w.elem0 = r.elem0;
    w.lead_guard = r.lead_guard;
    w.trail_guard = r.end;
  }
}

}  // namespace attncheck::sandbox
