// libattncheck_bug_plugin.so: the variant kernels as a third-party plugin, for end-to-end tests of the CLI.
// Every planted bug ("bug:missing_scale", ...) and two correct kernels — the default per-key online softmax
// ("online_b1_f32acc") and a FlashAttention-2-like one ("online_b64_exp2_roundp_recip_f32acc") — each named by
// its variant name. Like any plugin it exports one symbol, attncheck_kernels(): everything else is hidden (this
// file by visibility, the static libraries linked in by --exclude-libs).
#include "attncheck/kernel_abi.h"
#include "variant_kernels.h"

#include <vector>

namespace {

using attncheck::support::Variant;

constexpr int kFlashTile = 64;  // FlashAttention-2's key tile

std::vector<Variant> exported_variants() {
  std::vector<Variant> out;
  for (attncheck::support::Bug b : attncheck::support::all_bugs()) out.push_back(attncheck::support::bug_variant(b));
  out.push_back(Variant{});
  out.push_back(Variant{.key_block = kFlashTile, .exp2_fold = true, .round_p = true, .reciprocal_norm = true});
  return out;
}

/// The kernels, contiguous as the ABI wants them; built once (thread-safe static initialization).
const std::vector<attncheck_kernel> &kernels() {
  static const std::vector<attncheck_kernel> table = [] {
    std::vector<attncheck_kernel> t;
    for (const Variant &v : exported_variants()) t.push_back(attncheck::support::variant_kernel(v));
    return t;
  }();
  return table;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const attncheck_kernel *attncheck_kernels(int32_t *count) {
  const std::vector<attncheck_kernel> &t = kernels();
  if (count) *count = static_cast<int32_t>(t.size());
  return t.data();
}
