// Hints from evidence (SPEC.md §3.1): a planted real bug's failure groups carry, beside "no declaration explains
// it", a hint computed from the counterexample that names the defect — the scale fitted, the keys dropped, the mask's
// alignment, the lost rescale — and only a hint whose changed exact result reproduces the kernel's output; a correct
// kernel of a declarable convention gets none.
#include "attncheck/check.h"
#include "attncheck/report_io.h"
#include "attncheck/kernel_abi.h"
#include "diagnosis/diagnosis.h"
#include "variant_kernels.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

using namespace attncheck;
using namespace attncheck::reporting;
using support::Bug;
using support::Variant;

namespace {

/// Planned cases per property: the quick profile's.
constexpr int kCases = 15;

/// Every property but long_rows (as report_explain_test.cpp), `kCases` cases under the default contract with evidence
/// (and so hints), as one report.
Document checked(const attncheck_kernel &kernel, Dtype dt) {
  CheckOptions o;
  o.dtype = dt;
  o.cases = kCases;
  o.evidence = true;
  for (const PropertyDef *d : all_properties())
    if (d->id != "long_rows") o.properties.emplace_back(d->id);
  Document doc;
  doc.runs.push_back({{KernelSource::Kind::builtin, ""}, "quick", check(kernel, o)});
  return doc;
}

/// Every hint of the failure groups of `doc`.
std::vector<Hint> group_hints(const Document &doc) {
  std::vector<Hint> out;
  for (const FailureGroup &g : group_failures(doc)) out.insert(out.end(), g.hints.begin(), g.hints.end());
  return out;
}

/// The declarations the failure groups of `doc` name.
std::set<std::string> named(const Document &doc) {
  std::set<std::string> out;
  for (const FailureGroup &g : group_failures(doc))
    for (const Explanation &e : g.explained) out.insert(e.declaration);
  return out;
}

/// The convention variant whose contract has `declaration` as its one change from the defaults.
Variant convention(const std::string &declaration) {
  for (const Variant &v : support::contract_variants())
    if (support::contract_of(v).describe_changes() == declaration) return v;
  FAIL("no contract variant declares " << declaration);
  return {};
}

// A kernel that is Bug::missing_scale and, on top, adds kDetune to every float32 O element: the scale hypothesis
// (scale 1) then reproduces its LSE but not its O, so no hint may be given.
constexpr float kDetune = 0.25f;
const attncheck_kernel *g_missing_scale = nullptr;

int detuned_forward(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                    DLTensor *out, DLTensor *lse) {
  const int status = g_missing_scale->forward(params, q, k, v, out, lse);
  if (status != 0 || out->dtype.code != kDLFloat || out->dtype.bits != 32) return status;
  for (int d = 0; d < out->ndim; ++d)
    if (out->shape[d] == 0) return status;
  std::vector<std::int64_t> index(static_cast<std::size_t>(out->ndim), 0);
  auto *base = reinterpret_cast<float *>(static_cast<char *>(out->data) + out->byte_offset);
  for (bool more = true; more;) {
    std::int64_t offset = 0;
    for (int d = 0; d < out->ndim; ++d) offset += index[static_cast<std::size_t>(d)] * out->strides[d];
    base[offset] += kDetune;
    more = false;
    for (int d = out->ndim - 1; d >= 0 && !more; --d) {
      if (++index[static_cast<std::size_t>(d)] < out->shape[d]) more = true;
      else index[static_cast<std::size_t>(d)] = 0;
    }
  }
  return 0;
}

const attncheck_kernel &detuned_missing_scale() {
  g_missing_scale = &support::variant_kernel(support::bug_variant(Bug::missing_scale));
  static const attncheck_kernel k{ATTNCHECK_ABI_VERSION, "missing_scale_detuned", detuned_forward, nullptr,
                                  nullptr};
  return k;
}

/// "through key 3 (".
std::string fmt_key(std::int64_t j) { return "through key " + std::to_string(j) + " ("; }

}  // namespace

TEST_CASE("each planted real bug is explained by no declaration and carries a hint that names its defect") {
  struct Expect {
    Bug bug;
    Dtype dt;
    Hint::Kind kind;
    std::string text;  ///< what the hint's sentence must say
    /// A mask that lets a hidden key in also lets its NaN in: where the off-by-one is not visible on its own (a
    /// 2 × 1 case, where it is the top-left alignment), the poisoned key is traced instead.
    bool nan_source_too = false;
  };
  // The four real bugs (no rescale, a dropped tail block, a misaligned mask, a wrong scale), a scale of
  // 1/D and an overflow.
  const Expect bugs[] = {
      {Bug::missing_scale, Dtype::f16, Hint::Kind::scale, "the exact attention at scale 1"},
      {Bug::scale_1_over_d, Dtype::f32, Hint::Kind::scale, "the exact attention at scale 1"},  // 1/D, or 1 (D = 1)
      {Bug::drop_last_partial_block, Dtype::f32, Hint::Kind::dropped_keys, "a dropped tail tile"},
      {Bug::causal_off_by_one, Dtype::f32, Hint::Kind::mask_shift, "matches a causal mask off by one (diagonal +1",
       true},
      {Bug::no_rescale, Dtype::f32, Hint::Kind::lost_rescale, "a lost rescale: O is the sum of the partial outputs"},
      {Bug::no_max_subtraction, Dtype::f32, Hint::Kind::exp_overflow, "— the row max not subtracted"},
  };
  for (const Expect &e : bugs) {
    const Document doc = checked(support::variant_kernel(support::bug_variant(e.bug)), e.dt);
    INFO(support::bug_name(e.bug) << " " << dtype_name(e.dt) << "\n" << to_text(doc));
    REQUIRE(doc.verdict() == Verdict::fail);
    CHECK(named(doc).empty());
    const std::vector<Hint> hints = group_hints(doc);
    CHECK(std::count_if(hints.begin(), hints.end(), [&](const Hint &h) { return h.kind == e.kind; }) > 0);
    for (const Hint &h : hints) {  // every hint names this defect, none another
      INFO(h.text);
      if (e.nan_source_too && h.kind == Hint::Kind::nan_source) {
        CHECK(h.text.find("a key the row does not see") != std::string::npos);
        continue;
      }
      CHECK(h.kind == e.kind);
      CHECK(h.text.find(e.text) != std::string::npos);
      CHECK(h.ratio <= 1);    // the changed problem's exact result reproduces the kernel's output …
      CHECK(h.baseline > 1);  // … where the problem's own does not
      switch (h.kind) {
        case Hint::Kind::scale:
          if (e.bug == Bug::missing_scale) CHECK(h.scale == 1);
          if (e.bug == Bug::scale_1_over_d) CHECK((h.text.find("at scale 1/D = ") != std::string::npos || h.scale == 1));
          break;
        case Hint::Kind::mask_shift: CHECK(h.shift == 1); break;
        case Hint::Kind::lost_rescale: CHECK(h.tile == support::bug_variant(e.bug).key_block); break;
        case Hint::Kind::dropped_keys:
          CHECK(h.row >= 0);
          CHECK(0 <= h.first_key);
          CHECK(h.first_key <= h.last_key);
          break;
        case Hint::Kind::exp_overflow: CHECK(h.row >= 0); break;
        case Hint::Kind::nan_source: CHECK(h.first_key >= 0); break;
      }
    }
    for (const FailureGroup &g : group_failures(doc)) {
      if (g.warning) continue;
      CHECK(g.caption.find("no declaration explains it") != std::string::npos);
      for (const Hint &h : g.hints) CHECK(g.caption.find(" — " + h.text + " — no declaration explains it") !=
                                          std::string::npos);
      CHECK(g.caption.find('?') == std::string::npos);  // no canned question left
    }
    // Every format carries them, and report.json keeps them as data.
    REQUIRE_FALSE(hints.empty());
    const std::string &text = hints.front().text;
    CHECK(to_text(doc).find(text) != std::string::npos);
    CHECK(to_junit(doc).find("hint: ") != std::string::npos);
    const Document back = from_json(to_json(doc));
    CHECK(group_hints(back) == hints);
    CHECK(to_json(back) == to_json(doc));
  }
}

TEST_CASE("hints are deterministic: the same seed gives the same hints") {
  const attncheck_kernel &kernel = support::variant_kernel(support::bug_variant(Bug::drop_last_partial_block));
  const std::vector<Hint> first = group_hints(checked(kernel, Dtype::f32));
  CHECK_FALSE(first.empty());
  CHECK(group_hints(checked(kernel, Dtype::f32)) == first);
}

TEST_CASE("a correct kernel of a declarable convention gets no hint") {
  // Its failures are explained by its declaration (causal=top-left: online_b16_exp2_roundp_f32acc_topleft), which
  // is the explanation; a hint beside it would mislead.
  const std::pair<const char *, Dtype> conventions[] = {
      {"causal=top-left", Dtype::f32},   {"causal=top-left", Dtype::f16},        {"rowsum=rounded-p", Dtype::f16},
      {"lse=storage", Dtype::f16},       {"accumulate-qk=f16", Dtype::f32},      {"empty-rows=unspecified", Dtype::f32},
  };
  for (const auto &[declaration, dt] : conventions) {
    const Variant v = convention(declaration);
    const Document doc = checked(support::variant_kernel(v), dt);
    INFO(v.name() << " " << dtype_name(dt) << "\n" << to_text(doc));
    REQUIRE(doc.verdict() == Verdict::fail);
    CHECK(named(doc) == std::set<std::string>{declaration});
    CHECK(group_hints(doc).empty());
    for (const auto &[r, p] : doc.failures())
      if (const auto &ev = doc.runs[r].report.properties[p].counterexample->evidence) CHECK(ev->hints.empty());
  }
}

TEST_CASE("a hint is given only when verified: a near miss and a defect no hypothesis models get none") {
  // Scale 1 reproduces the detuned kernel's LSE, but its O is off by kDetune: no hint. Without the detuning, the
  // same bug gets its scale hint.
  const Document missing = checked(support::variant_kernel(support::bug_variant(Bug::missing_scale)), Dtype::f32);
  const std::vector<Hint> exact = group_hints(missing);
  REQUIRE_FALSE(exact.empty());
  CHECK(exact.front().kind == Hint::Kind::scale);
  const Document detuned = checked(detuned_missing_scale(), Dtype::f32);
  INFO(to_text(detuned));
  REQUIRE(detuned.verdict() == Verdict::fail);
  CHECK(group_hints(detuned).empty());
  // A query head reading another kv head, a backward without its D term, and a key loop one key too long that reads
  // the NaN padding past the last key (no input holds that NaN: no key to trace it to): nothing reproduces them.
  for (const Bug bug : {Bug::gqa_head_mod, Bug::ds_without_d_term, Bug::read_past_last_key}) {
    const Document doc = checked(support::variant_kernel(support::bug_variant(bug)), Dtype::f32);
    INFO(support::bug_name(bug) << "\n" << to_text(doc));
    REQUIRE(doc.verdict() == Verdict::fail);
    CHECK(group_hints(doc).empty());
    for (const auto &[r, p] : doc.failures())
      if (const auto &ev = doc.runs[r].report.properties[p].counterexample->evidence) CHECK(ev->hints.empty());
  }
}




TEST_CASE("a hidden key's NaN that reaches O is traced to that key by re-running the kernel without it, never to a mask") {
  // P·V over every key of a block, hidden ones with P = 0 (hidden-keys=finite, the default: an advisory warning
  // when they hold NaN): 0·NaN = NaN reaches the row.
  std::optional<Variant> dense;
  for (const Variant &v : support::contract_variants())
    if (v.dense_pv) dense = v;
  REQUIRE(dense);
  const Document doc = checked(support::variant_kernel(*dense), Dtype::f32);
  INFO(to_text(doc));
  std::vector<Hint> traced;
  for (const Hint &h : group_hints(doc)) {
    INFO(h.text);
    // Never a mask hint: a mask that shows the NaN key would "reproduce" the NaN only by matching NaN to NaN.
    CHECK(h.kind != Hint::Kind::mask_shift);
    if (h.kind == Hint::Kind::nan_source) traced.push_back(h);
  }
  REQUIRE_FALSE(traced.empty());
  for (const Hint &h : traced) {
    INFO(h.text);
    CHECK(h.row >= 0);
    CHECK(h.first_key == h.last_key);
    CHECK(h.text.find(fmt_key(h.first_key)) != std::string::npos);
    CHECK(h.text.find("a key the row does not see") != std::string::npos);
  }
}

TEST_CASE("a NaN that a mask off by one would let in is traced to its key: a hint never matches NaN to NaN") {
  // Dense P·V (hidden keys with P = 0): the NaN in v of key 1, hidden from row 0 of a 2 × 2 bottom-right causal
  // case, reaches row 0 as 0·NaN. A causal mask off by one (diagonal +1) would show key 1 to row 0, whose exact row
  // is then NaN as well (its LSE unchanged: key 1's logit there is far below key 0's): matching NaN to NaN, it
  // "reproduced" the kernel, and named a mask bug that is not there.
  std::optional<Variant> dense;
  for (const Variant &v : support::contract_variants())
    if (v.dense_pv) dense = v;
  REQUIRE(dense);
  Case c;
  c.spec.dtype = Dtype::f32;
  c.spec.shape = Shape{.B = 1, .Hq = 1, .Hkv = 1, .Lq = 2, .Lk = 2, .D = 2, .Dv = 2};
  c.spec.mask = Mask::causal;
  c.resize_values(false);
  c.q = {1, 0, 0, 1};
  c.k = {1, 1, -100, 1};  // key 1's logit in row 0 far below key 0's: showing it leaves row 0's LSE as it is
  c.v = {1, 2, std::numeric_limits<double>::quiet_NaN(), 3};
  RunReport r;
  r.kernel = "dense";
  r.dtype = Dtype::f32;
  r.contract = support::contract_of(*dense);
  PropertyReport p;
  p.id = "masked_nonfinite";
  p.verdict = Verdict::warn;
  p.counterexample = Counterexample{.minimal = c, .outcome = Outcome{.verdict = Verdict::fail, .step = Step::values}};
  r.properties.push_back(p);
  diagnosis::add_evidence(r, support::variant_kernel(*dense));
  const Counterexample &cx = *r.properties.front().counterexample;
  REQUIRE(cx.evidence);
  const std::vector<Hint> &hints = cx.evidence->hints;
  REQUIRE(hints.size() == 1);
  INFO(hints.front().text);
  CHECK(hints.front().kind == Hint::Kind::nan_source);
  CHECK(hints.front().first_key == 1);
}
