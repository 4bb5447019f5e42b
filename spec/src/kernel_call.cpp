#include "attncheck/kernel_call.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

namespace attncheck {

namespace {
thread_local std::optional<std::chrono::milliseconds> t_call_timeout, t_call_allowance;
}  // namespace

CallTimeout::CallTimeout(std::chrono::milliseconds limit) : previous_(t_call_timeout) { t_call_timeout = limit; }
CallTimeout::~CallTimeout() { t_call_timeout = previous_; }
std::chrono::milliseconds CallTimeout::current(std::chrono::milliseconds own) {
  if (t_call_allowance) own = std::max(own, *t_call_allowance);
  return t_call_timeout ? std::min(*t_call_timeout, own) : own;
}

CallAllowance::CallAllowance(std::chrono::milliseconds floor) : previous_(t_call_allowance) { t_call_allowance = floor; }
CallAllowance::~CallAllowance() { t_call_allowance = previous_; }

CallRecord &CallRecord::of_this_thread() {
  thread_local CallRecord record;
  return record;
}
std::chrono::nanoseconds &CallRecord::kernel_time() {
  thread_local std::chrono::nanoseconds total{0};
  return total;
}

Tensor make_out(const Shape &s, Dtype dt) { return Tensor::contiguous(dt, {s.B, s.Hq, s.Lq, s.Dv}); }
Tensor make_lse(const Shape &s) { return Tensor::contiguous(Dtype::f32, {s.B, s.Hq, s.Lq}); }

namespace {
/// What the last call of this thread threw, when it threw (timed_call): a kernel of C++ code may let an exception
/// through the C ABI; it is the kernel's failed call, not attncheck's trouble.
thread_local std::optional<std::string> t_thrown;

CallResult finish(const attncheck_kernel &kernel, int status) {
  CallResult r{status, {}};
  if (t_thrown) {
    r.message = "the kernel threw " + *std::exchange(t_thrown, std::nullopt);
    return r;
  }
  if (status != ATTNCHECK_OK && kernel.last_error) {
    const char *msg = kernel.last_error();
    if (msg) r.message = msg;
  }
  return r;
}

/// Runs one call of the kernel's entry point (`backward` or forward) on a problem of shape `s`, recording in
/// CallRecord its time, and its shape when the isolating runner stopped it at its timeout.
template <class Call>
int timed_call(const Shape &s, bool backward, Call &&call) {
  CallRecord &record = CallRecord::of_this_thread();
  const int timeouts = record.timeouts;
  const auto started = std::chrono::steady_clock::now();
  int status = ATTNCHECK_ERROR;
  t_thrown.reset();
  try {
    status = call();
  } catch (const std::exception &e) {
    t_thrown = std::string("an exception: ") + e.what();
  } catch (...) {
    t_thrown = "an exception that is not a std::exception";
  }
  const auto took = std::chrono::steady_clock::now() - started;
  CallRecord::kernel_time() += took;
  if (record.timeouts > timeouts) {
    if (!record.timed_out) {
      record.timed_out = s;
      record.timed_out_backward = backward;
    }
  } else if (status == ATTNCHECK_OK) {  // a declined call says nothing of its speed
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(took);
    (backward ? record.backward : record.forward).keep_larger({s.work(), ns, s});
    record.quickest = std::min(record.quickest.value_or(ns), ns);
  }
  return status;
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// A small tensor of the ABI 1.2 arguments (slopes, sinks, the mask, sequence offsets, block table) and its DLTensor
/// view: compact, or with its strides `spread` times the compact ones and `offset` elements into its storage, every
/// other element `poison` (Features::args_spread).
struct Small {
  std::vector<std::byte> bytes;
  std::vector<std::int64_t> shape, strides;
  DLTensor dl{};
  template <class T>
  void set(const std::vector<T> &values, DLDataType type, std::vector<std::int64_t> dims, std::int64_t spread = 1,
           std::int64_t offset = 0, T poison = T{}) {
    shape = std::move(dims);
    strides.assign(shape.size(), spread);
    for (std::size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
    const std::size_t n = values.empty() ? 0 : static_cast<std::size_t>(offset) + (values.size() - 1) *
                                                                                      static_cast<std::size_t>(spread) + 1;
    std::vector<T> storage(n, poison);
    for (std::size_t x = 0; x < values.size(); ++x)
      storage[static_cast<std::size_t>(offset) + x * static_cast<std::size_t>(spread)] = values[x];
    bytes.resize(storage.size() * sizeof(T));
    if (!storage.empty()) std::memcpy(bytes.data(), storage.data(), bytes.size());
    dl = DLTensor{};
    dl.byte_offset = static_cast<std::uint64_t>(offset) * sizeof(T);
    dl.data = bytes.data();
    dl.device = DLDevice{kDLCPU, 0};
    dl.ndim = static_cast<std::int32_t>(shape.size());
    dl.dtype = type;
    dl.shape = shape.data();
    dl.strides = strides.data();
  }
};

constexpr DLDataType kF32{kDLFloat, 32, 1}, kI32{kDLInt, 32, 1}, kU8{kDLUInt, 8, 1};
/// The poison between and before strided argument elements (Features::args_spread): a mask byte that reads as
/// visible, and an int32 no offset, length or page can be.
constexpr std::uint8_t kPoisonByte = 0x5a;
constexpr std::int32_t kPoisonInt = std::numeric_limits<std::int32_t>::min();

/// A tensor's values as float8 bits (DLPack uint8) with its strides and offset; padding holds the format's NaN.
struct Fp8Bytes {
  std::vector<std::byte, DLPackAllocator<std::byte>> bytes;
  std::vector<std::int64_t> shape, strides;
  DLTensor dl{};
  Fp8Bytes(const Tensor &t, Fp8 format) : shape(t.shape()), strides(t.strides()) {
    const std::vector<bool> element = t.element_mask();
    bytes.resize(static_cast<std::size_t>(t.storage_elems()));
    const std::uint8_t nan = double_to_fp8(std::numeric_limits<double>::quiet_NaN(), format);
    for (std::int64_t s = 0; s < t.storage_elems(); ++s)
      bytes[static_cast<std::size_t>(s)] =
          static_cast<std::byte>(element[static_cast<std::size_t>(s)] ? double_to_fp8(t.get_storage(s), format) : nan);
    dl.data = bytes.data();
    dl.device = DLDevice{kDLCPU, 0};
    dl.ndim = static_cast<std::int32_t>(shape.size());
    dl.dtype = DLDataType{kDLUInt, 8, 1};
    dl.shape = shape.data();
    dl.strides = strides.data();
    dl.byte_offset = static_cast<std::uint64_t>(t.offset());
  }
  Fp8Bytes(const Fp8Bytes &) = delete;
};

/// Prefix sums of per-sequence lengths: cu[b] = Σ_{b' < b} len[b'].
std::vector<std::int32_t> offsets_of(const std::vector<std::int64_t> &len) {
  std::vector<std::int32_t> cu{0};
  for (std::int64_t n : len) cu.push_back(cu.back() + static_cast<std::int32_t>(n));
  return cu;
}

/// A call's ABI 1.2 arguments and the physical tensors of its layout: alive for the call.
class FeatureCall {
 public:
  FeatureCall(const Problem &p) : p_(p), f_(p.features), s_(p.shape) {
    args.size = sizeof(attncheck_args);
    args.window_left = static_cast<std::int32_t>(f_.window_left);
    args.window_right = static_cast<std::int32_t>(f_.window_right);
    args.softcap = static_cast<float>(f_.softcap);
    auto floats = [](const std::vector<double> &xs) { return std::vector<float>(xs.begin(), xs.end()); };
    const std::int64_t spread = f_.args_spread, offset = f_.args_offset;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    if (!f_.alibi_slopes.empty()) {
      alibi_.set(floats(f_.alibi_slopes), kF32, {s_.Hq}, spread, offset, nan);
      args.alibi_slopes = &alibi_.dl;
    }
    if (!f_.sinks.empty()) {
      sinks_.set(floats(f_.sinks), kF32, {s_.Hq}, spread, offset, nan);
      args.sinks = &sinks_.dl;
    }
    if (f_.mask_kind != MaskKind::none) {
      const std::vector<std::int64_t> dims{f_.mask_B, f_.mask_H, s_.Lq, s_.Lk};
      if (f_.mask_kind == MaskKind::boolean)
        mask_.set(std::vector<std::uint8_t>(f_.mask.begin(), f_.mask.end()), kU8, dims, spread, offset,
                  kPoisonByte);
      else
        mask_.set(floats(f_.mask), kF32, dims, spread, offset, nan);
      args.attn_mask = &mask_.dl;
    }
    if (f_.storage == KvStorage::varlen) {
      cu_q_ = offsets_of(lengths(f_.seqlens_q, s_.Lq));
      cu_k_ = offsets_of(lengths(f_.seqlens_k, s_.Lk));
      cuq_.set(cu_q_, kI32, {s_.B + 1}, spread, offset, kPoisonInt);
      cuk_.set(cu_k_, kI32, {s_.B + 1}, spread, offset, kPoisonInt);
      args.cu_seqlens_q = &cuq_.dl;
      args.cu_seqlens_k = &cuk_.dl;
      args.max_seqlen_q = static_cast<std::int32_t>(s_.Lq);
      args.max_seqlen_k = static_cast<std::int32_t>(s_.Lk);
    }
    if (f_.storage == KvStorage::paged) {
      table_.set(f_.block_table, kI32, {s_.B, f_.pages_per_seq}, spread, offset, kPoisonInt);
      std::vector<std::int32_t> used;
      for (std::int64_t n : lengths(f_.seqlens_k, s_.Lk)) used.push_back(static_cast<std::int32_t>(n));
      used_.set(used, kI32, {s_.B}, spread, offset, kPoisonInt);
      args.block_table = &table_.dl;
      args.seqused_k = &used_.dl;
      args.page_size = static_cast<std::int32_t>(f_.page_size);
    }
    if (f_.dropout_p > 0) {
      args.dropout_p = static_cast<float>(f_.dropout_p);
      args.dropout_seed = f_.dropout_seed;
      std::vector<std::uint8_t> keep = f_.dropout_keep;
      keep.resize(static_cast<std::size_t>(s_.B * s_.Hq * s_.Lq * s_.Lk), kDropoutUnwritten);
      drop_.set(keep, kU8, {s_.B, s_.Hq, s_.Lq, s_.Lk});
      args.dropout_mask = &drop_.dl;
    }
    args.descale_q = args.descale_k = args.descale_v = 1;
    if (f_.fp8) {
      args.descale_q = static_cast<float>(f_.descale_q);
      args.descale_k = static_cast<float>(f_.descale_k);
      args.descale_v = static_cast<float>(f_.descale_v);
      args.fp8_format = static_cast<std::int32_t>(*f_.fp8);
    }
  }

  /// `t` as the kernel reads it: itself, or under FP8 its values' float8 bits in a byte tensor of the same strides
  /// (padding NaN).
  DLTensor input(const Tensor &t, std::optional<Fp8Bytes> &slot) const {
    if (!f_.fp8) return t.dl();
    slot.emplace(t, *f_.fp8);
    return slot->dl;
  }

  attncheck_params params() const {
    attncheck_params a = p_.params.to_abi();
    a.features = f_.bits();
    a.args = &args;
    return a;
  }

  /// The tensor the kernel reads for logical q (rows) or k, v (keys): packed (varlen), paged (k, v), or itself.
  const Tensor &rows_in(const Tensor &logical, std::optional<Tensor> &slot) {
    if (f_.storage != KvStorage::varlen) return logical;
    slot = pack(logical, cu_q_);
    return *slot;
  }
  const Tensor &keys_in(const Tensor &logical, std::optional<Tensor> &slot) {
    if (f_.storage == KvStorage::varlen) {
      slot = pack(logical, cu_k_);
      return *slot;
    }
    if (f_.storage == KvStorage::paged) {
      slot = page(logical);
      return *slot;
    }
    return logical;
  }
  /// An output of rows (out, lse, dq) or keys (dk, dv) as the kernel writes it: packed under varlen, else the logical one.
  Tensor *rows_out(Tensor &logical, std::optional<Tensor> &slot) { return packed_like(logical, slot, cu_q_); }
  Tensor *keys_out(Tensor &logical, std::optional<Tensor> &slot) { return packed_like(logical, slot, cu_k_); }
  /// Copies a packed output back into its logical tensor; elements past a sequence's length get `absent`.
  void unpack_rows(const std::optional<Tensor> &packed, Tensor &logical, double absent) const {
    unpack(packed, logical, cu_q_, absent);
  }
  void unpack_keys(const std::optional<Tensor> &packed, Tensor &logical, double absent) const {
    unpack(packed, logical, cu_k_, absent);
  }
  /// The dropout mask the kernel wrote.
  std::vector<std::uint8_t> dropout_mask() const {
    return std::vector<std::uint8_t>(reinterpret_cast<const std::uint8_t *>(drop_.bytes.data()),
                                     reinterpret_cast<const std::uint8_t *>(drop_.bytes.data()) + drop_.bytes.size());
  }

  attncheck_args args{};

 private:
  std::vector<std::int64_t> lengths(const std::vector<std::int64_t> &given, std::int64_t all) const {
    return given.empty() ? std::vector<std::int64_t>(static_cast<std::size_t>(s_.B), all) : given;
  }

  /// [B, H, L(, X)] → [1, H, Σ L_b(, X)] in the packed layout, sequence b's rows at cu[b].
  Tensor pack(const Tensor &logical, const std::vector<std::int32_t> &cu) const {
    std::optional<Tensor> t;
    packed_like(logical, t, cu);
    for_each_present(logical, cu, [&](std::span<const std::int64_t> at, std::span<const std::int64_t> from) {
      t->set(at, logical.get(from));
    });
    return std::move(*t);
  }

  /// Calls f(packed index, logical index) for every element of a sequence's own rows.
  template <class F>
  static void for_each_present(const Tensor &logical, const std::vector<std::int32_t> &cu, F &&f) {
    for_each_index(logical.shape(), [&](std::span<const std::int64_t> idx) {
      const std::size_t b = static_cast<std::size_t>(idx[0]);
      if (idx[2] >= cu[b + 1] - cu[b]) return;
      std::int64_t at[4] = {0, idx[1], cu[b] + idx[2], idx.size() == 4 ? idx[3] : 0};
      f(std::span<const std::int64_t>(at, idx.size()), idx);
    });
  }

  /// [B, Hkv, Lk, X] → pages [num_pages, Hkv, page_size, X]: key j of b in row j % page_size of its block table's
  /// page j / page_size; every other row (unused pages, the tail of a last page) NaN.
  Tensor page(const Tensor &logical) const {
    const std::int64_t H = logical.dim(1), X = logical.dim(3), ps = f_.page_size;
    Tensor t = Tensor::with_layout(logical.dtype(), {f_.num_pages, H, ps, X}, f_.packed_layout, kPad);
    t.fill_storage(kNaN);
    for (std::int64_t b = 0; b < s_.B; ++b)
      for (std::int64_t j = 0; j < seq_keys(f_, b, s_.Lk); ++j) {
        const std::int64_t pg = f_.block_table[static_cast<std::size_t>(b * f_.pages_per_seq + j / ps)];
        for (std::int64_t h = 0; h < H; ++h)
          for (std::int64_t x = 0; x < X; ++x) t.set({pg, h, j % ps, x}, logical.get({b, h, j, x}));
      }
    return t;
  }

  Tensor *packed_like(Tensor &logical, std::optional<Tensor> &slot, const std::vector<std::int32_t> &cu) const {
    if (f_.storage != KvStorage::varlen) return &logical;
    packed_like(static_cast<const Tensor &>(logical), slot, cu);
    return &*slot;
  }
  /// A NaN-filled packed tensor for `logical`: [1, H, Σ L_b, X] in the packed layout, or [1, H, Σ L_b] compact.
  void packed_like(const Tensor &logical, std::optional<Tensor> &slot, const std::vector<std::int32_t> &cu) const {
    std::vector<std::int64_t> shape = logical.shape();
    shape[0] = 1;
    shape[2] = cu.back();
    if (logical.rank() == 4)
      slot = Tensor::with_layout(logical.dtype(), shape, f_.packed_layout, kPad);
    else
      slot = Tensor(logical.dtype(), shape, {shape[1] * shape[2], shape[2], 1}, kPad, shape[1] * shape[2] + 2 * kPad);
    slot->fill_storage(kNaN);
  }

  void unpack(const std::optional<Tensor> &packed, Tensor &logical, const std::vector<std::int32_t> &cu,
              double absent) const {
    if (!packed) return;
    for_each_index(logical.shape(), [&](std::span<const std::int64_t> idx) { logical.set(idx, absent); });
    for_each_present(logical, cu, [&](std::span<const std::int64_t> at, std::span<const std::int64_t> from) {
      logical.set(from, packed->get(at));
    });
  }

  static constexpr std::int64_t kPad = 3;
  const Problem &p_;
  const Features &f_;
  const Shape &s_;
  std::vector<std::int32_t> cu_q_, cu_k_;
  Small alibi_, sinks_, mask_, cuq_, cuk_, table_, used_, drop_;
};
}  // namespace

CallResult call_forward(const attncheck_kernel &kernel, const Problem &p, Tensor &out, Tensor *lse,
                        std::vector<std::uint8_t> *dropout_keep) {
  if (!p.features.any()) {
    const attncheck_params params = p.params.to_abi();
    const DLTensor q = p.q.dl(), k = p.k.dl(), v = p.v.dl();
    DLTensor o = out.dl();
    DLTensor l{};
    if (lse) l = lse->dl();
    return finish(kernel, timed_call(p.shape, false,
                                     [&] { return kernel.forward(&params, &q, &k, &v, &o, lse ? &l : nullptr); }));
  }
  FeatureCall fc(p);
  const attncheck_params params = fc.params();
  std::optional<Tensor> pq, pk, pv, pout, plse;
  std::optional<Fp8Bytes> bq, bk, bv;
  const DLTensor q = fc.input(fc.rows_in(p.q, pq), bq), k = fc.input(fc.keys_in(p.k, pk), bk),
                 v = fc.input(fc.keys_in(p.v, pv), bv);
  DLTensor o = fc.rows_out(out, pout)->dl();
  DLTensor l{};
  if (lse) l = fc.rows_out(*lse, plse)->dl();
  const CallResult r = finish(
      kernel, timed_call(p.shape, false, [&] { return kernel.forward(&params, &q, &k, &v, &o, lse ? &l : nullptr); }));
  if (r.ok()) {
    fc.unpack_rows(pout, out, 0);
    if (lse) fc.unpack_rows(plse, *lse, -std::numeric_limits<double>::infinity());
  }
  if (dropout_keep && p.features.dropout_p > 0) *dropout_keep = fc.dropout_mask();
  return r;
}

CallResult call_backward(const attncheck_kernel &kernel, const Problem &p, const Tensor &out, const Tensor *lse,
                         Tensor &dq, Tensor &dk, Tensor &dv) {
  if (!kernel.backward) return CallResult{ATTNCHECK_UNSUPPORTED, "kernel has no backward"};
  if (!p.dout) throw std::invalid_argument("call_backward: the problem has no dout");
  if (!p.features.any()) {
    const attncheck_params params = p.params.to_abi();
    const DLTensor q = p.q.dl(), k = p.k.dl(), v = p.v.dl(), o = out.dl(), dout = p.dout->dl();
    DLTensor l{};
    if (lse) l = lse->dl();
    DLTensor gq = dq.dl(), gk = dk.dl(), gv = dv.dl();
    return finish(kernel, timed_call(p.shape, true, [&] {
                    return kernel.backward(&params, &q, &k, &v, &o, lse ? &l : nullptr, &dout, &gq, &gk, &gv);
                  }));
  }
  if (p.features.storage == KvStorage::paged)
    return CallResult{ATTNCHECK_UNSUPPORTED, "a paged KV cache has no backward in the ABI"};
  if (p.features.fp8) return CallResult{ATTNCHECK_UNSUPPORTED, "FP8 inputs have no backward in the ABI"};
  FeatureCall fc(p);
  const attncheck_params params = fc.params();
  std::optional<Tensor> pq, pk, pv, pout, plse, pdout, pdq, pdk, pdv;
  const DLTensor q = fc.rows_in(p.q, pq).dl(), k = fc.keys_in(p.k, pk).dl(), v = fc.keys_in(p.v, pv).dl();
  const DLTensor o = fc.rows_in(out, pout).dl(), dout = fc.rows_in(*p.dout, pdout).dl();
  DLTensor l{};
  if (lse) l = fc.rows_in(*lse, plse).dl();
  DLTensor gq = fc.rows_out(dq, pdq)->dl(), gk = fc.keys_out(dk, pdk)->dl(), gv = fc.keys_out(dv, pdv)->dl();
  const CallResult r = finish(kernel, timed_call(p.shape, true, [&] {
                                 return kernel.backward(&params, &q, &k, &v, &o, lse ? &l : nullptr, &dout, &gq, &gk, &gv);
                               }));
  if (r.ok()) {
    fc.unpack_rows(pdq, dq, 0);
    fc.unpack_keys(pdk, dk, 0);
    fc.unpack_keys(pdv, dv, 0);
  }
  return r;
}

}  // namespace attncheck
