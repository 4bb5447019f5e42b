// Shared helpers of the property-engine tests: kernels (correct variants, planted bugs) and shape assertions.
#pragma once

#include "attncheck/check.h"
#include "attncheck/kernel_abi.h"
#include "attncheck/property.h"
#include "variant_kernels.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace attncheck::test {

/// A few correct variants of different summation orders and tilings, all float32 arithmetic (the default
/// profile's accumulation): per-key online, blocked 7 reversed, two-pass split-KV, exp2 folding with wide tiles,
/// FlashAttention-2-like, D from P·dP.
inline std::vector<support::Variant> summation_orders() {
  std::vector<support::Variant> out;
  for (const support::Variant &v : support::correct_variants())
    if (v.accumulate == Dtype::f32) out.push_back(v);
  // Every other one keeps the suite fast while still spanning blocks, reversal, splits, exp2 and D from P.
  std::vector<support::Variant> picked;
  for (std::size_t n = 0; n < out.size(); n += 3) picked.push_back(out[n]);
  return picked;
}

inline const attncheck_kernel &bug(support::Bug b) { return support::variant_kernel(support::bug_variant(b)); }

/// The bundled kernel `name` ("naive", "flash"), as libattncheck_builtin exports it through attncheck_kernels() like
/// any plugin. Throws std::invalid_argument when it exports none of that name.
inline const attncheck_kernel &builtin(std::string_view name) {
  std::int32_t n = 0;
  const attncheck_kernel *ks = attncheck_kernels(&n);
  const auto *k = std::find_if(ks, ks + n, [&](const attncheck_kernel &x) { return x.name == name; });
  if (k == ks + n) throw std::invalid_argument("no bundled kernel named " + std::string(name));
  return *k;
}

/// The contract the bundled kernel `name` declares (attncheck_contracts); the defaults when it declares none.
inline KernelContract declared_contract(std::string_view name) {
  std::int32_t n = 0;
  const attncheck_kernel_contract *cs = attncheck_contracts(&n);
  for (std::int32_t e = 0; e < n; ++e)
    if (cs[e].kernel == name) return parse_contract(cs[e].contract);
  return {};
}

inline CheckOptions options(Dtype dt = Dtype::f32, std::uint64_t seed = 1) {
  CheckOptions o;
  o.dtype = dt;
  o.seed = seed;
  return o;
}

/// options(dt) under the contract the bundled kernel `name` declares (declared_contract): what a gate run checks it
/// against — its features on, the dtypes it does not declare declined.
inline CheckOptions builtin_options(std::string_view name, Dtype dt = Dtype::f32) {
  CheckOptions o = options(dt);
  o.contract = declared_contract(name);
  return o;
}

/// options() checking against the contract `text` (SPEC.md §3.1).
inline CheckOptions declaring(std::string_view text, Dtype dt = Dtype::f32) {
  CheckOptions o = options(dt);
  o.contract = parse_contract(text);
  return o;
}

/// The Env a property runs in for `kernel` under the contract `text`, float32 storage.
inline Env env_of(const attncheck_kernel &kernel, std::string_view text = "") {
  const KernelContract c = parse_contract(text);
  return Env{kernel, c.precision(Dtype::f32), c};
}

/// The shrunk counterexample of `id` in `r` (nullptr when there is none).
inline const Counterexample *counterexample(const RunReport &r, std::string_view id) {
  const PropertyReport *p = r.find(id);
  return p && p->counterexample ? &*p->counterexample : nullptr;
}

/// The tensors of `c` that have a layout of their own (CaseSpec::layouts).
inline std::vector<Operand> own_layouts(const Counterexample &c) {
  std::vector<Operand> out;
  for (int x = 0; x < kOperandCount; ++x)
    if (c.minimal.spec.layouts[static_cast<Operand>(x)].own()) out.push_back(static_cast<Operand>(x));
  return out;
}

/// The shape a failure of `property` on `kernel` shrinks to: REQUIREs that the check fails (showing its report).
inline Shape minimal_failing_shape(const attncheck_kernel &kernel, std::string_view property,
                                   const CheckOptions &o = options()) {
  const RunReport r = check_property(kernel, property, o);
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  return counterexample(r, property)->minimal.spec.shape;
}

}  // namespace attncheck::test
