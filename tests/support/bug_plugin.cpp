// libattncheck_bug_plugin.so: the variant kernels as a third-party plugin, for end-to-end tests of the CLI.
// Every planted bug ("bug:missing_scale", ...; and the scale bugs, "bug:block_counter_8bit", ...), two correct
// kernels — the default per-key online softmax ("online_b1_f32acc") and a FlashAttention-2-like one
// ("online_b64_exp2_roundp_recip_f32acc") — and one correct kernel of every contract option (contract_variants:
// top-left causal, LSE in storage, dense P·V, …), each named by its variant name; the contract variants declare
// their contracts through attncheck_contracts (ABI 1.1). Then the feature kernels (feature_kernels.h, ABI 1.2):
// "features_correct" and one kernel per FeatureBug ("features_window_right_off_by_one", …), each declaring
// "features=window+softcap+alibi+sinks+mask+varlen+paged+dropout". Like any plugin it exports only the ABI symbols:
// everything else is hidden (this file by visibility, the static libraries linked in by --exclude-libs).
#include "attncheck/kernel_abi.h"
#include "feature_kernels.h"
#include "variant_kernels.h"

#include <string>
#include <vector>

namespace {

using attncheck::support::Variant;

constexpr int kFlashTile = 64;  // FlashAttention-2's key tile

std::vector<Variant> exported_variants() {
  std::vector<Variant> out;
  for (attncheck::support::Bug b : attncheck::support::all_bugs()) out.push_back(attncheck::support::bug_variant(b));
  for (attncheck::support::Bug b : attncheck::support::scale_bugs()) out.push_back(attncheck::support::bug_variant(b));
  out.push_back(Variant{});
  out.push_back(Variant{.key_block = kFlashTile, .exp2_fold = true, .round_p = true, .reciprocal_norm = true});
  for (const Variant &v : attncheck::support::contract_variants()) out.push_back(v);
  return out;
}

/// The feature kernels: the correct one, then every FeatureBug (the reserved fp8_without_descale refuses every call).
std::vector<attncheck::support::FeatureBug> exported_feature_bugs() {
  std::vector<attncheck::support::FeatureBug> out{attncheck::support::FeatureBug::none};
  for (attncheck::support::FeatureBug b : attncheck::support::all_feature_bugs()) out.push_back(b);
  return out;
}

/// The kernels, contiguous as the ABI wants them; built once (thread-safe static initialization).
const std::vector<attncheck_kernel> &kernels() {
  static const std::vector<attncheck_kernel> table = [] {
    std::vector<attncheck_kernel> t;
    for (const Variant &v : exported_variants()) t.push_back(attncheck::support::variant_kernel(v));
    for (attncheck::support::FeatureBug b : exported_feature_bugs()) t.push_back(attncheck::support::feature_kernel(b));
    return t;
  }();
  return table;
}

/// The contract variants' and the feature kernels' declarations: kernel names and contract texts that live as long
/// as the plugin.
const std::vector<attncheck_kernel_contract> &contracts() {
  static const std::vector<std::string> texts = [] {
    std::vector<std::string> t;
    for (const Variant &v : attncheck::support::contract_variants())
      t.push_back(attncheck::support::contract_of(v).describe_changes());
    for (attncheck::support::FeatureBug b : exported_feature_bugs())
      t.push_back(attncheck::support::feature_contract(b));
    return t;
  }();
  static const std::vector<attncheck_kernel_contract> table = [] {
    std::vector<attncheck_kernel_contract> t;
    const std::vector<Variant> vs = attncheck::support::contract_variants();
    for (std::size_t n = 0; n < vs.size(); ++n)
      t.push_back({attncheck::support::variant_kernel(vs[n]).name, texts[n].c_str()});
    const std::vector<attncheck::support::FeatureBug> fbs = exported_feature_bugs();
    for (std::size_t n = 0; n < fbs.size(); ++n)
      t.push_back({attncheck::support::feature_kernel(fbs[n]).name, texts[vs.size() + n].c_str()});
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

extern "C" __attribute__((visibility("default"))) const attncheck_kernel_contract *attncheck_contracts(
    int32_t *count) {
  const std::vector<attncheck_kernel_contract> &t = contracts();
  if (count) *count = static_cast<int32_t>(t.size());
  return t.data();
}
