// paged: a paged KV cache (SPEC.md §2.7; block table, page size, seqused_k) — O and LSE within their bounds with
// pages in any order, some unused and the tail of the last one NaN, and the relations that define it: the output
// does not depend on where the pages lie (another block table), and equals the contiguous cache's.
#include "feature_checks.h"

#include <algorithm>

namespace attncheck::props {

namespace {
Outcome run(const Env &env, const Case &c) {
  Ladder L;
  // The same logical cache on other pages: the block table reversed, with the unused pages taken first.
  Problem moved = c.problem();
  Features &f = moved.features;
  std::vector<std::int32_t> spare;
  for (std::int32_t pg = 0; pg < f.num_pages; ++pg)
    if (std::find(f.block_table.begin(), f.block_table.end(), pg) == f.block_table.end()) spare.push_back(pg);
  std::reverse(f.block_table.begin(), f.block_table.end());
  for (std::size_t n = 0; n < spare.size() && n < f.block_table.size(); ++n) f.block_table[n] = spare[n];
  // The contiguous cache: batch entries that use all Lk keys agree with it.
  Case dense = c;
  dense.spec.features.bits &= ~static_cast<std::uint32_t>(ATTNCHECK_FEATURE_PAGED);
  FeatureRun a, b, d;
  if (!call_feature(env, c.problem(), L, a, "forward", true) ||
      !call_feature(env, std::move(moved), L, b, "forward on other pages") ||
      !call_feature(env, dense.problem(), L, d, "forward on the contiguous cache"))
    return L.outcome();
  return judged_runs(env, {std::move(a), std::move(b), std::move(d)},
                     [dense](std::vector<FeatureRun> &r, ExactSource &src) {
                       const FeatureRun &a = r[0];
                       Ladder J;
                       if (!feature_accuracy(a, src, J)) return J.outcome();
                       rows_agree(J, "O (other pages)", a, r[1], [](std::int64_t row) { return row; });
                       J.judging(dense, "the cache contiguous");
                       const Shape &s = a.p.shape;
                       rows_agree(J, "O (paged vs contiguous)", a, r[2], [&](std::int64_t row) -> std::int64_t {
                         return seq_keys(a.p.features, row / (s.Lq * s.Hq), s.Lk) == s.Lk ? row : -1;
                       });
                       return J.outcome();
                     });
}
}  // namespace

const PropertyDef &paged_property() {
  static const PropertyDef def{
      .id = "paged",
      .formula = "key j of b = row j mod P of page table[b, ⌊j/P⌋], j < seqused_k[b]: |Ô − O| ≤ β, LSE too; any "
                 "table = contiguous",
      .summary = "the paged cache is read at the logical page instead of the block table's, past seqused_k, or "
                 "with the page size assumed a multiple of the tile",
      .require = &with_feature<ATTNCHECK_FEATURE_PAGED>,
      .tier = &feature_tier<ATTNCHECK_FEATURE_PAGED>,
      .feature = ATTNCHECK_FEATURE_PAGED,
      .targeted = true,
      .screened = true,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
