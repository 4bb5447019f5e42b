// The judge of given tensors (gate::judge, judge.h): outputs a kernel already returned, held against the exact values
// — correct kernels of every style pass in every dtype, forward and backward; planted bugs fail at their tensor with
// the worst element counted; a practice the contract can declare is named; what does not fit is one RunError line.
#include "attncheck/gate.h"
#include "attncheck/given.h"
#include "attncheck/judge.h"
#include "attncheck/kernel_call.h"
#include "attncheck/report_io.h"
#include "attncheck/run.h"
#include "feature_kernels.h"
#include "feature_problems.h"
#include "random_problems.h"
#include "variant_kernels.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

namespace attncheck {
namespace {

constexpr Dtype kDtypes[] = {Dtype::f32, Dtype::f16, Dtype::bf16};
/// Problems per kernel and dtype: the tiling boundaries, both masks, GQA, every value family in a few draws.
constexpr int kProblems = 4;

/// The request of `kernel`'s forward (and backward, when `backward` and it has one) on `p`, as a user's test has it.
gate::JudgeRequest ran(const attncheck_kernel &kernel, const Problem &p, const KernelContract &contract,
                       bool backward = true) {
  gate::JudgeRequest rq;
  rq.q = p.q, rq.k = p.k, rq.v = p.v;
  rq.scale = p.params.scale;
  rq.causal = p.params.mask != Mask::none;
  rq.features = p.features;
  rq.contract = contract.describe();
  Tensor out = make_out(p.shape, p.dtype());
  Tensor lse = contract.lse == LseOutput::storage ? Tensor::contiguous(p.dtype(), {p.shape.B, p.shape.Hq, p.shape.Lq})
                                                  : make_lse(p.shape);
  REQUIRE(call_forward(kernel, p, out, contract.lse == LseOutput::none ? nullptr : &lse).ok());
  rq.given.out = out;
  if (contract.lse != LseOutput::none) rq.given.lse = lse;
  if (backward && kernel.backward && p.dout) {
    Tensor dq = Tensor::contiguous(p.dtype(), p.q.shape()), dk = Tensor::contiguous(p.dtype(), p.k.shape()),
           dv = Tensor::contiguous(p.dtype(), p.v.shape());
    REQUIRE(call_backward(kernel, p, out, contract.lse == LseOutput::none ? nullptr : &lse, dq, dk, dv).ok());
    rq.dout = p.dout;
    rq.given.dq = dq, rq.given.dk = dk, rq.given.dv = dv;
  }
  return rq;
}

/// A problem of shape `s` with normal values (its tensors padded: the judge reads any strides).
Problem plain(std::mt19937_64 &rng, Dtype dt, Mask mask = Mask::none, Shape s = {1, 4, 2, 17, 65, 16, 8}) {
  return make_problem(rng, s, dt, Values::normal, mask);
}

TEST_CASE("the outputs and gradients of correct kernels of every style pass judge in every dtype") {
  std::vector<support::Variant> variants = support::correct_variants();
  for (const support::Variant &v : support::contract_variants()) variants.push_back(v);
  std::mt19937_64 rng(7);
  int judged = 0, gradients = 0;
  for (const support::Variant &v : variants)
    for (Dtype dt : kDtypes)
      for (int i = 0; i < kProblems; ++i) {
        const KernelContract contract = support::contract_of(v);
        if (!contract.implements(dt)) continue;
        const Problem p = random_problem(rng, dt);
        const gate::JudgeRequest rq = ran(support::variant_kernel(v), p, contract);
        const Judgment j = gate::judge(rq);
        INFO(v.name() << " " << dtype_name(dt) << " " << p.shape.describe() << "\n" << reporting::judgment_text(j));
        CHECK(j.verdict() != Verdict::fail);
        CHECK(j.verdict() != Verdict::warn);
        ++judged;
        gradients += rq.given.dq.has_value();
      }
  CHECK(judged > 100);
  CHECK(gradients == judged);
}

TEST_CASE("every planted bug the forward shows fails judge at its shape, and the report counts its elements") {
  // Bugs each visible on this causal GQA problem of a partial last block and Lq ≠ Lk (their comments in
  // variant_kernels.h say where each shows).
  const support::Bug bugs[] = {support::Bug::missing_scale,   support::Bug::no_rescale,
                               support::Bug::causal_off_by_one, support::Bug::gqa_head_mod,
                               support::Bug::drop_last_partial_block, support::Bug::dk_missing_scale,
                               support::Bug::ds_without_d_term};
  for (support::Bug b : bugs) {
    std::mt19937_64 rng(11);
    const Problem p = plain(rng, Dtype::f32, Mask::causal);
    const Judgment j = gate::judge(ran(support::variant_kernel(support::bug_variant(b)), p, {}));
    INFO(support::bug_variant(b).name() << "\n" << reporting::judgment_text(j));
    CHECK(j.verdict() == Verdict::fail);
    CHECK(gate::judge_exit_code(j, false) == gate::kExitCounterexample);
    std::int64_t exceeding = 0;
    for (const TensorJudgment &t : j.tensors) {
      exceeding += t.exceeding;
      if (t.exceeding) CHECK(t.ratio > 1);
    }
    CHECK(exceeding > 0);
  }
}

TEST_CASE("a forward bug's outputs carry the hint that explains them, a correct kernel's none") {
  // Each bug's defect is one a hint reproduces (hints.h): another scale, the causal diagonal moved, the rescale lost.
  const std::pair<support::Bug, Hint::Kind> bugs[] = {{support::Bug::missing_scale, Hint::Kind::scale},
                                                      {support::Bug::causal_off_by_one, Hint::Kind::mask_shift},
                                                      {support::Bug::no_rescale, Hint::Kind::lost_rescale}};
  for (const auto &[b, kind] : bugs) {
    std::mt19937_64 rng(11);
    const Problem p = plain(rng, Dtype::f32, Mask::causal);
    const Judgment j = gate::judge(ran(support::variant_kernel(support::bug_variant(b)), p, {}));
    INFO(support::bug_variant(b).name() << "\n" << reporting::judgment_text(j));
    REQUIRE(j.hints.size() == 1);
    CHECK(j.hints[0].kind == kind);
    CHECK(reporting::judgment_text(j).find("  hint: " + j.hints[0].text) != std::string::npos);
  }
  std::mt19937_64 rng(11);
  const Problem p = plain(rng, Dtype::f32, Mask::causal);
  CHECK(gate::judge(ran(support::variant_kernel({}), p, {})).hints.empty());
}

TEST_CASE("a judgment's progress counts the rows bounded up to all of them, then says when it explains a failure") {
  std::mt19937_64 rng(3);
  const Problem p = plain(rng, Dtype::f32, Mask::causal);
  const std::int64_t rows = p.shape.B * p.shape.Hq * p.shape.Lq;
  for (const support::Bug b : {support::Bug::none, support::Bug::missing_scale}) {
    const gate::JudgeRequest rq = ran(support::variant_kernel(support::bug_variant(b)), p, {});
    std::vector<JudgeProgress> heard;
    const Judgment j = judge_given(p, rq.given, {}, /*explain=*/true, [&](const JudgeProgress &at) {
      heard.push_back(at);
    });
    INFO(support::bug_variant(b).name());
    REQUIRE_FALSE(heard.empty());
    for (std::size_t n = 1; n < heard.size(); ++n) CHECK(heard[n].rows >= heard[n - 1].rows);
    const auto first_explaining = std::find_if(heard.begin(), heard.end(), [](auto &at) { return at.explaining; });
    CHECK(heard.front().total == 2 * rows);  // O and LSE, then the gradients
    CHECK((first_explaining == heard.end() ? heard.back() : *(first_explaining - 1)).rows == 2 * rows);
    CHECK((first_explaining != heard.end()) == (j.verdict() == Verdict::fail));
  }
}

TEST_CASE("a kernel aligned top-left fails the default contract, passes its own, and judge names the declaration") {
  std::mt19937_64 rng(3);
  const Problem p = plain(rng, Dtype::f16, Mask::causal, {1, 2, 2, 5, 12, 8, 8});
  const attncheck_kernel &kernel = support::variant_kernel(support::bug_variant(support::Bug::causal_top_left));
  gate::JudgeRequest rq = ran(kernel, p, {});
  const Judgment j = gate::judge(rq);
  CHECK(j.verdict() == Verdict::fail);
  REQUIRE_FALSE(j.explained_by.empty());
  CHECK(j.explained_by.front().declaration == "causal=top-left");
  CHECK(reporting::judgment_text(j).find("would pass under causal=top-left") != std::string::npos);
  rq.explain = false;
  CHECK(gate::judge(rq).explained_by.empty());
  rq.contract = "causal=top-left";
  CHECK(gate::judge(rq).verdict() == Verdict::pass);
}

TEST_CASE("outputs under a window, softcap, ALiBi, sinks and a mask pass on the correct feature kernel, and its bugs fail") {
  constexpr std::uint32_t kBits = ATTNCHECK_FEATURE_WINDOW | ATTNCHECK_FEATURE_SOFTCAP | ATTNCHECK_FEATURE_ALIBI |
                                  ATTNCHECK_FEATURE_SINKS | ATTNCHECK_FEATURE_MASK;
  const KernelContract contract = parse_contract(support::feature_contract(support::FeatureBug::none));
  std::mt19937_64 rng(13);
  for (Dtype dt : kDtypes)
    for (Mask mask : {Mask::none, Mask::causal}) {
      const Problem p = featuret::feature_problem(rng, dt, {2, 4, 2, 13, 70, 16, 8}, mask, kBits);
      const Judgment j = gate::judge(ran(support::feature_kernel(support::FeatureBug::none), p, contract));
      INFO(p.features.describe() << "\n" << reporting::judgment_text(j));
      CHECK(j.verdict() == Verdict::pass);
      CHECK(reporting::judgment_text(j).find(p.features.describe()) != std::string::npos);
    }
  // Each bug shows on the problem its comment names; the same outputs pass no judge that leaves its feature out.
  const std::pair<support::FeatureBug, std::uint32_t> bugs[] = {
      {support::FeatureBug::window_right_off_by_one, ATTNCHECK_FEATURE_WINDOW},
      {support::FeatureBug::softcap_after_mask, ATTNCHECK_FEATURE_SOFTCAP | ATTNCHECK_FEATURE_MASK},
      {support::FeatureBug::alibi_reversed_slopes, ATTNCHECK_FEATURE_ALIBI}};
  for (const auto &[bug, bits] : bugs) {
    Problem p = featuret::feature_problem(rng, Dtype::f32, {1, 4, 1, 9, 40, 8, 8}, Mask::none, bits);
    if (bits & ATTNCHECK_FEATURE_WINDOW) p.features.window_left = 3, p.features.window_right = 1;
    const Judgment j = gate::judge(ran(support::feature_kernel(bug), p, contract));
    INFO(support::feature_bug_name(bug) << "\n" << reporting::judgment_text(j));
    CHECK(j.verdict() == Verdict::fail);
  }
}

TEST_CASE("a correct kernel's outputs pass whatever one element of them is changed to, except where it shows") {
  std::mt19937_64 rng(5);
  const Problem p = plain(rng, Dtype::bf16);
  gate::JudgeRequest rq = ran(support::variant_kernel(support::correct_variants().front()), p, {}, false);
  REQUIRE(gate::judge(rq).verdict() == Verdict::pass);
  rq.given.out->set({0, 3, 16, 7}, rq.given.out->get({0, 3, 16, 7}) + 0.125);
  const Judgment j = gate::judge(rq);
  CHECK(j.verdict() == Verdict::fail);
  REQUIRE(j.tensors.size() == 2);
  CHECK(j.tensors[0].tensor == "O");
  CHECK(j.tensors[0].exceeding == 1);
  CHECK(j.tensors[0].worst_index == std::vector<std::int64_t>{0, 3, 16, 7});
  CHECK(j.tensors[1].exceeding == 0);
}

TEST_CASE("what a judge cannot take is one RunError line naming it") {
  std::mt19937_64 rng(9);
  const Problem p = plain(rng, Dtype::f32);
  const gate::JudgeRequest good = ran(support::variant_kernel(support::correct_variants().front()), p, {});
  const auto message = [&](const std::function<void(gate::JudgeRequest &)> &change) -> std::string {
    gate::JudgeRequest rq = good;
    change(rq);
    try {
      gate::judge(rq);
    } catch (const gate::RunError &e) {
      CHECK(e.exit_code == gate::kExitUsage);
      return (e.input.empty() ? "" : e.input + ": ") + e.what();
    }
    return "no error";
  };
  using Catch::Matchers::Contains;
  CHECK_THAT(message([](auto &rq) { rq.given.out.reset(); }), Contains("out is missing"));
  CHECK_THAT(message([](auto &rq) { rq.given.out = make_out({1, 4, 2, 17, 65, 16, 9}, Dtype::f32); }),
             Contains("out has shape [1, 4, 17, 9]; this problem's out is [1, 4, 17, 8]"));
  CHECK_THAT(message([](auto &rq) { rq.given.out = make_out({1, 4, 2, 17, 65, 16, 8}, Dtype::f16); }),
             Contains("out is f16; expected f32"));
  CHECK_THAT(message([](auto &rq) { rq.given.dv.reset(); }), Contains("give dq, dk and dv together"));
  CHECK_THAT(message([](auto &rq) { rq.dout.reset(); }), Contains("dq, dk, dv need dout"));
  CHECK_THAT(message([](auto &rq) { rq.given.lse.reset(); }), Contains("dq, dk, dv need lse"));
  CHECK_THAT(message([](auto &rq) { rq.q.set({0, 1, 2, 3}, std::nan("")); }), Contains("q holds NaN at q[0,1,2,3]"));
  CHECK_THAT(message([](auto &rq) { rq.scale = INFINITY; }), Contains("scale is inf"));
  CHECK_THAT(message([](auto &rq) { rq.contract = "causal=sideways"; }), Contains("contract: "));
  CHECK_THAT(message([](auto &rq) { rq.contract = "dtypes=f16"; }), Contains("the contract does not declare f32"));
  CHECK_THAT(message([](auto &rq) { rq.k = Tensor::contiguous(Dtype::f32, {1, 2, 65, 15}); }), Contains("D"));
  CHECK_THAT(message([](auto &rq) { rq.features.sinks = {1, 2}; }), Contains("sinks: has 2 values; one per query"));
  CHECK_THAT(message([](auto &rq) { rq.features.storage = KvStorage::paged; }), Contains("paged, dropout and FP8"));
  CHECK_THAT(message([](auto &rq) { rq.features.storage = KvStorage::varlen; }),
             Contains("cu_seqlens_q: gives 0 sequences; the batch has 1"));
  CHECK_THAT(message([](auto &rq) {
               rq.features.storage = KvStorage::varlen;
               rq.features.seqlens_q = {18}, rq.features.seqlens_k = {65};
             }),
             Contains("cu_seqlens_q: sequence 0 has 18 elements, outside [0, 17]"));
  CHECK_THAT(message([](auto &rq) { rq.features.mask_kind = MaskKind::boolean; }), Contains("attn_mask: is [1, 1"));
}

}  // namespace
}  // namespace attncheck
