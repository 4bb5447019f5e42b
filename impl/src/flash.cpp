// "flash": FlashAttention-2 (Dao, 2023) on the CPU, float32 arithmetic on float32/float16/bfloat16 storage.
//
// Forward, one task per (sequence, query head, query block of kBlockQ rows):
//   for each key block of kBlockK keys (causal, window: only blocks some row of the tile sees):
//     S = scale·Q Kᵀ (softcap: c·tanh(S/c); ALiBi: − slope·|i' − j|; masked to −∞ on the edge blocks only),
//     m' = max(m, rowmax S), P = exp(S − m'), l = e^{m−m'}·l + rowsum P, O = e^{m−m'}·O + P V, m = m'
//   (sinks: l += e^{sink − m}), O /= l, LSE = m + log l.     No L_q × L_k buffer: S and P are one tile.
// Backward recomputes P = exp(S − LSE) from the forward's LSE, with D_i = Σ_c dO_ic O_ic:
//   dV = Pᵀ dO,  dP = dO Vᵀ,  dS = P ⊙ (dP − D) (softcap: ⊙ (1 − tanh²)),  dQ = scale·dS K,  dK = scale·dSᵀ Q.
// It runs as two passes that need no atomics and give results independent of the thread count:
//   pass 1, one task per (sequence, query head, query block): D for the block, then dQ over the key blocks;
//   pass 2, one task per (sequence, kv head, key block): dK and dV over the query blocks of every query head of the
//   group (GQA sums without copying kv heads).
// A sequence is a batch entry, or a packed sequence under VARLEN: each runs as a problem of its own (views that
// start at its rows and keys). Under PAGED (forward only) key tiles are gathered from the cache's pages.
// ABI 1.2 features: window, softcap, alibi, sinks, varlen, paged (forward); not the mask tensor, dropout or FP8.
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
/// The ABI 1.2 features forward and backward implement (check_backward refuses PAGED whatever the set says).
constexpr std::uint32_t kBackwardFeatures = ATTNCHECK_FEATURE_WINDOW | ATTNCHECK_FEATURE_SOFTCAP |
                                            ATTNCHECK_FEATURE_ALIBI | ATTNCHECK_FEATURE_SINKS |
                                            ATTNCHECK_FEATURE_VARLEN;
constexpr std::uint32_t kForwardFeatures = kBackwardFeatures | ATTNCHECK_FEATURE_PAGED;

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

// ---- sequences (a batch entry, or a packed sequence under VARLEN) ----

/// One sequence of a call as a problem of its own: B = 1, Lq = Lq_b, Lk = Lk_b, and views that start at its first
/// row and key. Under PAGED k and v stay the whole cache and `pages` maps the sequence's keys onto it. Without
/// features, sequence b is batch entry b, and every address the kernel reads and writes is what it was before.
struct Seq {
  Shape shape;
  Mask mask = Mask::none;
  double scale = 1.0;
  View q, k, v, out, dout, dq, dk, dv;
  LseView lse;
  const CallFeatures *f = nullptr;
  /// PAGED: its row of the block table; key j is row j % page_size of page pages[j / page_size] of k and v.
  const std::int64_t *pages = nullptr;
  std::int64_t page_size = 0;
  float *delta = nullptr;    ///< backward: D_i of its rows, [Hq, Lq]
  bool positional = false;  ///< causal or a window: some rows do not see some keys
};

/// Rows [first, first + n) of batch entry `batch` of t, as a tensor of one batch entry.
View rows_of(const View &t, std::int64_t batch, std::int64_t first, std::int64_t n) {
  View r = t;
  if (t.data) r.data = t.data + t.offset(batch, 0, first, 0) * dtype_size(t.dtype);
  r.n[0] = 1;
  r.n[2] = n;
  return r;
}
LseView rows_of(const LseView &t, std::int64_t batch, std::int64_t first) {
  LseView r = t;
  if (t.data) r.data = t.data + batch * t.s[0] + first * t.s[2];
  return r;
}

/// The call's sequences; `delta` (backward) holds D for the rows of all of them, [rows, Hq] sequence by sequence.
std::vector<Seq> sequences(const Operands &o, float *delta) {
  std::vector<Seq> seqs(static_cast<std::size_t>(o.seqs()));
  std::int64_t rows_before = 0;
  for (std::int64_t b = 0; b < o.seqs(); ++b) {
    Seq &sq = seqs[static_cast<std::size_t>(b)];
    const std::int64_t Lq = o.seq_rows(b), Lk = o.seq_keys(b), qb = o.row_batch(b), q0 = o.row_offset(b);
    sq.shape = o.shape;
    sq.shape.B = 1;
    sq.shape.Lq = Lq;
    sq.shape.Lk = Lk;
    sq.mask = o.mask;
    sq.scale = o.scale;
    sq.f = &o.f;
    sq.positional = is_causal(o.mask) || o.f.window_left >= 0 || o.f.window_right >= 0;
    sq.q = rows_of(o.q, qb, q0, Lq);
    sq.out = rows_of(o.out, qb, q0, Lq);
    sq.dout = rows_of(o.dout, qb, q0, Lq);
    sq.dq = rows_of(o.dq, qb, q0, Lq);
    sq.lse = rows_of(o.lse, qb, q0);
    if (o.f.has(ATTNCHECK_FEATURE_PAGED)) {
      sq.k = o.k;
      sq.v = o.v;
      sq.pages = o.f.block_table.data() + b * o.f.pages_per_seq;
      sq.page_size = o.f.page_size;
    } else {
      std::int64_t kb = 0, k0 = 0;
      o.key_at(b, 0, &kb, &k0);
      sq.k = rows_of(o.k, kb, k0, Lk);
      sq.v = rows_of(o.v, kb, k0, Lk);
      sq.dk = rows_of(o.dk, kb, k0, Lk);
      sq.dv = rows_of(o.dv, kb, k0, Lk);
    }
    if (delta) sq.delta = delta + rows_before * o.shape.Hq;
    rows_before += Lq;
  }
  return seqs;
}

/// One task: block `block` (of query or key rows) of head `head` of sequence `seq`.
struct Task {
  std::int64_t seq, head, block;
};

/// The tasks of every sequence's blocks (blocks(seq) of them) in `heads` heads, by block (the last ones first with
/// `last_first`: causal makes them the costliest), then sequence, then head.
template <class Blocks>
std::vector<Task> tasks_of(const std::vector<Seq> &seqs, std::int64_t heads, Blocks &&blocks, bool last_first) {
  std::vector<std::int64_t> n;
  std::int64_t most = 0;
  for (const Seq &sq : seqs) most = std::max(most, n.emplace_back(blocks(sq)));
  std::vector<Task> tasks;
  for (std::int64_t step = 0; step < most; ++step) {
    const std::int64_t block = last_first ? most - 1 - step : step;
    for (std::size_t seq = 0; seq < seqs.size(); ++seq)
      if (block < n[seq])
        for (std::int64_t h = 0; h < heads; ++h) tasks.push_back({static_cast<std::int64_t>(seq), h, block});
  }
  return tasks;
}

/// Below this many multiply-adds in a call (B·Hq·Lq·Lk·(D + Dv), tens of microseconds on one core) its tasks run on
/// the calling thread unless the caller asked for threads (requested_threads): starting a team costs about as much
/// there, and the team's idle threads spin afterwards, taking a core from whatever runs beside the kernel. The
/// results are the same either way (tasks are independent).
constexpr std::int64_t kMinParallelWork = std::int64_t{1} << 18;

/// Runs f(task, arena) for every task on up to thread_count() threads (one on a small call: kMinParallelWork), each
/// with its scratch slice of the size `layout(Arena&)` takes.
template <class Layout, class F>
void run_tasks(const std::vector<Task> &tasks, std::int64_t work, Layout &&layout, F &&f) {
  const std::int64_t n = static_cast<std::int64_t>(tasks.size());
  if (n == 0) return;
  const bool small = work < kMinParallelWork && requested_threads() == 0;
  const int threads = small ? 1 : static_cast<int>(std::min<std::int64_t>(thread_count(), n));
  const Scratch scratch(threads, layout);
  parallel_tasks(n, threads, [&](std::int64_t task, int thread) {
    Arena a(scratch.slice(thread));
    f(tasks[static_cast<std::size_t>(task)], a);
  });
}

// ---- visibility (causal, window, lengths) and the other logit terms ----

/// Keys row i of the sequence sees by position.
KeyRange keys_of(const Seq &o, std::int64_t i) {
  return key_range(o.mask, o.f->window_left, o.f->window_right, o.shape.Lq, o.shape.Lk, i);
}

/// The first row i in [0, Lq] with pred(i), for a predicate that stays true once true.
template <class Pred>
std::int64_t first_row(const Seq &o, Pred &&pred) {
  std::int64_t lo = 0, hi = o.shape.Lq;
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (pred(mid)) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/// Visibility of the tile rows [i0, i0 + nq) × keys [j0, j0 + nk).
enum class TileMask { all_visible, partial, none_visible };
TileMask tile_mask(const Seq &o, std::int64_t i0, std::int64_t nq, std::int64_t j0, std::int64_t nk) {
  if (!o.positional) return TileMask::all_visible;
  // A row's first and last visible keys never decrease with the row: the first row and the last bound the tile.
  const KeyRange first = keys_of(o, i0), last = keys_of(o, i0 + nq - 1);
  if (j0 >= last.begin && j0 + nk <= first.end) return TileMask::all_visible;
  if (j0 + nk <= first.begin || j0 >= last.end) return TileMask::none_visible;
  return TileMask::partial;
}

/// simd::gemm's band for a product summing over the keys j0 + p of a tile into its query columns i0 + c: key
/// j0 + p is visible to query i0 + c iff c + lower ≤ p ≤ c + upper (causal: j ≤ i'; window: i' − left ≤ j ≤
/// i' + right). Products whose A operand holds key data (V, K) take it on partial tiles, so that a hidden key's
/// values never meet its zero P or dS: 0·∞ = NaN.
struct Band {
  std::int64_t upper = simd::kNoBand, lower = -simd::kNoBand;
};
Band tile_band(const Seq &o, std::int64_t i0, std::int64_t j0) {
  const std::int64_t a0 = i0 + o.shape.Lk - o.shape.Lq - j0;  // i' of column 0, from the tile's first key
  Band band;
  if (is_causal(o.mask)) band.upper = a0;
  if (o.f->window_right >= 0) band.upper = std::min(band.upper, a0 + o.f->window_right);
  if (o.f->window_left >= 0) band.lower = a0 - o.f->window_left;
  return band;
}

/// Sets S[r][j] = fill for the keys j0 + j that tile row r (query i0 + r) does not see.
void mask_tile(const Seq &o, std::int64_t i0, std::int64_t nq, std::int64_t j0, std::int64_t nk, float *S,
               std::int64_t lds, float fill) {
  for (std::int64_t r = 0; r < nq; ++r) {
    const KeyRange kr = keys_of(o, i0 + r);
    const std::int64_t first_visible = std::clamp<std::int64_t>(kr.begin - j0, 0, nk);
    const std::int64_t first_hidden = std::clamp<std::int64_t>(kr.end - j0, first_visible, nk);
    std::fill(S + r * lds, S + r * lds + first_visible, fill);
    std::fill(S + r * lds + first_hidden, S + r * lds + nk, fill);
  }
}

/// Sets Sᵀ[j][c] = fill for the keys j0 + j that query i0 + c (column c) does not see.
void mask_tile_t(const Seq &o, std::int64_t i0, std::int64_t nq, std::int64_t j0, std::int64_t nk, float *St,
                 std::int64_t lds, float fill) {
  for (std::int64_t c = 0; c < nq; ++c) {
    const KeyRange kr = keys_of(o, i0 + c);
    const std::int64_t first_visible = std::clamp<std::int64_t>(kr.begin - j0, 0, nk);
    const std::int64_t first_hidden = std::clamp<std::int64_t>(kr.end - j0, first_visible, nk);
    for (std::int64_t j = 0; j < first_visible; ++j) St[j * lds + c] = fill;
    for (std::int64_t j = first_hidden; j < nk; ++j) St[j * lds + c] = fill;
  }
}

/// The logit's terms beyond scale·q·k on a tile of rows × cols logits in units of `unit` (log2 e in the forward,
/// 1 in the backward): softcap (its tanh into `tanh_out`, laid out like S, when given), then ALiBi. `keys_by_row`:
/// row r is key j0 + r and column c query i0 + c (the transposed tiles); else row r is query i0 + r, column c key
/// j0 + c.
void logit_terms(const Seq &o, std::int64_t h, float unit, float *S, std::int64_t lds, std::int64_t rows,
                 std::int64_t cols, bool keys_by_row, std::int64_t i0, std::int64_t j0, float *tanh_out) {
  const CallFeatures &f = *o.f;
  if (f.softcap > 0) simd::softcap(S, lds, rows, cols, 1.0f / (f.softcap * unit), f.softcap * unit, tanh_out);
  if (!f.alibi.empty()) {
    const std::int64_t a0 = i0 + o.shape.Lk - o.shape.Lq - j0;  // i' − j of query i0 and key j0
    // i' − j = a0 + c − r (keys by row) or a0 + r − c: simd::distance_bias's |off + c − r|.
    simd::distance_bias(S, lds, rows, cols, keys_by_row ? a0 : -a0, f.alibi[static_cast<std::size_t>(h)] * unit);
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
/// Rows l0 … l0 + n − 1 of [b, h] of t as a KeyTile.
KeyTile tile_at(const View &t, std::int64_t b, std::int64_t h, std::int64_t l0, std::int64_t n, float *scratch,
                std::int64_t ld) {
  if (t.dtype == Dtype::f32) {
    const std::byte *p = t.data + t.offset(b, h, l0, 0) * 4;
    if (reinterpret_cast<std::uintptr_t>(p) % alignof(float) == 0)
      return {reinterpret_cast<const float *>(p), t.s[2], t.s[3]};
  }
  load_rows(t, b, h, l0, n, scratch, ld);
  return {scratch, ld, 1};
}
/// Keys j0 … j0 + nk − 1 of kv head h of the sequence (t: its k or v). Under PAGED a tile within one page is read
/// like any other; one that spans pages is gathered into the scratch, page by page (only rows of its keys: the
/// unused pages and the tail of the last page are never read).
KeyTile key_tile(const Seq &o, const View &t, std::int64_t h, std::int64_t j0, std::int64_t nk, float *scratch,
                 std::int64_t ld) {
  if (!o.pages) return tile_at(t, 0, h, j0, nk, scratch, ld);
  const std::int64_t ps = o.page_size;
  if (j0 / ps == (j0 + nk - 1) / ps) return tile_at(t, o.pages[j0 / ps], h, j0 % ps, nk, scratch, ld);
  for (std::int64_t j = j0; j < j0 + nk;) {
    const std::int64_t row = j % ps, n = std::min(ps - row, j0 + nk - j);
    load_rows(t, o.pages[j / ps], h, row, n, scratch + (j - j0) * ld, ld);
    j += n;
  }
  return {scratch, ld, 1};
}

/// Query blocks of one forward task: they share each key block's K and V, widened once for all of them when the
/// storage is float16/bfloat16 (float32 is read in place).
constexpr std::int64_t kForwardQBlocks = 2;
/// Keys per forward step: the Oᵀ accumulator makes one trip through registers (load, rescale, store) per step, so
/// longer steps amortize it over more FMAs; Sᵀ/Pᵀ is kForwardBlockK × kBlockQ floats (32 KiB).
constexpr std::int64_t kForwardBlockK = 128;
constexpr float kLog2e = 1.44269504088896341f;

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

/// Forward of the query blocks qb0, qb0 + 1, … (up to kForwardQBlocks, within Lq) of head h of a sequence. Key
/// blocks run from the first key some row of the task sees to the last (causal and windows skip the others).
void forward_task(const Seq &o, const Lds &ld, const ForwardTiles &t, std::int64_t h, std::int64_t qb0) {
  const Shape &s = o.shape;
  const CallFeatures &f = *o.f;
  const std::int64_t hk = s.kv_head(h);
  const std::int64_t nb = std::min(kForwardQBlocks, ceil_div(s.Lq, kBlockQ) - qb0);
  const float scale_log2e = static_cast<float>(o.scale * 1.4426950408889634);  // one rounding of scale·log2 e
  std::int64_t i0[kForwardQBlocks], nq[kForwardQBlocks], key_begin[kForwardQBlocks], key_end[kForwardQBlocks];
  bool first[kForwardQBlocks];
  std::int64_t all_key_begin = s.Lk, all_key_end = 0;
  for (std::int64_t q = 0; q < nb; ++q) {
    const QueryBlockTiles &qt = t.blocks[static_cast<std::size_t>(q)];
    i0[q] = (qb0 + q) * kBlockQ;
    nq[q] = std::min(kBlockQ, s.Lq - i0[q]);
    // Keys before what the block's first row sees, and past what its last row sees, are hidden from every row:
    // skip their blocks.
    key_begin[q] = keys_of(o, i0[q]).begin;
    key_end[q] = keys_of(o, i0[q] + nq[q] - 1).end;
    all_key_begin = std::min(all_key_begin, key_begin[q]);
    all_key_end = std::max(all_key_end, key_end[q]);
    first[q] = true;
    // Qᵀ·scale·log2 e: applied to q once per query block (one rounding per element, like a scaled product); the
    // softmax then runs in base 2 (exp2), and m·ln 2 + ln l gives the natural-log LSE.
    load_rows_t(o.q, 0, h, i0[q], nq[q], qt.qt, kBlockQ, t.stage);
    if (nq[q] < kBlockQ)  // columns of absent queries: finite, ignored
      for (std::int64_t x = 0; x < s.D; ++x) std::fill(qt.qt + x * kBlockQ + nq[q], qt.qt + (x + 1) * kBlockQ, 0.0f);
    simd::scale(qt.qt, kBlockQ, s.D, nq[q], scale_log2e);
    std::fill(qt.m, qt.m + kBlockQ, kMinusInf);
    std::fill(qt.l, qt.l + kBlockQ, 0.0f);
  }
  for (std::int64_t j0 = all_key_begin; j0 < all_key_end; j0 += kForwardBlockK) {
    const std::int64_t nk_all = std::min(kForwardBlockK, all_key_end - j0);
    const KeyTile kt = key_tile(o, o.k, hk, j0, nk_all, t.k, ld.d), vt = key_tile(o, o.v, hk, j0, nk_all, t.v, ld.dv);
    for (std::int64_t q = 0; q < nb; ++q) {
      if (j0 >= key_end[q] || j0 + nk_all <= key_begin[q]) continue;
      const QueryBlockTiles &qt = t.blocks[static_cast<std::size_t>(q)];
      const std::int64_t nk = std::min(kForwardBlockK, key_end[q] - j0);
      const TileMask tm = tile_mask(o, i0[q], nq[q], j0, nk);
      if (tm == TileMask::none_visible) continue;
      simd::gemm(kt.a, kt.row, kt.col, qt.qt, kBlockQ, qt.s, kBlockQ, nk, nq[q], s.D, false);  // Sᵀ·log2 e
      logit_terms(o, h, kLog2e, qt.s, kBlockQ, nk, nq[q], true, i0[q], j0, nullptr);
      // Hidden scores are overwritten (whatever a hidden k made of them) and hidden values skipped.
      Band band;
      if (tm == TileMask::partial) {
        mask_tile_t(o, i0[q], nq[q], j0, nk, qt.s, kBlockQ, kMinusInf);
        band = tile_band(o, i0[q], j0);
      }
      simd::online_softmax_cols(qt.s, kBlockQ, nk, nq[q], qt.m, qt.l, qt.alpha);
      // Oᵀ = Oᵀ·diag(alpha) + Vᵀ·Pᵀ (Vᵀ(x, j) = V[j][x]); the first block overwrites.
      simd::gemm(vt.a, vt.col, vt.row, qt.s, kBlockQ, qt.ot, kBlockQ, s.Dv, nq[q], nk, !first[q], qt.alpha, band.upper,
                 band.lower);
      first[q] = false;
    }
  }
  const bool sink = !f.sinks.empty();
  const float sink_e = sink ? f.sinks[static_cast<std::size_t>(h)] : 0.0f, sink_2 = sink_e * kLog2e;
  for (std::int64_t q = 0; q < nb; ++q) {
    const QueryBlockTiles &qt = t.blocks[static_cast<std::size_t>(q)];
    if (first[q]) std::fill(qt.ot, qt.ot + s.Dv * kBlockQ, 0.0f);  // no key block at all (no row sees a key)
    for (std::int64_t c = 0; c < nq[q]; ++c) {
      if (qt.l[c] == 0.0f) {  // the row sees no key: O = 0, LSE = −∞ (or the sink, its denominator's one term)
        for (std::int64_t x = 0; x < s.Dv; ++x) qt.ot[x * kBlockQ + c] = 0.0f;
        qt.l[c] = 1.0f;  // divides the zeros below
        qt.m[c] = sink ? sink_e : kMinusInf;
      } else if (sink) {
        // The sink's term 2^(sink·log2 e) joins the denominator: O = Oᵀ·alpha / l', l' = l·alpha + 2^(sink₂ − m')
        // with m' = max(m, sink₂), alpha = 2^(m − m').
        const float m_new = std::max(qt.m[c], sink_2), alpha = std::exp2(qt.m[c] - m_new);
        const float l_new = qt.l[c] * alpha + std::exp2(sink_2 - m_new);
        qt.m[c] = m_new * kLn2 + std::log(l_new);
        qt.l[c] = l_new / alpha;  // ∞ when alpha underflows: O = 0, the sink outweighs every key
      } else {
        qt.m[c] = qt.m[c] * kLn2 + std::log(qt.l[c]);  // m (base 2) becomes the natural-log LSE
      }
    }
    for (std::int64_t c = nq[q]; c < kBlockQ; ++c) qt.l[c] = 1.0f;
    simd::divide_cols(qt.ot, kBlockQ, s.Dv, nq[q], qt.l);
    for (std::int64_t x = 0; x < s.Dv; ++x)
      for (std::int64_t c = 0; c < nq[q]; ++c) t.orows[c * ld.dv + x] = qt.ot[x * kBlockQ + c];
    store_rows(o.out, 0, h, i0[q], nq[q], t.orows, ld.dv);
    if (o.lse.data)
      for (std::int64_t r = 0; r < nq[q]; ++r) o.lse.at(0, h, i0[q] + r) = qt.m[r];
  }
}

// ---- backward ----

/// P = exp(S − LSE) on a tile of logits; 0 where masked and in rows without keys (LSE = −∞).
void probabilities(const Seq &o, TileMask tm, std::int64_t i0, std::int64_t nq, std::int64_t j0, std::int64_t nk,
                   const float *lse, float *S) {
  simd::exp_minus_lse(S, kBlockK, nq, nk, lse);
  if (tm == TileMask::partial) mask_tile(o, i0, nq, j0, nk, S, kBlockK, 0.0f);
}

// Pass 1 (dQ) works on transposed tiles like the forward: Qᵀ·scale and dOᵀ are packed once per query block, K and V
// are read in place per key block:  Sᵀ = K·Qᵀ, Pᵀ = exp(Sᵀ − LSE), dPᵀ = V·dOᵀ, dSᵀ = Pᵀ ⊙ (dPᵀ − D), dQᵀ += Kᵀ·dSᵀ.
// Pass 2 (dK, dV) is its mirror: Kᵀ·scale and Vᵀ are packed once per key block, Q and dO are read in place per
// query block:  S = Q·Kᵀ, P, dP = dO·Vᵀ, dS,  dVᵀ += dOᵀ·P,  dKᵀ += Qᵀ·dS.
// Softcap keeps the tanh of each tile's logits (T) for dS ⊙ (1 − T²); ALiBi and sinks add no gradient term (the
// sink is in the LSE).

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
  float *qt, *dot, *s, *dp, *dqt, *k, *v, *orows, *dorows, *lse, *delta, *stage, *tanh;
  DqTiles(Arena &a, const Shape &sh, const Lds &ld)
      : qt(a.take(sh.D * kBlockQ)), dot(a.take(sh.Dv * kBlockQ)), s(a.take(kBlockK * kBlockQ)),
        dp(a.take(kBlockK * kBlockQ)), dqt(a.take(sh.D * kBlockQ)), k(a.take(kBlockK * ld.d)),
        v(a.take(kBlockK * ld.dv)), orows(a.take(kBlockQ * std::max(ld.d, ld.dv))), dorows(a.take(kBlockQ * ld.dv)),
        lse(a.take(kBlockQ)), delta(a.take(kBlockQ)), stage(a.take(kTransposeRows * std::max(ld.d, ld.dv))),
        tanh(a.take(kBlockK * kBlockQ)) {}
};

/// Pass 1 task: D for query block qb of head h of a sequence (saved to its `delta`) and its dQ.
void dq_task(const Seq &o, const Lds &ld, const DqTiles &t, std::int64_t h, std::int64_t qb) {
  const Shape &s = o.shape;
  const bool softcap = o.f->softcap > 0;
  const std::int64_t hk = s.kv_head(h), i0 = qb * kBlockQ, nq = std::min(kBlockQ, s.Lq - i0);
  const float scale = static_cast<float>(o.scale);
  load_packed_t(o.q, 0, h, i0, nq, t.qt, t.stage, scale);
  load_packed_t(o.dout, 0, h, i0, nq, t.dot, t.stage, 1.0f);
  load_rows(o.dout, 0, h, i0, nq, t.dorows, ld.dv);
  load_rows(o.out, 0, h, i0, nq, t.orows, ld.dv);
  simd::row_dots(t.dorows, ld.dv, t.orows, ld.dv, nq, s.Dv, t.delta);
  std::copy(t.delta, t.delta + nq, o.delta + h * s.Lq + i0);
  for (std::int64_t c = 0; c < kBlockQ; ++c) t.lse[c] = c < nq ? o.lse.at(0, h, i0 + c) : 0.0f;
  std::fill(t.delta + nq, t.delta + kBlockQ, 0.0f);
  const std::int64_t key_begin = keys_of(o, i0).begin, key_end = keys_of(o, i0 + nq - 1).end;
  bool first = true;
  for (std::int64_t j0 = key_begin; j0 < key_end; j0 += kBlockK) {
    const std::int64_t nk = std::min(kBlockK, key_end - j0);
    const TileMask tm = tile_mask(o, i0, nq, j0, nk);
    if (tm == TileMask::none_visible) continue;
    const KeyTile kt = key_tile(o, o.k, hk, j0, nk, t.k, ld.d), vt = key_tile(o, o.v, hk, j0, nk, t.v, ld.dv);
    simd::gemm(kt.a, kt.row, kt.col, t.qt, kBlockQ, t.s, kBlockQ, nk, nq, s.D, false);  // Sᵀ = K·(scale·Qᵀ)
    logit_terms(o, h, 1.0f, t.s, kBlockQ, nk, nq, true, i0, j0, t.tanh);
    simd::exp_minus_lse_cols(t.s, kBlockQ, nk, nq, t.lse);
    simd::gemm(vt.a, vt.row, vt.col, t.dot, kBlockQ, t.dp, kBlockQ, nk, nq, s.Dv, false);  // dPᵀ = V·dOᵀ
    simd::score_gradient_cols(t.s, t.dp, kBlockQ, nk, nq, t.delta);
    if (softcap) simd::softcap_grad(t.dp, t.tanh, kBlockQ, nk, nq);
    // dS = 0 where hidden, whatever a hidden k or v made of P and dP; the hidden k are then skipped.
    Band band;
    if (tm == TileMask::partial) {
      mask_tile_t(o, i0, nq, j0, nk, t.dp, kBlockQ, 0.0f);
      band = tile_band(o, i0, j0);
    }
    simd::gemm(kt.a, kt.col, kt.row, t.dp, kBlockQ, t.dqt, kBlockQ, s.D, nq, nk, !first, nullptr, band.upper,
               band.lower);  // dQᵀ += Kᵀ·dSᵀ
    first = false;
  }
  if (first) std::fill(t.dqt, t.dqt + s.D * kBlockQ, 0.0f);
  simd::scale(t.dqt, kBlockQ, s.D, nq, scale);
  store_transposed(o.dq, 0, h, i0, nq, t.dqt, kBlockQ, s.D, t.orows, ld.d);
}

struct DkvTiles {
  float *kt, *vt, *s, *dp, *dkt, *dvt, *q, *dout, *rows, *lse, *delta, *stage, *tanh;
  DkvTiles(Arena &a, const Shape &sh, const Lds &ld)
      : kt(a.take(sh.D * kBlockK)), vt(a.take(sh.Dv * kBlockK)), s(a.take(kBlockQ * kBlockK)),
        dp(a.take(kBlockQ * kBlockK)), dkt(a.take(sh.D * kBlockK)), dvt(a.take(sh.Dv * kBlockK)),
        q(a.take(kBlockQ * ld.d)), dout(a.take(kBlockQ * ld.dv)), rows(a.take(kBlockK * std::max(ld.d, ld.dv))),
        lse(a.take(kBlockQ)), delta(a.take(kBlockQ)), stage(a.take(kTransposeRows * std::max(ld.d, ld.dv))),
        tanh(a.take(kBlockQ * kBlockK)) {}
};
static_assert(kBlockQ == kBlockK, "load_packed_t packs key tiles with kBlockQ columns");

/// Pass 2 task: dK and dV of key block kb of kv head hk of a sequence, summed over the query heads of its group.
void dkv_task(const Seq &o, const Lds &ld, const DkvTiles &t, std::int64_t hk, std::int64_t kb) {
  const Shape &s = o.shape;
  const bool softcap = o.f->softcap > 0;
  const std::int64_t j0 = kb * kBlockK, nk = std::min(kBlockK, s.Lk - j0);
  const float scale = static_cast<float>(o.scale);
  load_packed_t(o.k, 0, hk, j0, nk, t.kt, t.stage, scale);
  load_packed_t(o.v, 0, hk, j0, nk, t.vt, t.stage, 1.0f);
  // The rows that see some key of the block: from the first whose last visible key reaches j0 (causal: query i
  // sees key j0 iff i ≥ j0 − (Lk − Lq)) to the last whose first visible key is before the block's end (window).
  const std::int64_t i_first = first_row(o, [&](std::int64_t i) { return keys_of(o, i).end > j0; });
  const std::int64_t i_end = first_row(o, [&](std::int64_t i) { return keys_of(o, i).begin >= j0 + nk; });
  bool first = true;
  for (std::int64_t h = hk * s.group(); h < (hk + 1) * s.group(); ++h)
    for (std::int64_t i0 = i_first; i0 < i_end; i0 += kBlockQ) {
      const std::int64_t nq = std::min(kBlockQ, i_end - i0);
      const TileMask tm = tile_mask(o, i0, nq, j0, nk);
      if (tm == TileMask::none_visible) continue;
      const KeyTile qa = tile_at(o.q, 0, h, i0, nq, t.q, ld.d), da = tile_at(o.dout, 0, h, i0, nq, t.dout, ld.dv);
      for (std::int64_t r = 0; r < nq; ++r) t.lse[r] = o.lse.at(0, h, i0 + r);
      std::copy(o.delta + h * s.Lq + i0, o.delta + h * s.Lq + i0 + nq, t.delta);
      simd::gemm(qa.a, qa.row, qa.col, t.kt, kBlockK, t.s, kBlockK, nq, nk, s.D, false);  // S = Q·(scale·Kᵀ)
      logit_terms(o, h, 1.0f, t.s, kBlockK, nq, nk, false, i0, j0, t.tanh);
      probabilities(o, tm, i0, nq, j0, nk, t.lse, t.s);
      simd::gemm(da.a, da.row, da.col, t.vt, kBlockK, t.dp, kBlockK, nq, nk, s.Dv, false);  // dP = dO·Vᵀ
      simd::score_gradient(t.s, t.dp, kBlockK, nq, nk, t.delta);
      if (softcap) simd::softcap_grad(t.dp, t.tanh, kBlockK, nq, nk);
      // dS = 0 where hidden (P = 0 there, but a hidden v may have made dP ∞ or NaN). The products below take no key
      // data as their A operand (dOᵀ, Qᵀ), so the zeros of P and dS are all a hidden key needs.
      if (tm == TileMask::partial) mask_tile(o, i0, nq, j0, nk, t.dp, kBlockK, 0.0f);
      simd::gemm(da.a, da.col, da.row, t.s, kBlockK, t.dvt, kBlockK, s.Dv, nk, nq, !first);  // dVᵀ += dOᵀ·P
      simd::gemm(qa.a, qa.col, qa.row, t.dp, kBlockK, t.dkt, kBlockK, s.D, nk, nq, !first);  // dKᵀ += Qᵀ·dS
      first = false;
    }
  if (first) {  // no query sees this key block
    std::fill(t.dkt, t.dkt + s.D * kBlockK, 0.0f);
    std::fill(t.dvt, t.dvt + s.Dv * kBlockK, 0.0f);
  }
  simd::scale(t.dkt, kBlockK, s.D, nk, scale);
  store_transposed(o.dk, 0, hk, j0, nk, t.dkt, kBlockK, s.D, t.rows, ld.d);
  store_transposed(o.dv, 0, hk, j0, nk, t.dvt, kBlockK, s.Dv, t.rows, ld.dv);
}
}  // namespace

int flash_forward(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                  DLTensor *out, DLTensor *lse) try {
  Operands o;
  if (int st = check_forward(kName, kForwardFeatures, params, q, k, v, out, lse, &o)) return st;
  const Shape &s = o.shape;
  const Lds ld(s);
  const std::vector<Seq> seqs = sequences(o, nullptr);
  // Causal: later query blocks see more keys; hand them out first for a better balance.
  const std::vector<Task> tasks = tasks_of(
      seqs, s.Hq, [](const Seq &sq) { return ceil_div(ceil_div(sq.shape.Lq, kBlockQ), kForwardQBlocks); }, true);
  run_tasks(tasks, s.work(), [&](Arena &a) { ForwardTiles(a, s, ld); }, [&](const Task &task, Arena &a) {
    const ForwardTiles t(a, s, ld);
    forward_task(seqs[static_cast<std::size_t>(task.seq)], ld, t, task.head, task.block * kForwardQBlocks);
  });
  return ATTNCHECK_OK;
} catch (const std::exception &e) {
  return report(e);
}

int flash_backward(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                   const DLTensor *out, const DLTensor *lse, const DLTensor *dout, DLTensor *dq, DLTensor *dk,
                   DLTensor *dv) try {
  Operands o;
  if (int st = check_backward(kName, kBackwardFeatures, params, q, k, v, out, lse, dout, dq, dk, dv, &o)) return st;
  const Shape &s = o.shape;
  const Lds ld(s);
  std::vector<float> delta(static_cast<std::size_t>(s.B * s.Hq * s.Lq));
  const std::vector<Seq> seqs = sequences(o, delta.data());
  const std::vector<Task> q_tasks =
      tasks_of(seqs, s.Hq, [](const Seq &sq) { return ceil_div(sq.shape.Lq, kBlockQ); }, true);
  run_tasks(q_tasks, s.work(), [&](Arena &a) { DqTiles(a, s, ld); }, [&](const Task &task, Arena &a) {
    const DqTiles t(a, s, ld);
    dq_task(seqs[static_cast<std::size_t>(task.seq)], ld, t, task.head, task.block);
  });
  // Causal: early key blocks are seen by more queries; hand them out first.
  const std::vector<Task> k_tasks =
      tasks_of(seqs, s.Hkv, [](const Seq &sq) { return ceil_div(sq.shape.Lk, kBlockK); }, false);
  run_tasks(k_tasks, s.work(), [&](Arena &a) { DkvTiles(a, s, ld); }, [&](const Task &task, Arena &a) {
    const DkvTiles t(a, s, ld);
    dkv_task(seqs[static_cast<std::size_t>(task.seq)], ld, t, task.head, task.block);
  });
  return ATTNCHECK_OK;
} catch (const std::exception &e) {
  return report(e);
}

}  // namespace attncheck::builtin
