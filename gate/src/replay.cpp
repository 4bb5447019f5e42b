#include "attncheck/replay.h"

#include "attncheck/check.h"
#include "attncheck/gate.h"

#include <string>

namespace attncheck::gate {

ReplayTarget replay_target(const reporting::Document &doc, std::size_t failure) {
  const auto failures = doc.failures();
  if (failures.empty()) throw ReplayError("the report records no counterexample: nothing to replay", true);
  if (failure < 1 || failure > failures.size())
    throw ReplayError("counterexample " + std::to_string(failure) + " is out of range: the report has " +
                      std::to_string(failures.size()),
                      true);
  const auto [r, p] = failures[failure - 1];
  ReplayTarget t;
  t.failure = failure;
  t.of = failures.size();
  t.run = &doc.runs[r];
  t.property = &t.run->report.properties[p];
  if (!find_property_info(t.property->id))
    throw ReplayError("the report names property '" + t.property->id + "', which this attncheck does not have",
                      false);
  return t;
}

ReplayResult replay_plan(const ReplayTarget &target, const std::optional<KernelContract> &contract) {
  ReplayResult result;
  result.contract = contract.value_or(target.run->report.contract);
  result.tier =
      contract ? property_tier(target.property->id, *contract, target.run->report.dtype) : target.property->tier;
  if (result.tier == Tier::off) {
    result.outcome.verdict = Verdict::undecided;
    result.outcome.detail = "the contract given leaves " + target.property->id +
                            " nothing to check: " + result.contract.describe_changes();
  }
  return result;
}

ReplayResult replay(const ReplayTarget &target, const attncheck_kernel &kernel,
                    const std::optional<KernelContract> &contract) {
  const RunReport &recorded = target.run->report;
  ReplayResult result = replay_plan(target, contract);
  if (result.tier == Tier::off) return result;
  result.outcome = evaluate(target.property->id, kernel, target.counterexample().minimal, result.contract,
                            contract ? contract->precision(recorded.dtype) : recorded.precision());
  return result;
}

int replay_exit_code(const ReplayResult &result, bool strict) {
  if (result.tier == Tier::off) return kExitPass;
  switch (result.verdict()) {
    case Verdict::fail: return kExitCounterexample;
    case Verdict::warn: return strict ? kExitCounterexample : kExitPass;
    case Verdict::pass: return kExitPass;
    case Verdict::error: return kExitInternal;
    default: return kExitInconclusive;
  }
}

}  // namespace attncheck::gate
