// A case's features (case.h FeatureSpec) made concrete for its shape: what features_of derives from the seed.
#include "attncheck/case.h"

#include "attncheck/compare.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>

namespace attncheck {

namespace {

/// SplitMix64: a counter-based stream, so each derived value depends on (seed, what, index) only.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// Independent streams of the seed for each derived quantity.
enum class Stream : std::uint64_t {
  sinks = 1, mask = 2, seqlens_q = 3, seqlens_k = 4, pages = 5, dropout = 6, fp8 = 7, mask_rows = 8
};

/// FeatureSpec::mask_empty_rows: the share of a mask's rows that see no key (its first row always).
constexpr double kMaskEmptyRowShare = 0.25;

/// FP8 descales: float32 values log-uniform in [2^kDescaleMinLog2, 2^kDescaleMaxLog2] (amax / the format's largest for
/// tensors whose largest magnitude is 0.1 to a few hundred in e4m3fn), full 24-bit significands.
constexpr double kDescaleMinLog2 = -12, kDescaleMaxLog2 = -2;

class Derived {
 public:
  Derived(std::uint64_t seed, Stream s) : state_(mix(seed ^ mix(static_cast<std::uint64_t>(s)))) {}
  std::uint64_t next() { return state_ = mix(state_); }
  double unit() { return static_cast<double>(next() >> 11) * 0x1p-53; }
  std::int64_t uniform(std::int64_t lo, std::int64_t hi) {
    return lo + static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(hi - lo + 1));
  }

 private:
  std::uint64_t state_;
};

/// The largest byte of a boolean mask (uint8; FeatureSpec::mask_bytes draws its visible entries up to it).
constexpr std::int64_t kMaxByte = 255;

/// Sink logits: mostly N(0, 2²)-like values of a few bits, sometimes far below every logit (≡ no sink) or above.
constexpr double kSinkFar = 64;

/// A sequence length in [0, L]: the corners 0, 1 and L, or between.
std::int64_t length(Derived &d, std::int64_t L, std::int64_t least) {
  switch (d.uniform(0, 5)) {
    case 0: return std::max<std::int64_t>(least, 0);
    case 1: return std::max<std::int64_t>(least, std::min<std::int64_t>(1, L));
    case 2:
    case 3: return L;
    default: return d.uniform(least, L);
  }
}

}  // namespace

std::string FeatureSpec::describe() const {
  if (!bits) return "";
  std::ostringstream os;
  os << "features=" << feature_list(bits);
  if (bits & ATTNCHECK_FEATURE_WINDOW) os << " window=" << window_left << ',' << window_right;
  if (bits & ATTNCHECK_FEATURE_SOFTCAP) os << " softcap=" << softcap;
  if (bits & ATTNCHECK_FEATURE_MASK)
    os << " mask=" << (mask_kind == MaskKind::additive ? "additive" : "bool") << '[' << (mask_per_batch ? "B" : "1")
       << ',' << (mask_per_head ? "Hq" : "1") << "] keep=" << mask_keep << (mask_bytes ? " bytes=1..255" : "")
       << (mask_prefix > 0 ? " prefix=" + std::to_string(mask_prefix) : "") << (mask_empty_rows ? " empty-rows" : "");
  if (bits & ATTNCHECK_FEATURE_PAGED) os << " page_size=" << page_size;
  if (bits & ATTNCHECK_FEATURE_DROPOUT) os << " dropout=" << dropout_p;
  if (bits & ATTNCHECK_FEATURE_FP8) os << " fp8=" << fp8_name(fp8);
  if (top_left) os << " align=top-left";
  if (strided_args) os << " args=strided";
  os << " feature_seed=" << seed;
  return os.str();
}

double fp8_value(Fp8 format, double x) {
  return round_to_fp8(format, std::clamp(x, -fp8_max(format), fp8_max(format)));
}

Features features_of(const CaseSpec &spec) {
  const FeatureSpec &fs = spec.features;
  const Shape &s = spec.shape;
  Features f;
  if (!fs.bits) return f;
  f.top_left = fs.top_left;
  if (fs.strided_args) {  // spread 2 or 3, offset 1 to 3: from the seed's top bits (the values use its low ones)
    f.args_spread = 2 + static_cast<std::int64_t>(fs.seed >> 63);
    f.args_offset = 1 + static_cast<std::int64_t>((fs.seed >> 60) % 3);
  }
  if (fs.bits & ATTNCHECK_FEATURE_WINDOW) {
    f.window_left = fs.window_left;
    f.window_right = fs.window_right;
  }
  if (fs.bits & ATTNCHECK_FEATURE_SOFTCAP) f.softcap = fs.softcap;
  if (fs.bits & ATTNCHECK_FEATURE_ALIBI)
    for (std::int64_t h = 0; h < s.Hq; ++h)
      f.alibi_slopes.push_back(round_to(Dtype::f32, std::exp2(-8.0 * static_cast<double>(h + 1) /
                                                              static_cast<double>(s.Hq))));
  if (fs.bits & ATTNCHECK_FEATURE_SINKS) {
    Derived d(fs.seed, Stream::sinks);
    for (std::int64_t h = 0; h < s.Hq; ++h) {
      const std::int64_t kind = d.uniform(0, 7);
      const double x = kind == 0 ? -kSinkFar : kind == 1 ? kSinkFar / 8 : static_cast<double>(d.uniform(-32, 32)) / 8;
      f.sinks.push_back(x);
    }
  }
  if (fs.bits & ATTNCHECK_FEATURE_MASK) {
    Derived d(fs.seed, Stream::mask);
    f.mask_kind = fs.mask_kind;
    f.mask_B = fs.mask_per_batch ? s.B : 1;
    f.mask_H = fs.mask_per_head ? s.Hq : 1;
    f.mask.resize(static_cast<std::size_t>(f.mask_B * f.mask_H * s.Lq * s.Lk));
    bool hidden_row = false;
    Derived rows(fs.seed, Stream::mask_rows);  // its own stream: the entries' draws stay those of the seed
    for (std::size_t x = 0; x < f.mask.size(); ++x) {
      double &m = f.mask[x];
      const auto j = static_cast<std::int64_t>(x) % s.Lk;
      const bool keep = d.unit() < fs.mask_keep;
      if (fs.mask_kind == MaskKind::boolean)  // visible: 1, or any nonzero byte (mask_bytes)
        m = keep ? (fs.mask_bytes ? static_cast<double>(d.uniform(1, kMaxByte)) : 1) : 0;
      else  // small exact biases (multiples of 1/4 in [−4, 4]) where visible
        m = keep ? static_cast<double>(d.uniform(-16, 16)) / 4 : -std::numeric_limits<double>::infinity();
      // A hidden prefix, and rows that see no key: the whole row hidden from its first key on.
      if (j == 0) hidden_row = fs.mask_empty_rows && (x == 0 || rows.unit() < kMaskEmptyRowShare);
      if (j < fs.mask_prefix || hidden_row)
        m = fs.mask_kind == MaskKind::boolean ? 0 : -std::numeric_limits<double>::infinity();
    }
  }
  if (fs.bits & ATTNCHECK_FEATURE_VARLEN) {
    f.storage = KvStorage::varlen;
    Derived dq(fs.seed, Stream::seqlens_q), dk(fs.seed, Stream::seqlens_k);
    for (std::int64_t b = 0; b < s.B; ++b) {
      f.seqlens_q.push_back(length(dq, s.Lq, 0));
      f.seqlens_k.push_back(length(dk, s.Lk, 0));
    }
    // The logical shape is the longest sequence: one sequence has it (the others may be anything up to it).
    const std::size_t longest_q = static_cast<std::size_t>(dq.uniform(0, s.B - 1));
    const std::size_t longest_k = static_cast<std::size_t>(dk.uniform(0, s.B - 1));
    f.seqlens_q[longest_q] = s.Lq;
    f.seqlens_k[longest_k] = s.Lk;
    f.packed_layout = spec.layout == Layout::transposed || spec.layout == Layout::padded ? spec.layout : Layout::blhd;
  }
  if (fs.bits & ATTNCHECK_FEATURE_PAGED) {
    f.storage = KvStorage::paged;
    Derived d(fs.seed, Stream::pages);
    f.page_size = std::max<std::int64_t>(fs.page_size, 1);
    f.pages_per_seq = (s.Lk + f.page_size - 1) / f.page_size;
    const std::int64_t unused = d.uniform(0, 3);
    f.num_pages = s.B * f.pages_per_seq + unused;
    std::vector<std::int32_t> pages(static_cast<std::size_t>(f.num_pages));
    std::iota(pages.begin(), pages.end(), 0);
    for (std::size_t n = pages.size(); n > 1; --n)  // Fisher–Yates
      std::swap(pages[n - 1], pages[static_cast<std::size_t>(d.next() % n)]);
    f.block_table.assign(pages.begin(), pages.begin() + s.B * f.pages_per_seq);
    for (std::int64_t b = 0; b < s.B; ++b) f.seqlens_k.push_back(length(d, s.Lk, 1));
    f.seqlens_k[static_cast<std::size_t>(d.uniform(0, s.B - 1))] = s.Lk;
    f.packed_layout = spec.layout == Layout::transposed || spec.layout == Layout::padded ? spec.layout : Layout::blhd;
  }
  if (fs.bits & ATTNCHECK_FEATURE_DROPOUT) {
    f.dropout_p = fs.dropout_p;
    f.dropout_seed = Derived(fs.seed, Stream::dropout).next();
  }
  if (fs.bits & ATTNCHECK_FEATURE_FP8) {
    Derived d(fs.seed, Stream::fp8);
    f.fp8 = fs.fp8;
    for (double *x : {&f.descale_q, &f.descale_k, &f.descale_v})
      *x = round_to(Dtype::f32, std::exp2(kDescaleMinLog2 + (kDescaleMaxLog2 - kDescaleMinLog2) * d.unit()));
  }
  return f;
}

}  // namespace attncheck
