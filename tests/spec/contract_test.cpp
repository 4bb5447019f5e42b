#include "attncheck/contract.h"
#include "attncheck/problem.h"

#include <catch2/catch.hpp>

#include <array>

using namespace attncheck;

TEST_CASE("a contract that declares nothing is what FlashAttention-2 promises", "[contract]") {
  const KernelContract c = parse_contract("");
  CHECK(c == KernelContract{});
  CHECK(c.causal == CausalAlign::bottom_right);
  CHECK(c.lse == LseOutput::f32);
  CHECK(c.empty_rows == EmptyRows::zero);
  CHECK(c.hidden_keys == HiddenKeys::finite);
  CHECK(c.forward_determinism == Determinism::bitwise);
  CHECK(c.backward_determinism == Determinism::within_bound);
  CHECK(c.describe_changes() == "defaults");
  const PrecisionProfile f32 = c.precision(Dtype::f32), bf16 = c.precision(Dtype::bf16);
  CHECK(f32 == PrecisionProfile{.storage = Dtype::f32});
  CHECK(bf16.round_p);
  CHECK_FALSE(bf16.rowsum_rounded_p);  // FlashAttention-2 sums the unrounded P: rounded-p is declared
  CHECK(parse_contract("rowsum=rounded-p").precision(Dtype::bf16).rowsum_rounded_p);
  CHECK(bf16.grad_per_head);
  CHECK(bf16.accumulate == Dtype::f32);
  CHECK(bf16.accumulate_qk == Dtype::f32);
  CHECK(bf16.lse == Dtype::f32);
  CHECK(PrecisionProfile::for_storage(Dtype::f16) == c.precision(Dtype::f16));
}

TEST_CASE("every key parses, and describe() parses back to the same contract", "[contract]") {
  const KernelContract c = parse_contract(
      "causal=top-left, lse=storage empty-rows=unspecified,hidden-keys=any forward-determinism=within-bound "
      "backward-determinism=bitwise batch-invariant=bitwise accumulate-qk=f16 accumulate-pv=bf16 round-p=no "
      "rowsum=exact grad-sum=per-head tanh=approx exp=approx-bf16 fp32-precision=tf32");
  CHECK(c.causal == CausalAlign::top_left);
  CHECK(c.lse == LseOutput::storage);
  CHECK(c.empty_rows == EmptyRows::unspecified);
  CHECK(c.hidden_keys == HiddenKeys::any);
  CHECK(c.forward_determinism == Determinism::within_bound);
  CHECK(c.backward_determinism == Determinism::bitwise);
  CHECK(c.batch_invariant == BatchInvariance::bitwise);
  CHECK(c.accumulate_qk == Dtype::f16);
  CHECK(c.accumulate_pv == Dtype::bf16);
  CHECK(c.round_p == Allow::no);
  CHECK(c.rowsum_rounded_p == Allow::no);
  CHECK(c.grad_per_head == Allow::yes);
  CHECK(c.tanh == Tanh::approx);
  CHECK(c.exp == Exp::approx_bf16);
  CHECK(c.fp32_precision == Fp32Precision::tf32);
  CHECK(parse_contract(c.describe()) == c);
  CHECK(parse_contract(c.describe_changes()) == c);
  const PrecisionProfile p = c.precision(Dtype::f16);
  CHECK(p.accumulate_qk == Dtype::f16);
  CHECK(p.accumulate == Dtype::bf16);
  CHECK_FALSE(p.round_p);
  CHECK_FALSE(p.rowsum_rounded_p);  // only with round_p
  CHECK(p.grad_per_head);
  CHECK(p.lse == Dtype::f16);
  CHECK(p.tanh == Tanh::approx);
  CHECK(p.fp32_precision == Fp32Precision::tf32);
  CHECK(p.exp == Exp::approx_bf16);
  CHECK(p.describe().find("tanh tanh.approx.f32, exp ex2.approx.ftz.bf16") != std::string::npos);
}

TEST_CASE("the transcendental keys default to accurate and take each approximation", "[contract]") {
  CHECK(KernelContract{}.describe().find("grad-sum=auto tanh=accurate exp=accurate dtypes=f32+f16+bf16 features=none") !=
        std::string::npos);
  CHECK(PrecisionProfile::for_storage(Dtype::bf16).tanh == Tanh::accurate);
  CHECK(parse_contract("tanh=approx-f16").tanh == Tanh::approx_f16);
  CHECK(parse_contract("tanh=approx-bf16").describe_changes() == "tanh=approx-bf16");
  CHECK(parse_contract("exp=approx,exp=approx-f16").exp == Exp::approx_f16);
  CHECK_THROWS_WITH(parse_contract("tanh=fast"),
                    Catch::Matchers::Contains("tanh is one of accurate|approx|approx-f16|approx-bf16"));
}

TEST_CASE("a kernel implements every dtype by default and declares the ones it does with dtypes=", "[contract]") {
  for (Dtype dt : {Dtype::f32, Dtype::f16, Dtype::bf16}) CHECK(KernelContract{}.implements(dt));
  const KernelContract flash = parse_contract("dtypes=bf16+f16");
  CHECK_FALSE(flash.implements(Dtype::f32));
  CHECK(flash.implements(Dtype::f16));
  CHECK(flash.implements(Dtype::bf16));
  CHECK(flash.describe_changes() == "dtypes=f16+bf16");  // enum order, whatever the declaration's
  CHECK(parse_contract(flash.describe()) == flash);
  CHECK(parse_contract("dtypes=float32").dtypes == dtype_bit(Dtype::f32));
  CHECK(parse_contract("dtypes=f32 dtypes=f32+f16+bf16") == KernelContract{});
  CHECK_THROWS_WITH(parse_contract("dtypes=f64"), Catch::Matchers::Contains("unknown dtype 'f64'"));
  CHECK_THROWS_WITH(parse_contract("dtypes="), Catch::Matchers::Contains("no dtype in ''"));
  CHECK_THROWS_WITH(parse_contract("dtypes=+"), Catch::Matchers::Contains("name f32, f16 or bf16"));
}

TEST_CASE("batch invariance is not promised by default and is declared bitwise", "[contract]") {
  CHECK(KernelContract{}.batch_invariant == BatchInvariance::no);
  CHECK(KernelContract{}.describe().find("backward-determinism=within-bound batch-invariant=no") != std::string::npos);
  CHECK(parse_contract("batch-invariant=bitwise").describe_changes() == "batch-invariant=bitwise");
  CHECK_THROWS_WITH(parse_contract("batch-invariant=yes"), Catch::Matchers::Contains("batch-invariant is one of no|bitwise"));
}

TEST_CASE("shorthands set both of their keys, and later tokens override earlier ones", "[contract]") {
  const KernelContract c = parse_contract("accumulate=f16 determinism=bitwise");
  CHECK(c.accumulate_qk == Dtype::f16);
  CHECK(c.accumulate_pv == Dtype::f16);
  CHECK(c.backward_determinism == Determinism::bitwise);
  CHECK(parse_contract("lse=none lse=f32").lse == LseOutput::f32);
  CHECK(parse_contract("defaults") == KernelContract{});  // what describe_changes() writes for the defaults
  CHECK(parse_contract("defaults lse=none", parse_contract("causal=top-left")) == parse_contract("lse=none"));
  // Applied over a base: what a kernel declares, then what the command line overrides.
  const KernelContract declared = parse_contract("causal=top-left lse=none");
  const KernelContract both = parse_contract("lse=f32", declared);
  CHECK(both.causal == CausalAlign::top_left);
  CHECK(both.lse == LseOutput::f32);
}

TEST_CASE("a kernel's contract resolves as its declaration with the front's overrides over it", "[contract]") {
  CHECK(resolve_contract("") == KernelContract{});
  CHECK(resolve_contract("causal=top-left lse=none") == parse_contract("causal=top-left lse=none"));
  // --accumulate f16 --contract lse=f32, over what the kernel declares; commas and spaces alike.
  const KernelContract c = resolve_contract("causal=top-left,lse=none", "accumulate=f16 lse=f32");
  CHECK(c.causal == CausalAlign::top_left);
  CHECK(c.lse == LseOutput::f32);
  CHECK(c.accumulate_qk == Dtype::f16);
  CHECK(resolve_contract("lse=none", "defaults") == KernelContract{});
  REQUIRE_THROWS_AS(resolve_contract("lse=none", "lse=maybe"), ContractError);
}

TEST_CASE("a contract that does not parse is one line naming the token", "[contract]") {
  REQUIRE_THROWS_WITH(parse_contract("causal=diagonal"),
                      "contract: 'causal=diagonal': causal is one of bottom-right|top-left");
  REQUIRE_THROWS_WITH(parse_contract("lse=none casual=top-left"), Catch::StartsWith("contract: unknown key 'casual'"));
  REQUIRE_THROWS_WITH(parse_contract("top-left"), Catch::StartsWith("contract: 'top-left' is not key=value"));
  REQUIRE_THROWS_AS(parse_contract("accumulate=f64"), ContractError);
  REQUIRE_THROWS_AS(parse_contract("determinism="), ContractError);
}

TEST_CASE("a top-left causal mask shows every row its own position and earlier keys", "[contract]") {
  // Lq = 4, Lk = 2: row 0 sees key 0, rows 1..3 see both; no row is empty.
  CHECK(visible_count(Mask::causal_top_left, 0, 4, 2) == 1);
  CHECK(visible_count(Mask::causal_top_left, 3, 4, 2) == 2);
  // Lq = 2, Lk = 4: row 1 sees keys 0..1 (bottom-right would show it all four).
  CHECK(visible(Mask::causal_top_left, 1, 1, 2, 4));
  CHECK_FALSE(visible(Mask::causal_top_left, 1, 2, 2, 4));
  CHECK(visible(Mask::causal, 1, 3, 2, 4));
  // Both reach the kernel as ATTNCHECK_MASK_CAUSAL.
  CHECK(Params{.scale = 1, .mask = Mask::causal_top_left}.to_abi().mask == ATTNCHECK_MASK_CAUSAL);
  CHECK(mask_name(Mask::causal_top_left) == "causal_top_left");
}

namespace {
int dummy(const attncheck_params *, const DLTensor *, const DLTensor *, const DLTensor *, DLTensor *, DLTensor *) {
  return ATTNCHECK_OK;
}
const std::array<attncheck_kernel, 2> kTwo{{{ATTNCHECK_ABI_VERSION, "a", dummy, nullptr, nullptr},
                                            {ATTNCHECK_ABI_VERSION, "b", dummy, nullptr, nullptr}}};
template <int kCase>
const attncheck_kernel_contract *contracts(std::int32_t *count) {
  static const attncheck_kernel_contract kGood[] = {{"b", "causal=top-left"}};
  static const attncheck_kernel_contract kUnknown[] = {{"c", "lse=none"}};
  static const attncheck_kernel_contract kTwice[] = {{"a", ""}, {"a", "lse=none"}};
  static const attncheck_kernel_contract kBad[] = {{"a", "lse=maybe"}};
  static const attncheck_kernel_contract kNull[] = {{"a", nullptr}};
  *count = 1;
  switch (kCase) {
    case 0: return kGood;
    case 1: return kUnknown;
    case 2: *count = 2; return kTwice;
    case 3: return kBad;
    default: return kNull;
  }
}
}  // namespace

TEST_CASE("a plugin's declared contracts are read per kernel and validated", "[contract]") {
  const auto texts = declared_contracts(kTwo.data(), 2, &contracts<0>);
  REQUIRE(texts.size() == 2);
  CHECK(texts[0].empty());
  CHECK(texts[1] == "causal=top-left");
  CHECK(declared_contracts(kTwo.data(), 2, nullptr) == std::vector<std::string>{"", ""});  // an ABI 1.0 plugin
  CHECK(declared_contracts(kTwo.data(), 2, &contracts<4>)[0].empty());
  REQUIRE_THROWS_WITH(declared_contracts(kTwo.data(), 2, &contracts<1>), Catch::Contains("names kernel 'c'"));
  REQUIRE_THROWS_WITH(declared_contracts(kTwo.data(), 2, &contracts<2>), Catch::Contains("twice"));
  REQUIRE_THROWS_WITH(declared_contracts(kTwo.data(), 2, &contracts<3>),
                      Catch::Contains("kernel 'a' declares an invalid contract: 'lse=maybe'"));
}
