#include "attncheck/features.h"

#include "attncheck/problem.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

namespace attncheck {

std::uint32_t Features::bits() const {
  std::uint32_t b = 0;
  if (window()) b |= ATTNCHECK_FEATURE_WINDOW;
  if (softcap > 0) b |= ATTNCHECK_FEATURE_SOFTCAP;
  if (!alibi_slopes.empty()) b |= ATTNCHECK_FEATURE_ALIBI;
  if (!sinks.empty()) b |= ATTNCHECK_FEATURE_SINKS;
  if (mask_kind != MaskKind::none) b |= ATTNCHECK_FEATURE_MASK;
  if (storage == KvStorage::varlen) b |= ATTNCHECK_FEATURE_VARLEN;
  if (storage == KvStorage::paged) b |= ATTNCHECK_FEATURE_PAGED;
  if (dropout_p > 0) b |= ATTNCHECK_FEATURE_DROPOUT;
  if (fp8) b |= ATTNCHECK_FEATURE_FP8;
  return b;
}

std::string_view feature_name(std::uint32_t bit) {
  switch (bit) {
    case ATTNCHECK_FEATURE_WINDOW: return "window";
    case ATTNCHECK_FEATURE_SOFTCAP: return "softcap";
    case ATTNCHECK_FEATURE_ALIBI: return "alibi";
    case ATTNCHECK_FEATURE_SINKS: return "sinks";
    case ATTNCHECK_FEATURE_MASK: return "mask";
    case ATTNCHECK_FEATURE_VARLEN: return "varlen";
    case ATTNCHECK_FEATURE_PAGED: return "paged";
    case ATTNCHECK_FEATURE_DROPOUT: return "dropout";
    case ATTNCHECK_FEATURE_FP8: return "fp8";
    default: return "";
  }
}

std::string feature_list(std::uint32_t bits) {
  std::string s;
  for (std::uint32_t f : kAllFeatures) {
    if (!(bits & f)) continue;
    if (!s.empty()) s += '+';
    s += feature_name(f);
  }
  return s.empty() ? "none" : s;
}

std::uint32_t parse_feature_list(std::string_view text) {
  std::uint32_t bits = 0;
  while (!text.empty()) {
    const std::size_t comma = text.find_first_of(",+");
    const std::string_view name = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    if (name.empty() || name == "none") continue;
    std::uint32_t found = 0;
    for (std::uint32_t f : kAllFeatures)
      if (feature_name(f) == name) found = f;
    if (!found)
      throw std::invalid_argument("unknown feature '" + std::string(name) +
                                  "' (features: window, softcap, alibi, sinks, mask, varlen, paged, dropout, fp8)");
    bits |= found;
  }
  return bits;
}

std::string Features::describe() const {
  std::ostringstream os;
  auto sep = [&] {
    if (os.tellp() > 0) os << ' ';
  };
  if (window()) {
    sep();
    os << "window=" << window_left << ',' << window_right;
  }
  if (softcap > 0) {
    sep();
    os << "softcap=" << softcap;
  }
  auto list = [&](const char *name, const std::vector<double> &xs) {
    sep();
    os << name << '=';
    for (std::size_t n = 0; n < xs.size(); ++n) os << (n ? "," : "") << xs[n];
  };
  if (!alibi_slopes.empty()) list("alibi", alibi_slopes);
  if (!sinks.empty()) list("sinks", sinks);
  if (mask_kind != MaskKind::none) {
    sep();
    os << "mask=" << (mask_kind == MaskKind::boolean ? "bool" : "additive") << '[' << mask_B << ',' << mask_H
       << ",Lq,Lk]";
  }
  auto lengths = [&](const char *name, const std::vector<std::int64_t> &xs) {
    sep();
    os << name << '=';
    for (std::size_t n = 0; n < xs.size(); ++n) os << (n ? "," : "") << xs[n];
  };
  if (storage == KvStorage::varlen) {
    sep();
    os << "varlen";
    if (!seqlens_q.empty()) lengths("seqlens_q", seqlens_q);
    if (!seqlens_k.empty()) lengths("seqlens_k", seqlens_k);
  }
  if (storage == KvStorage::paged) {
    sep();
    os << "paged page_size=" << page_size << " pages=" << num_pages;
    if (!seqlens_k.empty()) lengths("seqused_k", seqlens_k);
  }
  if (dropout_p > 0) {
    sep();
    os << "dropout=" << dropout_p << " seed=" << dropout_seed;
  }
  if (fp8) {
    sep();
    os << "fp8=" << fp8_name(*fp8) << " descale=" << descale_q << ',' << descale_k << ',' << descale_v;
  }
  if (args_spread != 1 || args_offset != 0) {
    sep();
    os << "args=strided×" << args_spread << "+" << args_offset;
  }
  return os.str();
}

std::int64_t seq_rows(const Features &f, std::int64_t b, std::int64_t Lq) {
  return f.seqlens_q.empty() ? Lq : f.seqlens_q[static_cast<std::size_t>(b)];
}
std::int64_t seq_keys(const Features &f, std::int64_t b, std::int64_t Lk) {
  return f.seqlens_k.empty() ? Lk : f.seqlens_k[static_cast<std::size_t>(b)];
}

RowFrame row_frame(const Features &f, Mask m, std::int64_t b, std::int64_t i, std::int64_t Lq, std::int64_t Lk) {
  RowFrame fr;
  fr.Lq_b = seq_rows(f, b, Lq);
  fr.Lk_b = seq_keys(f, b, Lk);
  fr.exists = i < fr.Lq_b;
  fr.aligned = m == Mask::causal_top_left || f.top_left ? i : i + fr.Lk_b - fr.Lq_b;
  return fr;
}

double mask_value(const Features &f, std::int64_t Lq, std::int64_t Lk, std::int64_t b, std::int64_t h,
                  std::int64_t i, std::int64_t j) {
  if (f.mask_kind == MaskKind::none) return 1;
  const std::int64_t mb = f.mask_B == 1 ? 0 : b, mh = f.mask_H == 1 ? 0 : h;
  return f.mask[static_cast<std::size_t>(((mb * f.mask_H + mh) * Lq + i) * Lk + j)];
}

KeyRange key_range(const Features &f, Mask m, const RowFrame &fr) {
  if (!fr.exists) return {};
  KeyRange r{0, fr.Lk_b - 1};
  if (is_causal(m)) r.hi = std::min(r.hi, fr.aligned);
  if (f.window_left >= 0) r.lo = std::max(r.lo, fr.aligned - f.window_left);
  if (f.window_right >= 0) r.hi = std::min(r.hi, fr.aligned + f.window_right);
  return r;
}

KeyRange rows_key_range(const Features &f, Mask m, std::int64_t b, std::int64_t i0, std::int64_t i1, std::int64_t Lq,
                        std::int64_t Lk) {
  KeyRange u{Lk, -1};
  for (std::int64_t i = i0; i < i1; ++i) {
    const KeyRange r = key_range(f, m, row_frame(f, m, b, i, Lq, Lk));
    if (r.empty()) continue;
    u.lo = std::min(u.lo, std::max<std::int64_t>(r.lo, 0));
    u.hi = std::max(u.hi, std::min(r.hi, Lk - 1));
    if (u.lo == 0 && u.hi == Lk - 1) break;  // every key already
  }
  return u.empty() ? KeyRange{} : u;
}

bool sees(const Features &f, Mask m, const RowFrame &fr, std::int64_t Lq, std::int64_t Lk, std::int64_t b,
          std::int64_t h, std::int64_t i, std::int64_t j) {
  const KeyRange r = key_range(f, m, fr);
  if (j < r.lo || j > r.hi) return false;
  if (f.mask_kind == MaskKind::boolean) return mask_value(f, Lq, Lk, b, h, i, j) != 0;
  if (f.mask_kind == MaskKind::additive) return mask_value(f, Lq, Lk, b, h, i, j) != -INFINITY;
  return true;
}

double alibi_bias(const Features &f, const RowFrame &fr, std::int64_t h, std::int64_t j) {
  if (f.alibi_slopes.empty()) return 0;
  return -f.alibi_slopes[static_cast<std::size_t>(h)] * static_cast<double>(std::llabs(fr.aligned - j));
}

double logit_bias(const Features &f, const RowFrame &fr, std::int64_t Lq, std::int64_t Lk, std::int64_t b,
                  std::int64_t h, std::int64_t i, std::int64_t j) {
  double bias = alibi_bias(f, fr, h, j);
  if (f.mask_kind == MaskKind::additive) bias += mask_value(f, Lq, Lk, b, h, i, j);
  return bias;
}

double dropout_factor(const Features &f, std::int64_t Hq, std::int64_t Lq, std::int64_t Lk, std::int64_t b,
                      std::int64_t h, std::int64_t i, std::int64_t j) {
  if (!(f.dropout_p > 0)) return 1;
  const std::size_t n = dropout_index(Hq, Lq, Lk, b, h, i, j);
  return n < f.dropout_keep.size() && f.dropout_keep[n] ? 1 / (1 - f.dropout_p) : 0;
}

}  // namespace attncheck
