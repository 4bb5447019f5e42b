// "flash": FlashAttention-2 (Dao, 2023) on the CPU, float32 arithmetic on float32/float16/bfloat16 storage.
//
// Forward, one task per (batch, query head, query block of kBlockQ rows):
//   for each key block of kBlockK keys (causal: only blocks some row of the tile sees):
//     S = scale·Q Kᵀ (masked to −∞ on the diagonal blocks only), m' = max(m, rowmax S),
//     P = exp(S − m'), l = e^{m−m'}·l + rowsum P, O = e^{m−m'}·O + P V, m = m'
//   O /= l, LSE = m + log l.     No L_q × L_k buffer: S and P are one kBlockQ × kBlockK tile.
// Backward recomputes P = exp(S − LSE) from the forward's LSE, with D_i = Σ_c dO_ic O_ic:
//   dV = Pᵀ dO,  dP = dO Vᵀ,  dS = P ⊙ (dP − D),  dQ = scale·dS K,  dK = scale·dSᵀ Q.
// It runs as two passes that need no atomics and give results independent of the thread count:
//   pass 1, one task per (batch, query head, query block): D for the block, then dQ over the key blocks;
//   pass 2, one task per (batch, kv head, key block): dK and dV over the query blocks of every query head of the
//   group (GQA sums without copying kv heads).
// Tiles are loaded into contiguous float32 scratch (converted from float16/bfloat16 on the way), K and V also
// transposed where a product needs them so; every product is then C (+)= A·B or C (+)= Aᵀ·B on row-major tiles
// run by the Highway kernels of flash_simd.h (register-blocked FMA, vectorized exp), dispatched per CPU.
#include "common.h"
#include "flash_simd.h"

#include <hwy/aligned_allocator.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <vector>

namespace attncheck::builtin {

namespace {
constexpr const char *kName = "flash";

/// Query rows per tile. Per thread the forward keeps Q (kBlockQ × D), Kᵀ (D × kBlockK), V (kBlockK × Dv), the
/// O accumulator (kBlockQ × Dv) and S/P (kBlockQ × kBlockK) in float32: 4·64·128·4 B + 16 KiB = 144 KiB at
/// D = Dv = 128 (272 KiB at 256), inside a core's L2 (1–2 MiB); a key tile (32 KiB at D = 128) streams through L1.
constexpr std::int64_t kBlockQ = 64;
/// Keys per tile (see kBlockQ); also the leading dimension of the S/P tile and of the transposed K and V tiles.
constexpr std::int64_t kBlockK = 64;
/// Scratch rows are padded to a multiple of this many floats: 64 bytes, one cache line and one AVX-512 vector —
/// the padding the SIMD loops of flash_simd.h run into.
constexpr std::int64_t kAlignFloats = simd::kTilePadFloats;
static_assert(kBlockK % kAlignFloats == 0, "kBlockK is the padded leading dimension of S, P, Kᵀ and Vᵀ tiles");
constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
constexpr float kLn2 = 0.693147180559945309f;

constexpr std::int64_t round_up(std::int64_t x, std::int64_t a) { return (x + a - 1) / a * a; }
constexpr std::int64_t ceil_div(std::int64_t x, std::int64_t a) { return (x + a - 1) / a; }

int report(const std::exception &e) { return fail(ATTNCHECK_ERROR, std::string(kName) + ": " + e.what()); }

// ---- scratch ----

/// Bump allocator over one thread's scratch slice. With a null base it only measures (sizes the slices).
class Arena {
 public:
  explicit Arena(float *base) : base_(base) {}
  /// n floats, 64-byte aligned when the base is.
  float *take(std::int64_t n) {
    float *p = base_ ? base_ + used_ : nullptr;
    used_ += round_up(n, kAlignFloats);
    return p;
  }
  std::int64_t used() const { return used_; }

 private:
  float *base_;
  std::int64_t used_ = 0;
};

/// One aligned allocation split into per-thread slices of the size `Layout(Arena&)` takes.
class Scratch {
 public:
  template <class Layout>
  Scratch(int threads, Layout &&layout) {
    Arena probe(nullptr);
    layout(probe);
    per_thread_ = round_up(std::max<std::int64_t>(probe.used(), 1), kAlignFloats);
    buf_ = hwy::AllocateAligned<float>(static_cast<std::size_t>(per_thread_ * threads));
    if (!buf_) throw std::bad_alloc();
    // Zeroed once so that tile padding, which the SIMD loops read, holds finite values from the start.
    std::memset(buf_.get(), 0, static_cast<std::size_t>(per_thread_ * threads) * sizeof(float));
  }
  float *slice(int thread) const { return buf_.get() + per_thread_ * thread; }

 private:
  std::int64_t per_thread_ = 0;
  hwy::AlignedFreeUniquePtr<float[]> buf_;
};

/// Runs f(task, thread) for task in [0, n) on up to `threads` OpenMP threads (dynamic schedule: causal tasks
/// differ in cost). f must not throw.
template <class F>
void parallel_tasks(std::int64_t n, int threads, F &&f) {
  const int nt = static_cast<int>(std::min<std::int64_t>(threads, std::max<std::int64_t>(n, 1)));
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    const int t = omp_get_thread_num();
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t task = 0; task < n; ++task) f(task, t);
  }
}

// ---- tile transfer (strided storage of any dtype <-> contiguous float32) ----

/// d[x] = element base + x (contiguous), widened.
void widen_contiguous(const std::byte *p, Dtype dt, std::int64_t base, std::int64_t n, float *d) {
  simd::widen(p + base * dtype_size(dt), dt, n, d);
}

/// dst[r·ld + x] = t[b, h, l0 + r, x] for r < nl, x < X = t.n[3].
void load_rows(const View &t, std::int64_t b, std::int64_t h, std::int64_t l0, std::int64_t nl, float *dst,
               std::int64_t ld) {
  const std::int64_t X = t.n[3];
  for (std::int64_t r = 0; r < nl; ++r) {
    const std::int64_t base = t.offset(b, h, l0 + r, 0);
    float *d = dst + r * ld;
    if (t.s[3] == 1) {
      widen_contiguous(t.data, t.dtype, base, X, d);
    } else {
      for (std::int64_t x = 0; x < X; ++x) d[x] = load_elem(t.data, t.dtype, base + x * t.s[3]);
    }
  }
}

/// Rows a transposed load widens at a time into its staging buffer before transposing them.
constexpr std::int64_t kTransposeRows = 16;

/// Transposed tile: dst[x·ld + r] = t[b, h, l0 + r, x] for r < nl, x < X = t.n[3]. `stage` holds
/// kTransposeRows × round_up(X, kAlignFloats) floats: rows with a contiguous X are widened there by SIMD loads
/// first, so the transpose itself is a plain float32 copy instead of a per-element dtype conversion.
void load_rows_t(const View &t, std::int64_t b, std::int64_t h, std::int64_t l0, std::int64_t nl, float *dst,
                 std::int64_t ld, float *stage) {
  const std::int64_t X = t.n[3];
  if (t.s[2] == 1) {  // L is the contiguous dimension: the transposed tile is a plain copy
    for (std::int64_t x = 0; x < X; ++x) widen_contiguous(t.data, t.dtype, t.offset(b, h, l0, x), nl, dst + x * ld);
    return;
  }
  const std::int64_t lds = round_up(X, kAlignFloats);
  for (std::int64_t r0 = 0; r0 < nl; r0 += kTransposeRows) {
    const std::int64_t nr = std::min(kTransposeRows, nl - r0);
    load_rows(t, b, h, l0 + r0, nr, stage, lds);
    for (std::int64_t x = 0; x < X; ++x) {
      float *d = dst + x * ld + r0;
      for (std::int64_t r = 0; r < nr; ++r) d[r] = stage[r * lds + x];
    }
  }
}

/// t[b, h, l0 + r, x] = src[r·ld + x] rounded to t's dtype, for r < nl, x < X = t.n[3].
void store_rows(const View &t, std::int64_t b, std::int64_t h, std::int64_t l0, std::int64_t nl, const float *src,
                std::int64_t ld) {
  const std::int64_t X = t.n[3];
  for (std::int64_t r = 0; r < nl; ++r) {
    const std::int64_t base = t.offset(b, h, l0 + r, 0);
    const float *s = src + r * ld;
    if (t.s[3] == 1) {
      simd::narrow(s, t.dtype, X, t.data + base * dtype_size(t.dtype));
    } else {
      for (std::int64_t x = 0; x < X; ++x) store_elem(t.data, t.dtype, base + x * t.s[3], s[x]);
    }
  }
}

// ---- tile arithmetic (row-major float32 tiles; the innermost loops are contiguous axpys) ----

/// Visibility of the tile rows [i0, i0 + nq) × keys [j0, j0 + nk).
enum class TileMask { all_visible, partial, none_visible };
TileMask tile_mask(const Operands &o, std::int64_t i0, std::int64_t nq, std::int64_t j0, std::int64_t nk) {
  if (o.mask == Mask::none) return TileMask::all_visible;
  // The first row of the tile sees the fewest keys, the last row the most.
  if (j0 + nk <= visible_keys(o, i0)) return TileMask::all_visible;
  if (j0 >= visible_keys(o, i0 + nq - 1)) return TileMask::none_visible;
  return TileMask::partial;
}

/// simd::gemm's band for a product summing over the keys j0 + p of a tile into its query columns i0 + c: key
/// j0 + p is visible to query i0 + c iff p ≤ c + band (causal: j ≤ i + Lk − Lq). Products whose A operand holds
/// key data (V, K) take it on partial tiles, so that a hidden key's values never meet its zero P or dS: 0·∞ = NaN.
std::int64_t causal_band(const Operands &o, std::int64_t i0, std::int64_t j0) {
  return i0 + o.shape.Lk - o.shape.Lq - j0;
}

/// Sets S[r][j] = fill for the keys j0 + j that tile row r (query i0 + r) does not see.
void mask_tile(const Operands &o, std::int64_t i0, std::int64_t nq, std::int64_t j0, std::int64_t nk, float *S,
               std::int64_t lds, float fill) {
  for (std::int64_t r = 0; r < nq; ++r) {
    const std::int64_t first_hidden = std::clamp<std::int64_t>(visible_keys(o, i0 + r) - j0, 0, nk);
    std::fill(S + r * lds + first_hidden, S + r * lds + nk, fill);
  }
}

// ---- forward ----

/// Leading dimensions of the tiles of one problem.
struct Lds {
  std::int64_t d, dv;
  explicit Lds(const Shape &s) : d(round_up(s.D, kAlignFloats)), dv(round_up(s.Dv, kAlignFloats)) {}
};

/// K or V tile of the forward as the A operand of a product: element (j, x) = a[j·row + x·col] (key j of the
/// tile, feature x). float32 storage is read in place, whatever its strides; float16/bfloat16 tiles are widened
/// once per key block into row-major scratch (ld floats per row).
struct KeyTile {
  const float *a;
  std::int64_t row, col;
};
KeyTile key_tile(const View &t, std::int64_t b, std::int64_t h, std::int64_t j0, std::int64_t nk, float *scratch,
                 std::int64_t ld) {
  if (t.dtype == Dtype::f32) {
    const std::byte *p = t.data + t.offset(b, h, j0, 0) * 4;
    if (reinterpret_cast<std::uintptr_t>(p) % alignof(float) == 0)
      return {reinterpret_cast<const float *>(p), t.s[2], t.s[3]};
  }
  load_rows(t, b, h, j0, nk, scratch, ld);
  return {scratch, ld, 1};
}

/// Query blocks of one forward task: they share each key block's K and V, widened once for all of them when the
/// storage is float16/bfloat16 (float32 is read in place).
constexpr std::int64_t kForwardQBlocks = 2;
/// Keys per forward step: the Oᵀ accumulator makes one trip through registers (load, rescale, store) per step, so
/// longer steps amortize it over more FMAs; Sᵀ/Pᵀ is kForwardBlockK × kBlockQ floats (32 KiB).
constexpr std::int64_t kForwardBlockK = 128;

/// The forward works on transposed tiles, one query per column (kBlockQ columns: every vector of a row is full):
///   Qᵀ (D × kBlockQ, pre-multiplied by scale·log2 e), Sᵀ/Pᵀ (kForwardBlockK × kBlockQ), Oᵀ (Dv × kBlockQ);
/// Sᵀ = K·Qᵀ and Oᵀ = diag(alpha)·Oᵀ + Vᵀ·Pᵀ broadcast K and V elements straight from their storage, so no key
/// tile is ever transposed, and the softmax statistics m, l, alpha are vectors across the query columns.
struct QueryBlockTiles {
  float *qt, *s, *ot, *m, *l, *alpha;
  QueryBlockTiles(Arena &a, const Shape &sh)
      : qt(a.take(sh.D * kBlockQ)), s(a.take(kForwardBlockK * kBlockQ)), ot(a.take(sh.Dv * kBlockQ)), m(a.take(kBlockQ)),
        l(a.take(kBlockQ)), alpha(a.take(kBlockQ)) {}
};
struct ForwardTiles {
  float *k, *v, *orows, *stage;
  std::vector<QueryBlockTiles> blocks;
  ForwardTiles(Arena &a, const Shape &sh, const Lds &ld)
      : k(a.take(kForwardBlockK * ld.d)), v(a.take(kForwardBlockK * ld.dv)), orows(a.take(kBlockQ * ld.dv)),
        stage(a.take(kTransposeRows * std::max(ld.d, ld.dv))) {
    for (std::int64_t i = 0; i < kForwardQBlocks; ++i) blocks.emplace_back(a, sh);
  }
};

/// Sets Sᵀ[j][c] = fill for the keys j0 + j that query i0 + c (column c) does not see.
void mask_tile_t(const Operands &o, std::int64_t i0, std::int64_t nq, std::int64_t j0, std::int64_t nk, float *St,
                 std::int64_t lds, float fill) {
  for (std::int64_t c = 0; c < nq; ++c) {
    const std::int64_t first_hidden = std::clamp<std::int64_t>(visible_keys(o, i0 + c) - j0, 0, nk);
    for (std::int64_t j = first_hidden; j < nk; ++j) St[j * lds + c] = fill;
  }
}

/// Forward of the query blocks qb0, qb0 + 1, … (up to kForwardQBlocks, within Lq) of head h.
void forward_task(const Operands &o, const Lds &ld, const ForwardTiles &t, std::int64_t b, std::int64_t h,
                  std::int64_t qb0) {
  const Shape &s = o.shape;
  const std::int64_t hk = s.kv_head(h);
  const std::int64_t nb = std::min(kForwardQBlocks, ceil_div(s.Lq, kBlockQ) - qb0);
  const float scale_log2e = static_cast<float>(o.scale * 1.4426950408889634);  // one rounding of scale·log2 e
  std::int64_t i0[kForwardQBlocks], nq[kForwardQBlocks], key_end[kForwardQBlocks];
  bool first[kForwardQBlocks];
  std::int64_t all_key_end = 0;
  for (std::int64_t q = 0; q < nb; ++q) {
    const QueryBlockTiles &qt = t.blocks[static_cast<std::size_t>(q)];
    i0[q] = (qb0 + q) * kBlockQ;
    nq[q] = std::min(kBlockQ, s.Lq - i0[q]);
    // Keys past what the block's last row sees are masked for every row: skip their blocks.
    key_end[q] = visible_keys(o, i0[q] + nq[q] - 1);
    all_key_end = std::max(all_key_end, key_end[q]);
    first[q] = true;
    // Qᵀ·scale·log2 e: applied to q once per query block (one rounding per element, like a scaled product); the
    // softmax then runs in base 2 (exp2), and m·ln 2 + ln l gives the natural-log LSE.
    load_rows_t(o.q, b, h, i0[q], nq[q], qt.qt, kBlockQ, t.stage);
    if (nq[q] < kBlockQ)  // columns of absent queries: finite, ignored
      for (std::int64_t x = 0; x < s.D; ++x) std::fill(qt.qt + x * kBlockQ + nq[q], qt.qt + (x + 1) * kBlockQ, 0.0f);
    simd::scale(qt.qt, kBlockQ, s.D, nq[q], scale_log2e);
    std::fill(qt.m, qt.m + kBlockQ, kMinusInf);
    std::fill(qt.l, qt.l + kBlockQ, 0.0f);
  }
  for (std::int64_t j0 = 0; j0 < all_key_end; j0 += kForwardBlockK) {
    const std::int64_t nk_all = std::min(kForwardBlockK, all_key_end - j0);
    const KeyTile kt = key_tile(o.k, b, hk, j0, nk_all, t.k, ld.d), vt = key_tile(o.v, b, hk, j0, nk_all, t.v, ld.dv);
    for (std::int64_t q = 0; q < nb; ++q) {
      if (j0 >= key_end[q]) continue;
      const QueryBlockTiles &qt = t.blocks[static_cast<std::size_t>(q)];
      const std::int64_t nk = std::min(kForwardBlockK, key_end[q] - j0);
      simd::gemm(kt.a, kt.row, kt.col, qt.qt, kBlockQ, qt.s, kBlockQ, nk, nq[q], s.D, false);  // Sᵀ·log2 e
      // Hidden scores are overwritten (whatever a hidden k made of them) and hidden values skipped.
      std::int64_t band = simd::kNoBand;
      if (tile_mask(o, i0[q], nq[q], j0, nk) == TileMask::partial) {
        mask_tile_t(o, i0[q], nq[q], j0, nk, qt.s, kBlockQ, kMinusInf);
        band = causal_band(o, i0[q], j0);
      }
      simd::online_softmax_cols(qt.s, kBlockQ, nk, nq[q], qt.m, qt.l, qt.alpha);
      // Oᵀ = Oᵀ·diag(alpha) + Vᵀ·Pᵀ (Vᵀ(x, j) = V[j][x]); the first block overwrites.
      simd::gemm(vt.a, vt.col, vt.row, qt.s, kBlockQ, qt.ot, kBlockQ, s.Dv, nq[q], nk, !first[q], qt.alpha, band);
      first[q] = false;
    }
  }
  for (std::int64_t q = 0; q < nb; ++q) {
    const QueryBlockTiles &qt = t.blocks[static_cast<std::size_t>(q)];
    if (first[q]) std::fill(qt.ot, qt.ot + s.Dv * kBlockQ, 0.0f);  // no key block at all (no row sees a key)
    for (std::int64_t c = 0; c < nq[q]; ++c) {
      if (qt.l[c] == 0.0f) {  // the row sees no key: O = 0, LSE = −∞
        for (std::int64_t x = 0; x < s.Dv; ++x) qt.ot[x * kBlockQ + c] = 0.0f;
        qt.l[c] = 1.0f;  // divides the zeros below
        qt.m[c] = kMinusInf;
      } else {
        qt.m[c] = qt.m[c] * kLn2 + std::log(qt.l[c]);  // m (base 2) becomes the natural-log LSE
      }
    }
    for (std::int64_t c = nq[q]; c < kBlockQ; ++c) qt.l[c] = 1.0f;
    simd::divide_cols(qt.ot, kBlockQ, s.Dv, nq[q], qt.l);
    for (std::int64_t x = 0; x < s.Dv; ++x)
      for (std::int64_t c = 0; c < nq[q]; ++c) t.orows[c * ld.dv + x] = qt.ot[x * kBlockQ + c];
    store_rows(o.out, b, h, i0[q], nq[q], t.orows, ld.dv);
    if (o.lse.data)
      for (std::int64_t r = 0; r < nq[q]; ++r) o.lse.at(b, h, i0[q] + r) = qt.m[r];
  }
}

// ---- backward ----

/// P = exp(S − LSE) on a tile of scores (already scaled); 0 where masked and in rows without keys (LSE = −∞).
void probabilities(const Operands &o, std::int64_t i0, std::int64_t nq, std::int64_t j0, std::int64_t nk,
                   const float *lse, float *S) {
  simd::exp_minus_lse(S, kBlockK, nq, nk, lse);
  if (tile_mask(o, i0, nq, j0, nk) == TileMask::partial) mask_tile(o, i0, nq, j0, nk, S, kBlockK, 0.0f);
}

// Pass 1 (dQ) works on transposed tiles like the forward: Qᵀ·scale and dOᵀ are packed once per query block, K and V
// are read in place per key block:  Sᵀ = K·Qᵀ, Pᵀ = exp(Sᵀ − LSE), dPᵀ = V·dOᵀ, dSᵀ = Pᵀ ⊙ (dPᵀ − D), dQᵀ += Kᵀ·dSᵀ.
// Pass 2 (dK, dV) is its mirror: Kᵀ·scale and Vᵀ are packed once per key block, Q and dO are read in place per
// query block:  S = Q·Kᵀ, P, dP = dO·Vᵀ, dS,  dVᵀ += dOᵀ·P,  dKᵀ += Qᵀ·dS.

/// Transposes the first `cols` columns of a (rows × cols, ld ldt) tile into rows of `dst` (ld ldd) and stores
/// them as t[b, h, l0 + c, ·] for c < cols.
void store_transposed(const View &t, std::int64_t b, std::int64_t h, std::int64_t l0, std::int64_t cols,
                      const float *tile, std::int64_t ldt, std::int64_t rows, float *dst, std::int64_t ldd) {
  for (std::int64_t x = 0; x < rows; ++x)
    for (std::int64_t c = 0; c < cols; ++c) dst[c * ldd + x] = tile[x * ldt + c];
  store_rows(t, b, h, l0, cols, dst, ldd);
}

/// Transposed tile of `n` ≤ kBlockQ columns (rows × kBlockQ), its columns n.. zeroed, then scaled by `scale`.
void load_packed_t(const View &t, std::int64_t b, std::int64_t h, std::int64_t l0, std::int64_t n, float *dst,
                   float *stage, float scale) {
  const std::int64_t rows = t.n[3];
  load_rows_t(t, b, h, l0, n, dst, kBlockQ, stage);
  if (n < kBlockQ)
    for (std::int64_t x = 0; x < rows; ++x) std::fill(dst + x * kBlockQ + n, dst + (x + 1) * kBlockQ, 0.0f);
  if (scale != 1.0f) simd::scale(dst, kBlockQ, rows, n, scale);
}

struct DqTiles {
  float *qt, *dot, *s, *dp, *dqt, *k, *v, *orows, *dorows, *lse, *delta, *stage;
  DqTiles(Arena &a, const Shape &sh, const Lds &ld)
      : qt(a.take(sh.D * kBlockQ)), dot(a.take(sh.Dv * kBlockQ)), s(a.take(kBlockK * kBlockQ)),
        dp(a.take(kBlockK * kBlockQ)), dqt(a.take(sh.D * kBlockQ)), k(a.take(kBlockK * ld.d)),
        v(a.take(kBlockK * ld.dv)), orows(a.take(kBlockQ * std::max(ld.d, ld.dv))), dorows(a.take(kBlockQ * ld.dv)),
        lse(a.take(kBlockQ)), delta(a.take(kBlockQ)), stage(a.take(kTransposeRows * std::max(ld.d, ld.dv))) {}
};

/// Pass 1 task: D for query block qb of head h (saved to `delta_out`, [B,Hq,Lq]) and its dQ.
void dq_task(const Operands &o, const Lds &ld, const DqTiles &t, float *delta_out, std::int64_t b, std::int64_t h,
             std::int64_t qb) {
  const Shape &s = o.shape;
  const std::int64_t hk = s.kv_head(h), i0 = qb * kBlockQ, nq = std::min(kBlockQ, s.Lq - i0);
  const float scale = static_cast<float>(o.scale);
  load_packed_t(o.q, b, h, i0, nq, t.qt, t.stage, scale);
  load_packed_t(o.dout, b, h, i0, nq, t.dot, t.stage, 1.0f);
  load_rows(o.dout, b, h, i0, nq, t.dorows, ld.dv);
  load_rows(o.out, b, h, i0, nq, t.orows, ld.dv);
  simd::row_dots(t.dorows, ld.dv, t.orows, ld.dv, nq, s.Dv, t.delta);
  std::copy(t.delta, t.delta + nq, delta_out + lse_offset(s, b, h, i0));
  for (std::int64_t c = 0; c < kBlockQ; ++c) t.lse[c] = c < nq ? o.lse.at(b, h, i0 + c) : 0.0f;
  std::fill(t.delta + nq, t.delta + kBlockQ, 0.0f);
  const std::int64_t key_end = visible_keys(o, i0 + nq - 1);
  bool first = true;
  for (std::int64_t j0 = 0; j0 < key_end; j0 += kBlockK) {
    const std::int64_t nk = std::min(kBlockK, key_end - j0);
    const KeyTile kt = key_tile(o.k, b, hk, j0, nk, t.k, ld.d), vt = key_tile(o.v, b, hk, j0, nk, t.v, ld.dv);
    simd::gemm(kt.a, kt.row, kt.col, t.qt, kBlockQ, t.s, kBlockQ, nk, nq, s.D, false);  // Sᵀ = K·(scale·Qᵀ)
    simd::exp_minus_lse_cols(t.s, kBlockQ, nk, nq, t.lse);
    simd::gemm(vt.a, vt.row, vt.col, t.dot, kBlockQ, t.dp, kBlockQ, nk, nq, s.Dv, false);  // dPᵀ = V·dOᵀ
    simd::score_gradient_cols(t.s, t.dp, kBlockQ, nk, nq, t.delta);
    // dS = 0 where hidden, whatever a hidden k or v made of P and dP; the hidden k are then skipped.
    std::int64_t band = simd::kNoBand;
    if (tile_mask(o, i0, nq, j0, nk) == TileMask::partial) {
      mask_tile_t(o, i0, nq, j0, nk, t.dp, kBlockQ, 0.0f);
      band = causal_band(o, i0, j0);
    }
    simd::gemm(kt.a, kt.col, kt.row, t.dp, kBlockQ, t.dqt, kBlockQ, s.D, nq, nk, !first, nullptr,
               band);  // dQᵀ += Kᵀ·dSᵀ
    first = false;
  }
  if (first) std::fill(t.dqt, t.dqt + s.D * kBlockQ, 0.0f);
  simd::scale(t.dqt, kBlockQ, s.D, nq, scale);
  store_transposed(o.dq, b, h, i0, nq, t.dqt, kBlockQ, s.D, t.orows, ld.d);
}

struct DkvTiles {
  float *kt, *vt, *s, *dp, *dkt, *dvt, *q, *dout, *rows, *lse, *delta, *stage;
  DkvTiles(Arena &a, const Shape &sh, const Lds &ld)
      : kt(a.take(sh.D * kBlockK)), vt(a.take(sh.Dv * kBlockK)), s(a.take(kBlockQ * kBlockK)),
        dp(a.take(kBlockQ * kBlockK)), dkt(a.take(sh.D * kBlockK)), dvt(a.take(sh.Dv * kBlockK)),
        q(a.take(kBlockQ * ld.d)), dout(a.take(kBlockQ * ld.dv)), rows(a.take(kBlockK * std::max(ld.d, ld.dv))),
        lse(a.take(kBlockQ)), delta(a.take(kBlockQ)), stage(a.take(kTransposeRows * std::max(ld.d, ld.dv))) {}
};
static_assert(kBlockQ == kBlockK, "load_packed_t packs key tiles with kBlockQ columns");

/// Pass 2 task: dK and dV of key block kb of kv head hk, summed over the query heads of its group.
void dkv_task(const Operands &o, const Lds &ld, const DkvTiles &t, const float *delta, std::int64_t b,
              std::int64_t hk, std::int64_t kb) {
  const Shape &s = o.shape;
  const std::int64_t j0 = kb * kBlockK, nk = std::min(kBlockK, s.Lk - j0);
  const float scale = static_cast<float>(o.scale);
  load_packed_t(o.k, b, hk, j0, nk, t.kt, t.stage, scale);
  load_packed_t(o.v, b, hk, j0, nk, t.vt, t.stage, 1.0f);
  // Causal: query i sees key j0 iff i ≥ j0 − (Lk − Lq); earlier query rows contribute nothing.
  const std::int64_t i_first = o.mask == Mask::none ? 0 : std::max<std::int64_t>(0, j0 - (s.Lk - s.Lq));
  bool first = true;
  for (std::int64_t h = hk * s.group(); h < (hk + 1) * s.group(); ++h)
    for (std::int64_t i0 = i_first; i0 < s.Lq; i0 += kBlockQ) {
      const std::int64_t nq = std::min(kBlockQ, s.Lq - i0);
      const KeyTile qa = key_tile(o.q, b, h, i0, nq, t.q, ld.d), da = key_tile(o.dout, b, h, i0, nq, t.dout, ld.dv);
      for (std::int64_t r = 0; r < nq; ++r) t.lse[r] = o.lse.at(b, h, i0 + r);
      std::copy(delta + lse_offset(s, b, h, i0), delta + lse_offset(s, b, h, i0) + nq, t.delta);
      simd::gemm(qa.a, qa.row, qa.col, t.kt, kBlockK, t.s, kBlockK, nq, nk, s.D, false);  // S = Q·(scale·Kᵀ)
      probabilities(o, i0, nq, j0, nk, t.lse, t.s);
      simd::gemm(da.a, da.row, da.col, t.vt, kBlockK, t.dp, kBlockK, nq, nk, s.Dv, false);  // dP = dO·Vᵀ
      simd::score_gradient(t.s, t.dp, kBlockK, nq, nk, t.delta);
      // dS = 0 where hidden (P = 0 there, but a hidden v may have made dP ∞ or NaN). The products below take no key
      // data as their A operand (dOᵀ, Qᵀ), so the zeros of P and dS are all a hidden key needs.
      if (tile_mask(o, i0, nq, j0, nk) == TileMask::partial) mask_tile(o, i0, nq, j0, nk, t.dp, kBlockK, 0.0f);
      simd::gemm(da.a, da.col, da.row, t.s, kBlockK, t.dvt, kBlockK, s.Dv, nk, nq, !first);  // dVᵀ += dOᵀ·P
      simd::gemm(qa.a, qa.col, qa.row, t.dp, kBlockK, t.dkt, kBlockK, s.D, nk, nq, !first);  // dKᵀ += Qᵀ·dS
      first = false;
    }
  if (first) {  // no query sees this key block
    std::fill(t.dkt, t.dkt + s.D * kBlockK, 0.0f);
    std::fill(t.dvt, t.dvt + s.Dv * kBlockK, 0.0f);
  }
  simd::scale(t.dkt, kBlockK, s.D, nk, scale);
  store_transposed(o.dk, b, hk, j0, nk, t.dkt, kBlockK, s.D, t.rows, ld.d);
  store_transposed(o.dv, b, hk, j0, nk, t.dvt, kBlockK, s.Dv, t.rows, ld.dv);
}
}  // namespace

int flash_forward(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                  DLTensor *out, DLTensor *lse) try {
  Operands o;
  if (int st = check_forward(kName, params, q, k, v, out, lse, &o)) return st;
  const Shape &s = o.shape;
  const Lds ld(s);
  const std::int64_t n_qt = ceil_div(ceil_div(s.Lq, kBlockQ), kForwardQBlocks), tasks = s.B * s.Hq * n_qt;
  const int threads = static_cast<int>(std::min<std::int64_t>(thread_count(), tasks));
  const Scratch scratch(threads, [&](Arena &a) { ForwardTiles(a, s, ld); });
  parallel_tasks(tasks, threads, [&](std::int64_t task, int thread) {
    Arena a(scratch.slice(thread));
    const ForwardTiles t(a, s, ld);
    // Causal: later query blocks see more keys; hand them out first for a better balance.
    const std::int64_t qt = n_qt - 1 - task / (s.B * s.Hq), bh = task % (s.B * s.Hq);
    forward_task(o, ld, t, bh / s.Hq, bh % s.Hq, qt * kForwardQBlocks);
  });
  return ATTNCHECK_OK;
} catch (const std::exception &e) {
  return report(e);
}

int flash_backward(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                   const DLTensor *out, const DLTensor *lse, const DLTensor *dout, DLTensor *dq, DLTensor *dk,
                   DLTensor *dv) try {
  Operands o;
  if (int st = check_backward(kName, params, q, k, v, out, lse, dout, dq, dk, dv, &o)) return st;
  const Shape &s = o.shape;
  const Lds ld(s);
  std::vector<float> delta(static_cast<std::size_t>(s.B * s.Hq * s.Lq));

  const std::int64_t n_qb = ceil_div(s.Lq, kBlockQ), q_tasks = s.B * s.Hq * n_qb;
  int threads = static_cast<int>(std::min<std::int64_t>(thread_count(), q_tasks));
  {
    const Scratch scratch(threads, [&](Arena &a) { DqTiles(a, s, ld); });
    parallel_tasks(q_tasks, threads, [&](std::int64_t task, int thread) {
      Arena a(scratch.slice(thread));
      const DqTiles t(a, s, ld);
      const std::int64_t qb = n_qb - 1 - task / (s.B * s.Hq), bh = task % (s.B * s.Hq);
      dq_task(o, ld, t, delta.data(), bh / s.Hq, bh % s.Hq, qb);
    });
  }
  const std::int64_t n_kb = ceil_div(s.Lk, kBlockK), k_tasks = s.B * s.Hkv * n_kb;
  threads = static_cast<int>(std::min<std::int64_t>(thread_count(), k_tasks));
  const Scratch scratch(threads, [&](Arena &a) { DkvTiles(a, s, ld); });
  parallel_tasks(k_tasks, threads, [&](std::int64_t task, int thread) {
    Arena a(scratch.slice(thread));
    const DkvTiles t(a, s, ld);
    // Causal: early key blocks are seen by more queries; hand them out first.
    const std::int64_t kb = task / (s.B * s.Hkv), bh = task % (s.B * s.Hkv);
    dkv_task(o, ld, t, delta.data(), bh / s.Hkv, bh % s.Hkv, kb);
  });
  return ATTNCHECK_OK;
} catch (const std::exception &e) {
  return report(e);
}

}  // namespace attncheck::builtin
