// The registry: every property listed in props/registry.def, in that order; and the engine's door to it (check.h).
#include "attncheck/check.h"
#include "attncheck/property.h"

#include <algorithm>
#include <array>
#include <vector>

namespace attncheck {

namespace props {
#define ATTNCHECK_PROPERTY(id) const PropertyDef &id##_property();
#include "../props/registry.def"
#undef ATTNCHECK_PROPERTY
}  // namespace props

std::span<const PropertyDef *const> all_properties() {
  static const auto kAll = std::to_array<const PropertyDef *>({
#define ATTNCHECK_PROPERTY(id) &props::id##_property(),
#include "../props/registry.def"
#undef ATTNCHECK_PROPERTY
  });
  return kAll;
}

std::string_view tier_name(Tier t) {
  switch (t) {
    case Tier::required: return "required";
    case Tier::advisory: return "advisory";
    case Tier::off: return "off";
  }
  return "?";
}

Tier tier_of(const PropertyDef &def, const KernelContract &contract) {
  return def.tier ? def.tier(contract) : Tier::required;
}

Tier tier_of(const PropertyDef &def, const KernelContract &contract, Dtype dtype) {
  return contract.implements(dtype) ? tier_of(def, contract) : Tier::off;
}

const PropertyDef *find_property(std::string_view id) {
  for (const PropertyDef *p : all_properties())
    if (p->id == id) return p;
  return nullptr;
}

std::span<const PropertyInfo> property_catalog() {
  static const std::vector<PropertyInfo> kCatalog = [] {
    std::vector<PropertyInfo> out;
    for (const PropertyDef *d : all_properties())
      out.push_back({d->id, d->formula, d->summary, d->needs_backward, d->feature});
    return out;
  }();
  return kCatalog;
}

const PropertyInfo *find_property_info(std::string_view id) {
  for (const PropertyInfo &p : property_catalog())
    if (p.id == id) return &p;
  return nullptr;
}

Tier property_tier(std::string_view id, const KernelContract &contract, std::optional<Dtype> dtype) {
  const PropertyDef &def = *find_property(id);
  return dtype ? tier_of(def, contract, *dtype) : tier_of(def, contract);
}

PropertyReport property_line(std::string_view id, const KernelContract &contract, Dtype dtype) {
  const PropertyDef &def = *find_property(id);
  PropertyReport p;
  p.id = std::string(def.id);
  p.formula = std::string(def.formula);
  p.summary = std::string(def.summary);
  p.tier = tier_of(def, contract, dtype);
  return p;
}

void insert_line(RunReport &r, PropertyReport line) {
  const auto rank = [all = all_properties()](std::string_view id) {
    return std::find_if(all.begin(), all.end(), [&](const PropertyDef *d) { return d->id == id; }) - all.begin();
  };
  auto &lines = r.properties;
  const auto after = [&](const PropertyReport &x) { return rank(x.id) > rank(line.id); };
  lines.insert(std::find_if(lines.begin(), lines.end(), after), std::move(line));
}

Outcome evaluate(std::string_view id, const attncheck_kernel &kernel, const Case &c, const KernelContract &contract,
                 const PrecisionProfile &precision) {
  return evaluate(*find_property(id), Env{kernel, precision, contract}, c);
}

}  // namespace attncheck
