// attncheck merge: the partial reports of a campaign's shards joined into the unsharded check's document (run.h).
#include "attncheck/run.h"

#include "attncheck/check.h"

#include <string>

namespace attncheck::gate {

using reporting::Document, reporting::ReportError, reporting::Run, reporting::Shard;

namespace {

[[noreturn]] void fail(const std::string &what) { throw ReportError("merge: " + what); }

std::string shard_name(const Shard &s) { return std::to_string(s.index) + "/" + std::to_string(s.count); }

/// Everything of a run but its properties: the same in every shard of one check.
bool same_run(const Run &a, const Run &b) {
  const RunReport &x = a.report, &y = b.report;
  return a.source == b.source && a.plan == b.plan && x.kernel == y.kernel && x.dtype == y.dtype &&
         x.contract.describe() == y.contract.describe() && x.seed == y.seed && x.cases == y.cases;
}

}  // namespace

Document merge_shards(const std::vector<Document> &shards) {
  if (shards.empty()) fail("no partial reports given");
  const Document &first = shards.front();
  if (!first.shard) fail("report 1 is not a shard's partial report (written by `attncheck check --shard I/N`)");
  const int count = first.shard->count;
  std::vector<const Document *> by_index(static_cast<std::size_t>(count) + 1, nullptr);
  for (std::size_t n = 0; n < shards.size(); ++n) {
    const Document &d = shards[n];
    const std::string which = "report " + std::to_string(n + 1);
    if (!d.shard) fail(which + " is not a shard's partial report (written by `attncheck check --shard I/N`)");
    if (d.shard->count != count)
      fail(which + " is shard " + shard_name(*d.shard) + ", of another campaign than shard " +
           shard_name(*first.shard));
    if (d.shard->properties != first.shard->properties || d.tool_version != first.tool_version ||
        d.strict != first.strict || d.runs.size() != first.runs.size())
      fail(which + " (shard " + shard_name(*d.shard) + ") is of another check than report 1: run every shard with "
           "the same attncheck, arguments and seed");
    for (std::size_t r = 0; r < d.runs.size(); ++r)
      if (!same_run(d.runs[r], first.runs[r]))
        fail(which + " (shard " + shard_name(*d.shard) + ") checked another kernel, dtype, contract or seed in run " +
             std::to_string(r + 1) + " than report 1");
    const Document *&slot = by_index[static_cast<std::size_t>(d.shard->index)];
    if (slot) fail("shard " + shard_name(*d.shard) + " is given twice");
    slot = &d;
  }
  for (int i = 1; i <= count; ++i)
    if (!by_index[static_cast<std::size_t>(i)])
      fail("shard " + std::to_string(i) + "/" + std::to_string(count) + " is missing: merge the partial reports of "
           "all " + std::to_string(count) + " shards");

  Document out;
  out.tool_version = first.tool_version;
  out.strict = first.strict;
  const std::vector<std::string> &ids = first.shard->properties;
  std::size_t item = 0;
  for (std::size_t r = 0; r < first.runs.size(); ++r) {
    Run run = first.runs[r];
    std::vector<PropertyReport> properties;
    for (const std::string &id : ids) {
      const Document &owner = *by_index[item % static_cast<std::size_t>(count) + 1];
      ++item;
      const Run &from = owner.runs[r];
      const PropertyReport *p = from.report.find(id);
      if (!p)
        fail("shard " + shard_name(*owner.shard) + " lacks property " + id + " of " + from.report.kernel + " " +
             std::string(dtype_name(from.report.dtype)) + ", which it owns: was it run with other --properties?");
      properties.push_back(*p);
    }
    // A shard's escalated counterexample goes to its required property's line (another shard's), with its evidence.
    run.report = assemble_run(std::move(run.report), std::move(properties));
    out.runs.push_back(std::move(run));
  }
  return out;
}

}  // namespace attncheck::gate
