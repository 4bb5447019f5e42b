// The compile-friendly shape pool (CheckOptions::shape_pool, detect_compile): a JIT-compiled kernel compiles every
// new shape, so each property draws its cases' shapes from a few — drawn from the seed and dtype alone, narrowed to
// shapes the kernel accepts, and called once before the properties share the budget; and the other probes on zero
// problems that ask what the kernel accepts.
#include "run_state.h"

#include "attncheck/gen.h"

#include <algorithm>

namespace attncheck::engine {

namespace {
/// A compile-friendly pool grows past a shape the kernel declines: at most this many draws per shape asked for.
constexpr int kPoolDrawsPerShape = 8;

/// One drawn pool shape in this many has the buckets' batches and GQA groups; the others have few heads.
constexpr int kPoolHeadsEvery = 3;

/// The problem of shape `s` with zero values (dout too when `backward`): what the probe and the warm-up call.
Problem zero_problem(const Shape &s, Dtype dt, bool backward) {
  Case c;
  c.spec.shape = s;
  c.spec.dtype = dt;
  c.resize_values(backward);
  return c.problem();
}

/// The kernel declines Dv ≠ D where it runs Dv = D (forwards on zero values of D = 16 and Dv = 8 or 16: sizes every
/// kernel's tiles take). Properties that set Dv = Lk then draw D = Lk too (CaseOptions::tie_head_dims), or the kernel
/// would decline every one of their cases. A function of the kernel's answers: the same in a search and its replay.
bool declines_unequal_head_dims(const Env &env, Dtype dt) {
  const auto declines = [&](const Shape &s) {
    return run_forward(env, zero_problem(s, dt, false)).call.status == ATTNCHECK_UNSUPPORTED;
  };
  return declines(Shape{.D = 16, .Dv = 8}) && !declines(Shape{.D = 16, .Dv = 16});
}

/// The compile-friendly pool's shapes, drawn from the seed and dtype alone: the all-ones shape, one with a row that
/// sees no key, then shapes drawn as usual (with Dv = Lk and two keys or more) at sizes spread over the range of `n`
/// — and past n, as many more as asked for (a pool that grows past declined shapes draws them at those sizes again).
/// Two drawn shapes in three have few heads (CaseOptions::few_heads), so that a pool of a few shapes keeps rows of
/// several keys (and rows that see no key); every third has the batches and GQA groups of the buckets. Every other
/// drawn shape has Lq > Lk (CaseOptions::empty_rows), so that empty_rows finds distinct shapes with rows that see no
/// key.
class PoolDraws {
 public:
  PoolDraws(int n, std::uint64_t seed, Dtype dt)
      : n_(n), dtype_(dt), random_(mix(seed ^ fnv1a("shape_pool") ^ (static_cast<std::uint64_t>(dt) << 56))) {}
  Shape next() {
    const int k = drawn_++;
    // The all-ones shape, and Lq = 2 > Lk = 1: a row that sees no key under bottom-right causal (empty_rows).
    if (k == 0) return Shape{};
    if (k == 1) return Shape{.Lq = 2};
    const int size = 2 + (k - 2) % std::max(1, n_ - 2);
    return draw_spec(random_.split(), size * rc::kNominalSize / std::max(n_, 1), options(k)).shape;
  }

 private:
  /// The constraints of the k-th draw.
  CaseOptions options(int k) const {
    CaseOptions co;
    co.dtype = dtype_;
    co.dv_equals_lk = true;  // the properties that set v = I need Dv = Lk: with it, they reuse the pool's shapes too
    co.min_keys = 2;  // the first two shapes have one key
    co.few_heads = (k - 2) % kPoolHeadsEvery != kPoolHeadsEvery - 1;
    if (k % 2 == 0) co.empty_rows = true;
    return co;
  }
  int n_, drawn_ = 0;
  Dtype dtype_;
  rc::Random random_;
};
}  // namespace

bool CheckRun::declines_unequal_head_dims() {
  if (!unequal_head_dims_declined) unequal_head_dims_declined = engine::declines_unequal_head_dims(env, opt.dtype);
  return *unequal_head_dims_declined;
}

std::shared_ptr<const std::vector<Shape>> shape_pool(int n, std::uint64_t seed, Dtype dt) {
  PoolDraws draws(n, seed, dt);
  auto pool = std::make_shared<std::vector<Shape>>();
  for (int k = 0; k < std::max(n, 2); ++k)
    if (const Shape s = draws.next(); std::find(pool->begin(), pool->end(), s) == pool->end()) pool->push_back(s);
  return pool;
}

bool compiles_per_shape(const Env &env, const std::vector<Shape> &pool, Dtype dt) {
  auto seconds = [&](const Shape &s) {
    const Problem p = zero_problem(s, dt, false);
    const auto t0 = Clock::now();
    (void)run_forward(env, p);
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  const double first = seconds(pool.at(0)), repeat = seconds(pool.at(0));
  const double other = pool.size() > 1 ? seconds(pool[1]) : first;
  const double compile = std::min(first, other);
  return compile >= CheckOptions::kCompileSeconds && compile >= CheckOptions::kCompileRatio * repeat;
}

ShapePool accepted_pool(const Env &env, std::shared_ptr<const std::vector<Shape>> drawn, int n, std::uint64_t seed,
                        Dtype dt) {
  ShapePool out{.shapes = drawn, .plan = n, .declined = {}};
  auto pool = std::make_shared<std::vector<Shape>>();
  std::vector<Shape> tried;
  // Adds the first of s and its narrowed forms that the kernel accepts and the pool lacks.
  const auto add_accepted = [&](const Shape &s) {
    Shape equal_dv = s, equal_heads = s, tied = s;
    equal_dv.Dv = s.D;
    equal_heads.Hkv = s.Hq;
    tied.D = tied.Dv = s.Lk;  // what properties with Dv = Lk draw for a kernel that declines Dv ≠ D (tie_head_dims)
    Shape both = equal_dv, tied_heads = tied;
    both.Hkv = tied_heads.Hkv = s.Hq;
    // Tied before Dv = D: the properties with Dv = Lk then find pool shapes too (the rest take any).
    for (const Shape &c : {s, tied, equal_dv, equal_heads, tied_heads, both}) {
      if (std::find(tried.begin(), tried.end(), c) != tried.end()) continue;
      tried.push_back(c);
      if (run_forward(env, zero_problem(c, dt, false)).call.status == ATTNCHECK_UNSUPPORTED) {
        out.declined.push_back(c);
        continue;
      }
      pool->push_back(c);
      return;
    }
  };
  for (const Shape &s : *drawn) add_accepted(s);
  if (*pool == *drawn) return out;
  PoolDraws draws(n, seed, dt);
  for (int k = 0; k < n * kPoolDrawsPerShape && pool->size() < drawn->size(); ++k) add_accepted(draws.next());
  if (!pool->empty()) out.shapes = std::move(pool);
  return out;
}

void warm_up(const Env &env, const std::vector<Shape> &pool, Dtype dt) {
  for (const Shape &s : pool) {
    const Problem p = zero_problem(s, dt, env.kernel.backward != nullptr);
    const ForwardRun fr = run_forward(env, p);
    if (fr.call.ok() && env.kernel.backward != nullptr) (void)run_backward(env, p, fr);
  }
}

}  // namespace attncheck::engine
