#include "attncheck/contract.h"

#include "attncheck/features.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <utility>

namespace attncheck {

namespace {

/// One key of the text form: its name, its values' names (in enum order) and where it lives in the contract.
struct Key {
  std::string_view name;
  std::array<std::string_view, 4> values;  ///< "" past the last value
  int (*get)(const KernelContract &);
  void (*set)(KernelContract &, int);
};

template <class E>
constexpr int as_int(E e) {
  return static_cast<int>(e);
}

/// The key whose value is a set: the ABI 1.2 features the kernel implements, joined by '+' ("window+softcap").
constexpr std::string_view kFeaturesKey = "features";

/// The key whose value is the set of storage dtypes the kernel implements, joined by '+' ("f16+bf16").
constexpr std::string_view kDtypesKey = "dtypes";

/// The token that stands for every default (what describe_changes() writes when nothing differs).
constexpr std::string_view kDefaults = "defaults";

/// Dtype values in the text: accumulation dtypes.
constexpr std::array<std::string_view, 4> kDtypes{"f32", "f16", "bf16"};
constexpr std::array<std::string_view, 4> kDeterminism{"bitwise", "within-bound"};
constexpr std::array<std::string_view, 4> kAllow{"auto", "yes", "no"};
/// Accuracies of a transcendental function: a few ulps, or the hardware approximation of float32, float16, bfloat16.
constexpr std::array<std::string_view, 4> kApprox{"accurate", "approx", "approx-f16", "approx-bf16"};

// The order of describe(); `accumulate` and `determinism` are shorthands that set two keys and are not listed.
const std::array<Key, 15> kKeys{{
    {"causal", {"bottom-right", "top-left", ""}, [](const KernelContract &c) { return as_int(c.causal); },
     [](KernelContract &c, int v) { c.causal = static_cast<CausalAlign>(v); }},
    {"lse", {"f32", "storage", "none"}, [](const KernelContract &c) { return as_int(c.lse); },
     [](KernelContract &c, int v) { c.lse = static_cast<LseOutput>(v); }},
    {"empty-rows", {"zero", "unspecified", ""}, [](const KernelContract &c) { return as_int(c.empty_rows); },
     [](KernelContract &c, int v) { c.empty_rows = static_cast<EmptyRows>(v); }},
    {"hidden-keys", {"finite", "any", ""}, [](const KernelContract &c) { return as_int(c.hidden_keys); },
     [](KernelContract &c, int v) { c.hidden_keys = static_cast<HiddenKeys>(v); }},
    {"forward-determinism", kDeterminism, [](const KernelContract &c) { return as_int(c.forward_determinism); },
     [](KernelContract &c, int v) { c.forward_determinism = static_cast<Determinism>(v); }},
    {"backward-determinism", kDeterminism, [](const KernelContract &c) { return as_int(c.backward_determinism); },
     [](KernelContract &c, int v) { c.backward_determinism = static_cast<Determinism>(v); }},
    {"batch-invariant", {"no", "bitwise", ""}, [](const KernelContract &c) { return as_int(c.batch_invariant); },
     [](KernelContract &c, int v) { c.batch_invariant = static_cast<BatchInvariance>(v); }},
    {"accumulate-qk", kDtypes, [](const KernelContract &c) { return as_int(c.accumulate_qk); },
     [](KernelContract &c, int v) { c.accumulate_qk = static_cast<Dtype>(v); }},
    {"accumulate-pv", kDtypes, [](const KernelContract &c) { return as_int(c.accumulate_pv); },
     [](KernelContract &c, int v) { c.accumulate_pv = static_cast<Dtype>(v); }},
    {"fp32-precision", {"ieee", "tf32", "bf16", "f16"},
     [](const KernelContract &c) { return as_int(c.fp32_precision); },
     [](KernelContract &c, int v) { c.fp32_precision = static_cast<Fp32Precision>(v); }},
    {"round-p", kAllow, [](const KernelContract &c) { return as_int(c.round_p); },
     [](KernelContract &c, int v) { c.round_p = static_cast<Allow>(v); }},
    {"rowsum", {"auto", "rounded-p", "exact"}, [](const KernelContract &c) { return as_int(c.rowsum_rounded_p); },
     [](KernelContract &c, int v) { c.rowsum_rounded_p = static_cast<Allow>(v); }},
    {"grad-sum", {"auto", "per-head", "exact"}, [](const KernelContract &c) { return as_int(c.grad_per_head); },
     [](KernelContract &c, int v) { c.grad_per_head = static_cast<Allow>(v); }},
    {"tanh", kApprox, [](const KernelContract &c) { return as_int(c.tanh); },
     [](KernelContract &c, int v) { c.tanh = static_cast<Tanh>(v); }},
    {"exp", kApprox, [](const KernelContract &c) { return as_int(c.exp); },
     [](KernelContract &c, int v) { c.exp = static_cast<Exp>(v); }},
}};

/// Shorthands: one key that sets several.
struct Shorthand {
  std::string_view name;
  std::array<std::string_view, 2> keys;
};
constexpr std::array<Shorthand, 2> kShorthands{{
    {"accumulate", {"accumulate-qk", "accumulate-pv"}},
    {"determinism", {"forward-determinism", "backward-determinism"}},
}};

const Key *find_key(std::string_view name) {
  for (const Key &k : kKeys)
    if (k.name == name) return &k;
  return nullptr;
}

std::string values_text(const Key &k) {
  std::string s;
  for (std::string_view v : k.values)
    if (!v.empty()) s += (s.empty() ? "" : "|") + std::string(v);
  return s;
}

std::string keys_text() {
  std::string s;
  for (const Key &k : kKeys) s += (s.empty() ? "" : ", ") + std::string(k.name);
  for (const Shorthand &sh : kShorthands) s += ", " + std::string(sh.name);
  s += ", ";
  s += kDtypesKey;
  s += ", ";
  s += kFeaturesKey;
  return s;
}

void set_value(KernelContract &c, const Key &k, std::string_view value, std::string_view token) {
  for (std::size_t n = 0; n < k.values.size(); ++n)
    if (!k.values[n].empty() && k.values[n] == value) return k.set(c, static_cast<int>(n));
  throw ContractError("contract: '" + std::string(token) + "': " + std::string(k.name) + " is one of " +
                      values_text(k));
}

bool resolve(Allow a, bool automatic) { return a == Allow::automatic ? automatic : a == Allow::yes; }

std::string describe_keys(const KernelContract &c, bool only_changes) {
  const KernelContract defaults;
  std::string s;
  const auto set_key = [&](std::string_view key, std::string_view value) {
    if (!s.empty()) s += ' ';  // += pieces: GCC 12 warns falsely on "literal" + std::string chains (-Wrestrict)
    s += key;
    s += '=';
    s += value;
  };
  for (const Key &k : kKeys)
    if (!only_changes || k.get(c) != k.get(defaults)) set_key(k.name, k.values[static_cast<std::size_t>(k.get(c))]);
  if (!only_changes || c.dtypes != kAllDtypes) set_key(kDtypesKey, dtype_list(c.dtypes));
  if (!only_changes || c.features != 0) set_key(kFeaturesKey, feature_list(c.features));
  return s;
}

}  // namespace

std::string_view approximation_name(Tanh t) {
  switch (t) {
    case Tanh::accurate: return "accurate";
    case Tanh::approx: return "tanh.approx.f32";
    case Tanh::approx_f16: return "tanh.approx.f16";
    case Tanh::approx_bf16: return "tanh.approx.bf16";
  }
  return "?";
}

std::string_view approximation_name(Exp e) {
  switch (e) {
    case Exp::accurate: return "accurate";
    case Exp::approx: return "ex2.approx.f32";
    case Exp::approx_f16: return "ex2.approx.f16";
    case Exp::approx_bf16: return "ex2.approx.ftz.bf16";
  }
  return "?";
}

std::string_view fp32_precision_name(Fp32Precision f) {
  switch (f) {
    case Fp32Precision::ieee: return "ieee";
    case Fp32Precision::tf32: return "tf32";
    case Fp32Precision::bf16: return "bf16";
    case Fp32Precision::f16: return "f16";
  }
  return "?";
}

PrecisionProfile PrecisionProfile::for_storage(Dtype storage) { return KernelContract{}.precision(storage); }

std::string PrecisionProfile::describe() const {
  std::string s = std::string(dtype_name(storage)) + " storage, ";
  if (accumulate_qk == accumulate)
    s += std::string(dtype_name(accumulate)) + " accumulation";
  else
    s += std::string(dtype_name(accumulate_qk)) + " q·k, " + std::string(dtype_name(accumulate)) + " accumulation";
  if (round_p) s += ", P rounded to " + std::string(dtype_name(storage));
  if (rowsum_rounded_p) s += ", row sum from rounded P allowed";
  if (grad_per_head) s += ", per-head GQA gradients allowed";
  if (lse != Dtype::f32) s += ", LSE in " + std::string(dtype_name(lse));
  if (tanh != Tanh::accurate) s += ", tanh " + std::string(approximation_name(tanh));
  if (exp != Exp::accurate) s += ", exp " + std::string(approximation_name(exp));
  if (fp32_precision != Fp32Precision::ieee)
    s += ", matmul operands in " + std::string(fp32_precision_name(fp32_precision));
  return s;
}

PrecisionProfile KernelContract::precision(Dtype storage) const {
  PrecisionProfile p;
  p.storage = storage;
  p.accumulate = accumulate_pv;
  p.accumulate_qk = accumulate_qk;
  const bool narrow = storage != Dtype::f32;
  p.round_p = resolve(round_p, narrow);
  p.rowsum_rounded_p = p.round_p && resolve(rowsum_rounded_p, false);
  p.grad_per_head = resolve(grad_per_head, narrow);
  p.lse = lse == LseOutput::storage ? storage : Dtype::f32;
  p.tanh = tanh;
  p.exp = exp;
  p.fp32_precision = fp32_precision;
  return p;
}

std::string KernelContract::describe() const { return describe_keys(*this, false); }

std::string KernelContract::describe_changes() const {
  const std::string s = describe_keys(*this, true);
  return s.empty() ? std::string(kDefaults) : s;
}

std::vector<std::string> declared_contracts(const attncheck_kernel *kernels, std::int32_t n,
                                            attncheck_contracts_fn contracts) {
  std::vector<std::string> texts(static_cast<std::size_t>(std::max(n, 0)));
  if (!contracts) return texts;
  std::int32_t count = 0;
  const attncheck_kernel_contract *cs = contracts(&count);
  std::vector<bool> named(texts.size());
  for (std::int32_t e = 0; cs && e < count; ++e) {
    if (!cs[e].kernel)
      throw ContractError("attncheck_contracts entry #" + std::to_string(e) + " names no kernel");
    const std::string_view name = cs[e].kernel;
    std::size_t i = 0;
    while (i < texts.size() && !(kernels[i].name && name == kernels[i].name)) ++i;
    if (i == texts.size())
      throw ContractError("attncheck_contracts names kernel '" + std::string(name) +
                          "', which attncheck_kernels does not list");
    if (named[i]) throw ContractError("attncheck_contracts names kernel '" + std::string(name) + "' twice");
    named[i] = true;
    texts[i] = cs[e].contract ? cs[e].contract : "";
    try {
      parse_contract(texts[i]);
    } catch (const ContractError &err) {
      throw ContractError("kernel '" + std::string(name) + "' declares an invalid " + err.what());
    }
  }
  return texts;
}

bool is_contract_token(std::string_view token) { return token.find('=') != std::string_view::npos; }

KernelContract parse_contract(std::string_view text, KernelContract base) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t end = std::min(text.find_first_of(" ,\t", pos), text.size());
    const std::string_view token = text.substr(pos, end - pos);
    pos = end + 1;
    if (token.empty()) continue;
    if (token == kDefaults) {
      base = KernelContract{};
      continue;
    }
    const std::size_t eq = token.find('=');
    if (eq == std::string_view::npos)
      throw ContractError("contract: '" + std::string(token) + "' is not key=value (keys: " + keys_text() + ")");
    const std::string_view key = token.substr(0, eq), value = token.substr(eq + 1);
    if (key == kDtypesKey || key == kFeaturesKey) {  // the keys whose value is a set
      try {
        if (key == kDtypesKey)
          base.dtypes = parse_dtype_list(value);
        else
          base.features = parse_feature_list(value);
      } catch (const std::invalid_argument &e) {
        throw ContractError("contract: '" + std::string(token) + "': " + e.what() + "; join several with '+'");
      }
      continue;
    }
    if (const Key *k = find_key(key)) {
      set_value(base, *k, value, token);
      continue;
    }
    const auto sh = std::find_if(kShorthands.begin(), kShorthands.end(),
                                 [&](const Shorthand &s) { return s.name == key; });
    if (sh == kShorthands.end())
      throw ContractError("contract: unknown key '" + std::string(key) + "' in '" + std::string(token) +
                          "' (keys: " + keys_text() + ")");
    for (std::string_view name : sh->keys) set_value(base, *find_key(name), value, token);
  }
  return base;
}

KernelContract resolve_contract(std::string_view declared, std::string_view overrides) {
  return parse_contract(overrides, parse_contract(declared));
}

}  // namespace attncheck
