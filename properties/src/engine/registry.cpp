// The registry: every property listed in props/registry.def, in that order.
#include "attncheck/property.h"

#include <array>

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

}  // namespace attncheck
