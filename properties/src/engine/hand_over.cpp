// Hand-over (hand_over.h): which required property judges a case, and the move of an escalated counterexample to
// that property's line.
#include "attncheck/hand_over.h"

#include "attncheck/property.h"

#include <bit>

namespace attncheck {

const PropertyDef *required_judge(const Case &c, const KernelContract &contract) {
  const PropertyDef *judge = nullptr;
  if (const std::uint32_t bits = c.spec.features.bits; bits == 0) {
    judge = find_property("accuracy");
  } else {
    const std::uint32_t first = bits & (~bits + 1);  // the lowest feature bit
    for (const PropertyDef *d : all_properties())
      if (d->feature == first) judge = d;
  }
  return judge && tier_of(*judge, contract) == Tier::required ? judge : nullptr;
}

std::vector<HandOver> settle_hand_overs(RunReport &r) {
  std::vector<HandOver> moved;
  for (std::size_t from = 0; from < r.properties.size(); ++from) {
    PropertyReport &p = r.properties[from];
    const PropertyDef *def = find_property(p.id);
    // Escalated: a counterexample on a line made required although its property is advisory under the contract.
    if (!def || !p.counterexample || p.tier != Tier::required || tier_of(*def, r.contract) != Tier::advisory) continue;
    const PropertyDef *judge = required_judge(p.counterexample->minimal, r.contract);
    if (!judge) continue;
    for (std::size_t to = 0; to < r.properties.size(); ++to) {
      PropertyReport &q = r.properties[to];
      if (q.id != judge->id || q.counterexample) continue;
      q.verdict = Verdict::fail;
      q.counterexample = p.counterexample;
      q.note = (q.note.empty() ? "" : q.note + "; ") + "its counterexample was found by " + p.id + "'s search";
      p.tier = Tier::advisory;
      p.verdict = Verdict::warn;
      p.note = (p.note.empty() ? "" : p.note + "; ") + "handed over to " + q.id + ", which fails it";
      moved.push_back({from, to});
      break;
    }
  }
  return moved;
}

RunReport assemble_run(RunReport header, std::vector<PropertyReport> lines) {
  header.properties = std::move(lines);
  settle_hand_overs(header);
  return header;
}

}  // namespace attncheck
