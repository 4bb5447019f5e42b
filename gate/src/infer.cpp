// infer: the contract a kernel satisfies, from checks of it under the declarations that explain its failures
// (infer.h).
#include "attncheck/infer.h"

#include "attncheck/check.h"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <utility>

namespace attncheck::gate {

namespace {

/// An advisory property whose pass is the evidence for a stronger declaration: under that declaration the property
/// is required (its tier says so), and it checks the same thing. (Not empty_rows: under empty-rows=unspecified it
/// checks less — no NaN — than empty-rows=zero requires.)
struct StrongerEvidence {
  std::string_view property;
  std::string_view declaration;
};
constexpr StrongerEvidence kStrongerWhenPassed[] = {
    {"bitwise_determinism", "determinism=bitwise"},
    {"batch_invariance", "batch-invariant=bitwise"},
    {"masked_nonfinite", "hidden-keys=any"},
};
/// grad-sum=auto allows per-head GQA gradients for float16/bfloat16 only: on such a run whose gradients passed,
/// grad-sum=exact is probed (a failure it explains adopts grad-sum=per-head).
constexpr std::string_view kGradSumProbe = "grad-sum=exact";
constexpr std::string_view kGradientProperty = "gradient_accuracy";

/// The required properties that failed: (run index, property index).
std::vector<std::pair<std::size_t, std::size_t>> failures_of(const reporting::Document &doc) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  for (std::size_t ri = 0; ri < doc.runs.size(); ++ri) {
    const RunReport &r = doc.runs[ri].report;
    for (std::size_t pi = 0; pi < r.properties.size(); ++pi)
      if (r.properties[pi].verdict == Verdict::fail) out.emplace_back(ri, pi);
  }
  return out;
}

/// "lse (f16)": a property of a run, as the rounds and the messages name it.
std::string property_at(const reporting::Document &doc, std::pair<std::size_t, std::size_t> at) {
  const RunReport &r = doc.runs[at.first].report;
  return fmt::format("{} ({})", r.properties[at.second].id, dtype_name(r.dtype));
}

/// The declaration that explains the most failures of `doc`, the narrowest among equals (the earlier in a
/// counterexample's explained_by); nullopt when none explains any.
std::optional<std::string> best_explanation(const reporting::Document &doc) {
  std::vector<std::pair<std::string, int>> counts;  // in order of first appearance
  for (const auto &[ri, pi] : failures_of(doc)) {
    const PropertyReport &p = doc.runs[ri].report.properties[pi];
    if (!p.counterexample) continue;
    for (const Explanation &e : p.counterexample->explained_by) {
      auto it = std::find_if(counts.begin(), counts.end(), [&](const auto &c) { return c.first == e.declaration; });
      if (it == counts.end()) counts.emplace_back(e.declaration, 1);
      else ++it->second;
    }
  }
  std::stable_sort(counts.begin(), counts.end(), [](const auto &a, const auto &b) { return a.second > b.second; });
  if (counts.empty()) return std::nullopt;
  return counts.front().first;
}

/// The first failure no declaration explains, as its root-cause group shows it.
std::optional<NoFit> unexplained_failure(const reporting::Document &doc) {
  for (const reporting::FailureGroup &g : reporting::group_failures(doc)) {
    if (g.warning || !g.explained.empty()) continue;
    for (const auto &[ri, pi] : g.members) {
      const RunReport &r = doc.runs[ri].report;
      const PropertyReport &p = r.properties[pi];
      if (p.verdict != Verdict::fail || !p.counterexample) continue;
      const Counterexample &cx = *p.counterexample;
      const std::string detail = cx.outcome.detail.substr(0, cx.outcome.detail.find('\n'));
      return NoFit{p.id, r.dtype, g.caption,
                   fmt::format("{} — {} (step {}): {}", p.id, cx.minimal.spec.describe(),
                               cx.outcome.step ? step_id(*cx.outcome.step) : "?", detail)};
    }
  }
  return std::nullopt;
}

/// Where a search ended: the contract of its last check and that check's report — or, when the last declaration
/// adopted did not fix what it explained, the contract before it (`dropped` says why) and the report under it.
struct SearchEnd {
  KernelContract contract;
  reporting::Document doc;
  int exit_code = kExitInconclusive;  ///< of the last check (kExitPass: it passed)
  bool cancelled = false;
  std::optional<std::string> dropped;
};

/// The failures of `doc` that `declaration` explains (the minimal case of each passes under it), as property_at
/// names them.
std::vector<std::string> explained_by(const reporting::Document &doc, const std::string &declaration) {
  std::vector<std::string> out;
  for (const auto &at : failures_of(doc)) {
    const PropertyReport &p = doc.runs[at.first].report.properties[at.second];
    if (!p.counterexample) continue;
    for (const Explanation &e : p.counterexample->explained_by)
      if (e.declaration == declaration) out.push_back(property_at(doc, at));
  }
  return out;
}

/// The failures of `doc` that no declaration explains.
std::vector<std::string> unexplained(const reporting::Document &doc) {
  std::vector<std::string> out;
  for (const auto &at : failures_of(doc)) {
    const PropertyReport &p = doc.runs[at.first].report.properties[at.second];
    if (!p.counterexample || p.counterexample->explained_by.empty()) out.push_back(property_at(doc, at));
  }
  return out;
}

/// dtypes= without the dtypes whose runs in `doc` the kernel declined entirely (every property unsupported, some
/// case declined), when another run did not end so; nullopt otherwise.
std::optional<Strengthening> without_declined_dtypes(const reporting::Document &doc, const KernelContract &c) {
  std::uint8_t declined = 0, ran = 0;
  std::string evidence;
  for (const reporting::Run &run : doc.runs) {
    const RunReport &r = run.report;
    if (!c.implements(r.dtype)) continue;
    int cases = 0;
    bool all = !r.properties.empty();
    for (const PropertyReport &p : r.properties) {
      all = all && p.verdict == Verdict::unsupported;
      cases += p.unsupported;
    }
    if (all && cases > 0) {
      declined |= dtype_bit(r.dtype);
      evidence += fmt::format("{}{} cases of {}", evidence.empty() ? "" : ", ", cases, dtype_name(r.dtype));
    } else {
      ran |= dtype_bit(r.dtype);
    }
  }
  if (!declined || !ran) return std::nullopt;
  return Strengthening{"dtypes=" + dtype_list(static_cast<std::uint8_t>(c.dtypes & ~declined)),
                       "the kernel declined all " + evidence};
}

class Search {
 public:
  Search(const attncheck_kernel &kernel, const InferRequest &rq, const reporting::KernelSource &source,
         InferResult &result)
      : kernel_(kernel), rq_(rq), source_(source), result_(result) {}

  /// Checks under `c`; while the check fails and some declaration explains a failure, adopts it and checks again.
  /// A declaration whose property still fails under it, and nothing explains that failure, explained a minimal case
  /// but not the kernel (a bug that agrees with a convention on a small case): it is dropped, and the search ends.
  SearchEnd run(KernelContract c, std::string purpose) {
    SearchEnd end;
    KernelContract before = c;
    std::optional<std::string> adopted;
    std::vector<std::string> it_explained;
    while (true) {
      end.contract = c;
      end.doc = check_under(c, purpose);
      end.cancelled = rq_.cancel && rq_.cancel->load();
      end.exit_code = exit_code(end.doc, false, end.cancelled);
      if (!result_.declined_dtypes && !end.cancelled)
        if ((result_.declined_dtypes = without_declined_dtypes(end.doc, c)))
          end.contract = c = parse_contract(result_.declined_dtypes->declaration, c);
      if (end.exit_code != kExitCounterexample || end.cancelled) return end;
      if (adopted)
        for (const std::string &f : unexplained(end.doc))
          if (std::find(it_explained.begin(), it_explained.end(), f) != it_explained.end()) {
            end.dropped = fmt::format("{}: under it {} still fails, and nothing explains that", *adopted, f);
            end.contract = before;
            return end;
          }
      const std::optional<std::string> adopt = best_explanation(end.doc);
      if (!adopt || static_cast<int>(result_.rounds.size()) >= kMaxRounds) return end;
      result_.rounds.back().adopted = *adopt;
      const KernelContract next = parse_contract(*adopt, c);
      if (next == c) return end;  // diagnose() names no declaration already made; a guard all the same
      before = c;
      adopted = adopt;
      it_explained = explained_by(end.doc, *adopt);
      c = next;
      purpose = "adopt " + *adopt;
    }
  }

 private:
  reporting::Document check_under(const KernelContract &c, const std::string &purpose) {
    const auto t0 = std::chrono::steady_clock::now();
    reporting::Document doc;
    doc.runs = check_serially(
        {&kernel_}, rq_.dtypes,
        [&](std::size_t, Dtype dt) { return run_options(rq_.check, dt, c, state_, rq_.cancel); }, source_,
        rq_.check.profile->name, rq_.quiet, false);
    InferRound round;
    round.contract = c;
    round.purpose = purpose;
    round.verdict = doc.verdict();
    for (const auto &at : failures_of(doc)) round.failing.push_back(property_at(doc, at));
    round.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    result_.rounds.push_back(std::move(round));
    return doc;
  }

  const attncheck_kernel &kernel_;
  const InferRequest &rq_;
  const reporting::KernelSource &source_;
  InferResult &result_;
  KernelRunState state_;  ///< what the kernel's checks learn (hung shapes, its speed), across the rounds
};

/// "gradient_accuracy passed on f16 (15 cases), f32 (15 cases)" when property `id` passed on every run that ran
/// it, under the tier `c` gives it; nullopt otherwise (a warning, a failure, undecided, or no run decided it).
std::optional<std::string> passed_everywhere(const reporting::Document &doc, std::string_view id) {
  std::string where;
  for (const reporting::Run &run : doc.runs) {
    const PropertyReport *p = run.report.find(id);
    if (!p || p->verdict == Verdict::unsupported || p->tier == Tier::off) continue;
    if (p->verdict != Verdict::pass || p->cases == 0) return std::nullopt;
    where += fmt::format("{}{} ({} cases)", where.empty() ? "" : ", ", dtype_name(run.report.dtype), p->cases);
  }
  if (where.empty()) return std::nullopt;
  return fmt::format("{} passed on {}", id, where);
}

/// The stronger declarations a passing check under `c` supports (infer.h).
std::vector<Strengthening> evidence_for_stronger(const reporting::Document &doc, const KernelContract &c) {
  std::vector<Strengthening> out;
  for (const StrongerEvidence &e : kStrongerWhenPassed) {
    if (!find_property_info(e.property) || parse_contract(e.declaration, c) == c ||
        property_tier(e.property, c) != Tier::advisory)
      continue;
    if (auto why = passed_everywhere(doc, e.property)) out.push_back({std::string(e.declaration), *why});
  }
  if (c.grad_per_head == Allow::automatic) {
    const bool narrow = std::any_of(doc.runs.begin(), doc.runs.end(),
                                    [](const reporting::Run &r) { return r.report.dtype != Dtype::f32; });
    if (auto why = passed_everywhere(doc, kGradientProperty); why && narrow)
      out.push_back({std::string(kGradSumProbe), *why + " under grad-sum=auto (per-head allowed for float16/bfloat16)"});
  }
  return out;
}

std::string contract_line(const KernelContract &c) { return c.describe_changes(); }

}  // namespace

KernelContract search_start(const KernelContract &declared) {
  KernelContract c;
  c.features = declared.features;
  c.dtypes = declared.dtypes;  // found by declines too, but a dtype the kernel says it lacks needs no probing
  // A kernel without an LSE output cannot be asked for one (an exec or Python kernel answers without it); one that
  // rounds its LSE writes it into a float32 tensor as well, so lse=storage is found.
  if (declared.lse == LseOutput::none) c.lse = LseOutput::none;
  c.accumulate_pv = declared.accumulate_pv;
  c.accumulate_qk = declared.accumulate_pv;
  c.round_p = declared.round_p;
  c.tanh = declared.tanh;
  c.exp = declared.exp;
  return c;
}

InferResult infer(const attncheck_kernel &kernel, const InferRequest &rq, const reporting::KernelSource &source) {
  InferResult r;
  r.kernel = kernel.name;
  r.dtypes = rq.dtypes;
  r.profile = std::string(rq.check.profile->name);
  r.seed = rq.check.seed;
  r.declared = rq.declared;
  r.start_reason = rq.start_reason;
  Search search(kernel, rq, source, r);
  SearchEnd end = search.run(rq.start, "start");
  if (end.exit_code == kExitPass) {
    const std::vector<Strengthening> proposed = evidence_for_stronger(end.doc, end.contract);
    KernelContract stronger = end.contract;
    std::string names;
    for (const Strengthening &s : proposed) {
      stronger = parse_contract(s.declaration, stronger);
      names += (names.empty() ? "" : " ") + s.declaration;
    }
    if (!proposed.empty() && static_cast<int>(r.rounds.size()) < kMaxRounds) {
      SearchEnd tried = search.run(stronger, "stronger: " + names);
      const bool kept = tried.exit_code == kExitPass;
      if (kept) {
        end = std::move(tried);
      } else if (tried.cancelled) {
        end.cancelled = true;
      }
      // A declaration holds when the contract found still has it (a failure under it may have adopted its
      // looser value back).
      for (const Strengthening &s : proposed)
        (kept && parse_contract(s.declaration, end.contract) == end.contract ? r.stronger : r.not_confirmed)
            .push_back(s);
    }
  }
  r.contract = end.contract;
  r.dropped = end.dropped;
  r.last = std::move(end.doc);
  if (end.cancelled) {
    r.exit_code = kExitInconclusive;
    r.note = "interrupted: the contract is the best found so far";
  } else if (end.exit_code == kExitPass) {
    r.exit_code = kExitPass;
    for (const reporting::Run &run : r.last.runs)
      for (const PropertyReport &p : run.report.properties)
        if (p.verdict == Verdict::warn) r.advisory_warnings.push_back(fmt::format("{} ({})", p.id, dtype_name(run.report.dtype)));
  } else if (end.exit_code == kExitCounterexample) {
    r.exit_code = kExitCounterexample;
    r.no_fit = unexplained_failure(r.last);
    if (!r.no_fit) {  // every failure explained, yet the rounds ran out
      const auto fails = failures_of(r.last);
      NoFit f;
      f.property = fails.empty() ? "?" : r.last.runs[fails[0].first].report.properties[fails[0].second].id;
      f.caption = fmt::format("the search stopped after {} checks", r.rounds.size());
      r.no_fit = f;
    }
  } else {
    r.exit_code = kExitInconclusive;
    std::string which;
    for (const reporting::Run &run : r.last.runs)
      for (const PropertyReport &p : run.report.properties)
        if (p.verdict == Verdict::undecided)
          which += fmt::format("{}{} ({})", which.empty() ? "" : ", ", p.id, dtype_name(run.report.dtype));
    r.note = which.empty() ? std::string("nothing ran: the kernel declined every case")
                           : "no failure, but undecided: " + which +
                                 " (too few cases decided: more cases, or leave them out with --properties)";
  }
  return r;
}

std::string infer_text(const InferResult &r) {
  std::string dts;
  for (Dtype dt : r.dtypes) dts += (dts.empty() ? "" : ", ") + std::string(dtype_name(dt));
  std::string out = fmt::format("infer {} ({}; {} plan, seed {}); declared: {}\n", r.kernel, dts, r.profile, r.seed,
                                contract_line(r.declared));
  if (!r.start_reason.empty()) out += "  " + r.start_reason + "\n";
  for (std::size_t n = 0; n < r.rounds.size(); ++n) {
    const InferRound &k = r.rounds[n];
    std::string failing;
    for (const std::string &f : k.failing) failing += (failing.empty() ? "" : ", ") + f;
    out += fmt::format("  check {} ({}) under {}: {}", n + 1, k.purpose, contract_line(k.contract),
                       verdict_name(k.verdict));
    if (!failing.empty()) out += " — " + failing;
    if (k.adopted) out += fmt::format(" — explained by {}", *k.adopted);
    out += fmt::format(" [{:.1f} s]\n", k.seconds);
  }
  if (const auto &d = r.declined_dtypes) out += fmt::format("  declined: {} ({})\n", d->declaration, d->evidence);
  for (const Strengthening &s : r.stronger) out += fmt::format("  stronger: {} ({})\n", s.declaration, s.evidence);
  for (const Strengthening &s : r.not_confirmed)
    out += fmt::format("  not confirmed: {} ({}; the check under it did not pass)\n", s.declaration, s.evidence);
  if (r.dropped) out += fmt::format("  dropped: {} (it explained a minimal case, not the kernel)\n", *r.dropped);
  switch (r.exit_code) {
    case kExitPass:
      out += fmt::format("contract: {}\n", contract_line(r.contract));
      out += fmt::format("advisory warnings: {}\n",
                         r.advisory_warnings.empty() ? std::string("none") : [&] {
                           std::string w;
                           for (const std::string &s : r.advisory_warnings) w += (w.empty() ? "" : ", ") + s;
                           return w;
                         }());
      break;
    case kExitCounterexample:
      out += fmt::format("contract (best found): {}\n", contract_line(r.contract));
      out += fmt::format("no contract value fits: {} ({}) — {} — that is a bug\n", r.no_fit->property,
                         dtype_name(r.no_fit->dtype), r.no_fit->caption);
      if (!r.no_fit->counterexample.empty()) out += fmt::format("  counterexample: {}\n", r.no_fit->counterexample);
      break;
    default:
      out += fmt::format("contract (undecided): {}\n{}\n", contract_line(r.contract), r.note);
  }
  return out;
}

std::string infer_json(const InferResult &r) {
  using nlohmann::json;
  json j;
  j["kernel"] = r.kernel;
  j["dtypes"] = json::array();
  for (Dtype dt : r.dtypes) j["dtypes"].push_back(std::string(dtype_name(dt)));
  j["profile"] = r.profile;
  j["seed"] = r.seed;
  j["declared"] = contract_line(r.declared);
  j["outcome"] = r.exit_code == kExitPass ? "found" : r.exit_code == kExitCounterexample ? "no-fit" : "undecided";
  j["exit_code"] = r.exit_code;
  j["contract"] = contract_line(r.contract);
  j["contract_full"] = r.contract.describe();
  j["rounds"] = json::array();
  for (const InferRound &k : r.rounds)
    j["rounds"].push_back({{"purpose", k.purpose},
                           {"contract", contract_line(k.contract)},
                           {"verdict", std::string(verdict_id(k.verdict))},
                           {"failing", k.failing},
                           {"adopted", k.adopted ? json(*k.adopted) : json(nullptr)},
                           {"seconds", k.seconds}});
  auto strengthenings = [](const std::vector<Strengthening> &v) {
    json a = json::array();
    for (const Strengthening &s : v) a.push_back({{"declaration", s.declaration}, {"evidence", s.evidence}});
    return a;
  };
  j["stronger"] = strengthenings(r.stronger);
  j["not_confirmed"] = strengthenings(r.not_confirmed);
  j["declined_dtypes"] = r.declined_dtypes ? json{{"declaration", r.declined_dtypes->declaration},
                                                  {"evidence", r.declined_dtypes->evidence}}
                                            : json(nullptr);
  j["advisory_warnings"] = r.advisory_warnings;
  j["no_fit"] = r.no_fit ? json{{"property", r.no_fit->property},
                                {"dtype", std::string(dtype_name(r.no_fit->dtype))},
                                {"caption", r.no_fit->caption},
                                {"counterexample", r.no_fit->counterexample}}
                         : json(nullptr);
  j["dropped"] = r.dropped ? json(*r.dropped) : json(nullptr);
  j["note"] = r.note;
  return j.dump(2) + "\n";
}

}  // namespace attncheck::gate
