// report.json's results: a run's precision profile, contract and coverage, a property's report and the run, each
// written and read back side by side (schema: spec/REPORT_SCHEMA.md).
#include "json_io.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace attncheck::reporting::json_detail {

namespace {

// ---- precision profile and contract ----

ojson profile_json(const PrecisionProfile &p) {
  return ojson{{"storage", dtype_name(p.storage)},
               {"accumulation", dtype_name(p.accumulate)},
               {"accumulation_qk", dtype_name(p.accumulate_qk)},
               {"round_p", p.round_p},
               {"rowsum_rounded_p", p.rowsum_rounded_p},
               {"grad_per_head", p.grad_per_head},
               {"lse", dtype_name(p.lse)},
               {"tanh", approximation_name(p.tanh)},
               {"exp", approximation_name(p.exp)},
               {"fp32_precision", fp32_precision_name(p.fp32_precision)}};
}

PrecisionProfile read_profile(const Obj &prof, std::int64_t version) {
  PrecisionProfile p;
  p.storage = prof.name<Dtype, kDtypes>("storage", dtype_name);
  p.accumulate = prof.name<Dtype, kDtypes>("accumulation", dtype_name);
  p.round_p = prof.boolean("round_p");
  if (version < 2) {  // version 1: one accumulation dtype for everything, a float32 LSE
    p.accumulate_qk = p.accumulate;
    return p;
  }
  p.accumulate_qk = prof.name<Dtype, kDtypes>("accumulation_qk", dtype_name);
  p.rowsum_rounded_p = prof.boolean("rowsum_rounded_p");
  p.grad_per_head = prof.boolean("grad_per_head");
  p.lse = prof.name<Dtype, kDtypes>("lse", dtype_name);
  // Added in version 2 without a version change: absent means accurate.
  if (prof.has("tanh")) p.tanh = prof.name<Tanh, kApprox>("tanh", [](Tanh t) { return approximation_name(t); });
  if (prof.has("exp")) p.exp = prof.name<Exp, kApprox>("exp", [](Exp e) { return approximation_name(e); });
  if (prof.has("fp32_precision"))
    p.fp32_precision = prof.name<Fp32Precision, kFp32Precisions>("fp32_precision", fp32_precision_name);
  return p;
}

/// The contract a version-1 run was checked against: version 1 stored only its precision profile (one accumulation
/// dtype, P rounded or not, GQA gradients never rounded per head, a float32 LSE), which these keys state; a key whose
/// automatic value (storage-dependent) already gives it stays automatic.
KernelContract contract_of_v1(const PrecisionProfile &p, Dtype dtype) {
  const bool narrow = dtype != Dtype::f32;  // what Allow::automatic resolves to (KernelContract::profile)
  const auto allow = [narrow](bool value) {
    return value == narrow ? Allow::automatic : value ? Allow::yes : Allow::no;
  };
  KernelContract c;
  c.accumulate_qk = c.accumulate_pv = p.accumulate;
  c.round_p = allow(p.round_p);
  c.grad_per_head = allow(false);
  return c;
}

// ---- coverage ----

/// A property's corners: {"decided": {id: n}, "declined": {id: n}}, nonzero counts only, in corners() order, and
/// the cases counted that called the backward.
ojson coverage_json(const Coverage &c) {
  ojson decided = ojson::object(), declined = ojson::object();
  for (std::size_t i = 0; i < kCornerCount; ++i) {
    const std::string id(corners()[i].id);
    if (c.decided[i] > 0) decided[id] = c.decided[i];
    if (c.declined[i] > 0) declined[id] = c.declined[i];
  }
  return ojson{{"decided", std::move(decided)}, {"declined", std::move(declined)}, {"backward", c.backward}};
}

/// coverage_json read back: every key a corner id, every count a non-negative integer.
Coverage read_coverage(const Obj &o) {
  Coverage c;
  for (const auto &[key, counts] : {std::pair{"decided", &c.decided}, std::pair{"declined", &c.declined}}) {
    const Obj m = o.obj(key);
    for (const auto &[id, n] : m.self().items()) {
      const std::optional<std::size_t> i = corner_index(id);
      if (!i) fail(m.where() + "\"" + id + "\" is not a corner of the coverage model (spec/SPEC.md §7.4)");
      (*counts)[*i] = m.count(id.c_str());
    }
  }
  c.backward = o.count("backward");
  return c;
}

/// A run's coverage (run_coverage), derived from its properties' and written only: the summary line, the counts,
/// the corners of each status but reached, and every corner's decided cases.
ojson run_coverage_json(const RunCoverage &rc) {
  ojson j{{"summary", rc.describe()},
          {"reached", rc.count(CornerStatus::reached)},
          {"applicable", rc.applicable()}};
  for (const CornerStatus s : {CornerStatus::declined, CornerStatus::not_reached, CornerStatus::not_declared,
                               CornerStatus::not_applicable}) {
    ojson ids = ojson::array();
    for (const CornerCount &c : rc.corners)
      if (c.status == s) ids.push_back(std::string(c.corner->id));
    j[corner_status_id(s)] = std::move(ids);
  }
  ojson decided = ojson::object();
  for (const CornerCount &c : rc.corners) decided[std::string(c.corner->id)] = c.decided;
  j["decided"] = std::move(decided);
  return j;
}

}  // namespace

// ---- property ----

ojson property_json(const PropertyReport &p) {
  ojson j{{"id", p.id},
          {"verdict", verdict_id(p.verdict)},
          {"tier", tier_name(p.tier)},
          {"cases", p.cases},
          {"unsupported", p.unsupported},
          {"undecided", p.undecided},
          {"worst_ratio", ratio_json(p.worst_ratio)},
          {"worst", p.worst},
          {"budget_exhausted", p.budget_exhausted},
          {"skipped", p.skipped},
          {"interrupted", p.interrupted},
          {"coverage", coverage_json(p.coverage)},
          {"targeted", ojson{{"cases", p.targeted.cases},
                             {"declined", p.targeted.declined},
                             {"from", ratio_json(p.targeted.from)},
                             {"to", ratio_json(p.targeted.to)}}},
          {"reference", ojson{{"fast_elements", p.reference.fast_elements},
                              {"mpfr_elements", p.reference.mpfr_elements},
                              {"confirmations", p.reference.confirmations}}},
          {"seed", std::to_string(p.seed)},
          {"note", p.note},
          {"formula", p.formula},
          {"summary", p.summary}};
  // Only when the check replayed a corpus: reports of runs without one stay as they were.
  if (p.corpus.replayed > 0) j["corpus"] = ojson{{"replayed", p.corpus.replayed}, {"passed", p.corpus.passed}};
  // Only when the check declared shapes (check --shapes): the same.
  if (!p.shapes.empty()) {
    ojson shapes = ojson::array();
    for (const ShapeRun &s : p.shapes)
      shapes.push_back(ojson{{"shape", s.shape},
                             {"verdict", verdict_id(s.verdict)},
                             {"ratio", ratio_json(s.ratio)},
                             {"spec", s.spec},
                             {"note", s.note}});
    j["shapes"] = std::move(shapes);
  }
  return j;
}

PropertyReport read_property(const Obj &p, std::int64_t version, std::size_t *failures) {
  PropertyReport pr;
  pr.id = p.str("id");
  pr.verdict = p.name<Verdict, kVerdicts>("verdict", verdict_id);
  if (version >= 2) pr.tier = p.name<Tier, kTiers>("tier", tier_name);
  pr.cases = p.count("cases");
  pr.unsupported = p.count("unsupported");
  pr.undecided = p.count("undecided");
  pr.worst_ratio = p.ratio("worst_ratio");
  pr.worst = p.str("worst");
  pr.budget_exhausted = p.boolean("budget_exhausted");
  if (p.has("skipped")) pr.skipped = p.count("skipped");  // added in version 2, without a version change
  if (p.has("interrupted")) pr.interrupted = p.boolean("interrupted");
  if (p.has("coverage"))  // added to version 2 later: absent, no counts
    pr.coverage = read_coverage(p.obj("coverage"));
  if (p.has("targeted")) {  // added to version 2 later: absent, no targeted phase
    const Obj t = p.obj("targeted");
    pr.targeted = {.cases = t.count("cases"), .declined = t.count("declined"), .from = t.ratio("from"),
                   .to = t.ratio("to")};
  }
  if (p.has("reference")) {  // added to version 2 later: absent, no counts
    const Obj f = p.obj("reference");
    constexpr std::int64_t kMost = std::int64_t{1} << 53;  // exact in a JavaScript reader
    pr.reference = {.fast_elements = f.integer("fast_elements", 0, kMost),
                    .mpfr_elements = f.integer("mpfr_elements", 0, kMost),
                    .confirmations = f.integer("confirmations", 0, kMost)};
  }
  if (p.has("corpus")) {  // a run that replayed a corpus (check --corpus)
    const Obj c = p.obj("corpus");
    pr.corpus = {.replayed = c.count("replayed"), .passed = c.count("passed")};
    if (pr.corpus.passed > pr.corpus.replayed) fail(c.where() + "\"passed\" is more than \"replayed\"");
  }
  const json &shapes = p.array("shapes");  // a check that declared shapes (check --shapes)
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const Obj s(shapes[i], p.path() + ".shapes[" + std::to_string(i) + "]");
    pr.shapes.push_back(ShapeRun{.shape = s.str("shape"),
                                 .verdict = s.name<Verdict, kVerdicts>("verdict", verdict_id),
                                 .ratio = s.ratio("ratio"),
                                 .spec = s.str("spec"),
                                 .note = s.str("note")});
  }
  pr.seed = p.seed("seed");
  pr.note = p.str("note");
  pr.formula = p.str("formula");
  pr.summary = p.str("summary");
  if (p.has("counterexample")) pr.counterexample = read_counterexample(p.obj("counterexample"), ++*failures);
  // A fail may come without one: the kernel killed the process in its case, which the note names (REPORT_SCHEMA.md).
  if (pr.verdict == Verdict::warn && !pr.counterexample)
    fail(p.where() + "verdict " + std::string(verdict_id(pr.verdict)) + " without a counterexample");
  return pr;
}

// ---- run ----

/// A run: kernel, dtype, verdict (derived), contract, profile (derived), source, plan, seed, cases, coverage (derived)
/// and `properties`.
ojson run_json(const Run &run, bool strict, ojson properties) {
  const RunReport &r = run.report;
  return ojson{{"kernel", r.kernel},
               {"dtype", dtype_name(r.dtype)},
               {"verdict", verdict_id(r.verdict(strict))},
               {"contract", r.contract.describe()},
               {"profile", profile_json(r.precision())},
               {"source", ojson{{"kind", kind_name(run.source.kind)}, {"location", run.source.location}}},
               {"run_profile", run.plan},
               {"seed", std::to_string(r.seed)},
               {"cases", r.cases},
               {"coverage", run_coverage_json(r.coverage())},
               {"properties", std::move(properties)}};
}

Run read_run(const Obj &o, std::int64_t version, std::size_t *failures) {
  Run run;
  RunReport &r = run.report;
  r.kernel = o.str("kernel");
  r.dtype = o.name<Dtype, kDtypes>("dtype", dtype_name);
  // The contract is the one source of the precision profile; "profile" is derived and must agree with it.
  const PrecisionProfile stored = read_profile(o.obj("profile"), version);
  if (version >= 2) {
    const std::string text = o.str("contract");
    try {
      r.contract = parse_contract(text);
    } catch (const ContractError &e) {
      fail(o.where() + "\"contract\" does not parse: " + detail::first_line(e.what()));
    }
  } else {
    r.contract = contract_of_v1(stored, r.dtype);
  }
  if (stored != r.precision())
    fail(o.where() + "\"profile\" (" + stored.describe() + ") is not what its contract gives " +
         std::string(dtype_name(r.dtype)) + " (" + r.precision().describe() +
         "): the file was edited; write it again with attncheck");
  const Obj src = o.obj("source");
  run.source.kind = src.name<KernelSource::Kind, kKinds>("kind", kind_name);
  run.source.location = src.str("location");
  run.plan = o.str("run_profile");
  r.seed = o.seed("seed");
  r.cases = o.count("cases");
  const json &props = o.array("properties");
  for (std::size_t n = 0; n < props.size(); ++n)
    r.properties.push_back(read_property(Obj(props[n], o.path() + ".properties[" + std::to_string(n) + "]"), version,
                                         failures));
  return run;
}

}  // namespace attncheck::reporting::json_detail
