// Section 2: how peaked softmax(scale·q·K) is, as a function of d_k, L and the scaling.
//
// For a row z of logits, with m = max_j z_j, e_j = exp(z_j − m), S = Σ_j e_j, p_j = e_j / S:
//   entropy H = −Σ p_j ln p_j = ln S − Σ_j p_j (z_j − m)   (0 for one-hot, ln L for uniform)
//   max probability = 1 / S.
// Rows are independent (fresh q and K per row), so the mean over rows has a CLT interval.
#include "random.h"
#include "sections.h"
#include "stats.h"

#include <algorithm>
#include <cmath>

namespace attncheck::study {
namespace {
constexpr double kClaimedScaledRange = 3;  ///< the seed: "softmax 输入落在 [-3, 3] 区间"
}

const SaturationCell *SaturationSection::find(int dk, int L, Scaling s) const {
  for (const auto &c : cells)
    if (c.dk == dk && c.L == L && c.scaling == s) return &c;
  return nullptr;
}

SaturationSection run_saturation(const Plan &plan, std::uint64_t seed, double z) {
  SaturationSection sec;
  sec.lengths = plan.lengths;
  sec.rows_per_cell = plan.saturation_rows;
  sec.claimed_scaled_range = kClaimedScaledRange;
  const auto rows = static_cast<std::size_t>(plan.saturation_rows);
  constexpr std::size_t kScalingCount = std::size(kScalings);
  for (int L : plan.lengths) {
    for (int dk : plan.dks) {
      Rng rng(seed, stream_key({kStreamSaturation, static_cast<std::uint64_t>(L), static_cast<std::uint64_t>(dk)}));
      std::vector<double> entropy[kScalingCount], max_prob[kScalingCount];
      std::int64_t beyond[kScalingCount] = {};
      std::vector<double> q(static_cast<std::size_t>(dk)), x(static_cast<std::size_t>(L));
      for (std::size_t r = 0; r < rows; ++r) {
        for (auto &qi : q) qi = rng.normal();
        for (auto &xj : x) {
          double dot = 0;
          for (double qi : q) dot += qi * rng.normal();
          xj = dot;
        }
        for (std::size_t s = 0; s < kScalingCount; ++s) {
          const double c = scale_factor(kScalings[s], dk);
          double m = -INFINITY, maxabs = 0;
          for (double xj : x) {
            m = std::max(m, c * xj);
            maxabs = std::max(maxabs, std::abs(c * xj));
          }
          double sum = 0, weighted = 0;
          for (double xj : x) {
            const double shifted = c * xj - m;
            const double e = std::exp(shifted);
            sum += e;
            weighted += e * shifted;
          }
          entropy[s].push_back(std::log(sum) - weighted / sum);
          max_prob[s].push_back(1 / sum);
          beyond[s] += maxabs > kClaimedScaledRange;
        }
      }
      for (std::size_t s = 0; s < kScalingCount; ++s) {
        SaturationCell cell;
        cell.dk = dk;
        cell.L = L;
        cell.scaling = kScalings[s];
        cell.entropy = mean_estimate(entropy[s], z);
        cell.max_prob = mean_estimate(max_prob[s], z);
        cell.frac_rows_beyond_claim = static_cast<double>(beyond[s]) / static_cast<double>(rows);
        sec.cells.push_back(cell);
      }
    }
  }
  return sec;
}

}  // namespace attncheck::study
