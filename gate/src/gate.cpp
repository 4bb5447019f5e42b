#include "attncheck/gate.h"

#include "progress.h"

#include "attncheck/property.h"

#include <fmt/core.h>

#include <algorithm>

namespace attncheck::gate {

const ProfileSpec *find_profile(std::string_view name) {
  for (const ProfileSpec &p : kProfiles)
    if (p.name == name) return &p;
  return nullptr;
}

CheckOptions run_options(const Request &request, Dtype dt, const KernelContract &contract,
                          KernelRunState &state, const std::atomic<bool> *cancel) {
  const ProfileSpec &prof = *request.profile;
  CheckOptions opt;
  opt.dtype = dt;
  opt.properties = request.properties;
  opt.cases = request.cases.value_or(prof.cases);
  opt.seed = request.seed;
  opt.time_budget = std::chrono::milliseconds(static_cast<std::int64_t>(
      1000 * request.time_budget.value_or(static_cast<double>(prof.budget.count()))));
  opt.contract = contract;
  opt.cancel = cancel;
  opt.shared = &state;
  opt.huge_cases = prof.name == "thorough";
  opt.memory_limit_mib = request.memory_limit_mib;
  opt.evidence = request.evidence;
  if (request.shape_pool == "auto") {
    opt.detect_compile = true;
  } else {
    opt.shape_pool = std::stoi(request.shape_pool);
  }
  return opt;
}

RunReport run_header(const attncheck_kernel &kernel, const CheckOptions &opt) {
  RunReport r;
  r.kernel = kernel.name;
  r.dtype = opt.dtype;
  r.contract = opt.contract;
  r.seed = opt.seed;
  r.cases = opt.cases;
  return r;
}

std::string run_line(const RunReport &r, bool strict) {
  int passed = 0, failed = 0, warned = 0, undecided = 0, unsupported = 0, cases = 0;
  for (const PropertyReport &p : r.properties) {
    cases += p.cases;
    switch (p.verdict) {
      case Verdict::pass: ++passed; break;
      case Verdict::fail: ++failed; break;
      case Verdict::warn: ++warned; break;
      case Verdict::undecided: ++undecided; break;
      case Verdict::unsupported: ++unsupported; break;
    }
  }
  return fmt::format("{} {}: {} — {} passed, {} failed, {} warnings, {} undecided, {} unsupported ({} cases)",
                     r.kernel, dtype_name(r.dtype), verdict_name(r.verdict(strict)), passed, failed, warned,
                     undecided, unsupported, cases);
}

int exit_code(const reporting::Document &doc, bool strict, bool cancelled) {
  bool fail = false, undecided = cancelled, any_ran = false;
  for (const reporting::Run &run : doc.runs) {
    const Verdict v = run.report.verdict(strict);
    fail |= v == Verdict::fail;
    undecided |= v == Verdict::undecided;
    any_ran |= v != Verdict::unsupported;
  }
  if (fail) return kExitCounterexample;
  return (undecided || !any_ran) ? kExitInconclusive : kExitPass;
}

/// The terminal summary names this many of a run's slowest properties.
constexpr std::size_t kSlowestShown = 3;

void print_table(const reporting::Document &doc) {
  std::size_t width = 14;  // the kernel column fits the longest name
  for (const reporting::Run &run : doc.runs) width = std::max(width, run.report.kernel.size());
  fmt::print("{:<{}} {:<5} {:<26} {:<9} {:<11} {:>6} {:>9} {:>9} {:>12}\n", "kernel", width, "dtype", "property",
             "tier", "verdict", "cases", "declined", "undecided", "worst err/β");
  for (const reporting::Run &run : doc.runs) {
    const std::vector<PropertyReport> &ps = run.report.properties;
    // A dtype the kernel declines entirely is one line, not one per property.
    if (!ps.empty() && std::all_of(ps.begin(), ps.end(), [](const auto &p) { return p.verdict == Verdict::unsupported; })) {
      int declined = 0;
      for (const PropertyReport &p : ps) declined += p.unsupported;
      fmt::print("{:<{}} {:<5} {:<26} the kernel declined all {} cases it was given: every property unsupported\n",
                 run.report.kernel, width, dtype_name(run.report.dtype), fmt::format("({} properties)", ps.size()),
                 declined);
      continue;
    }
    for (const PropertyReport &p : ps)
      fmt::print("{:<{}} {:<5} {:<26} {:<9} {:<11} {:>6} {:>9} {:>9} {:>12.3g}\n", run.report.kernel, width,
                 dtype_name(run.report.dtype), p.id, tier_name(p.tier), p.tier == Tier::off ? "-" : verdict_name(p.verdict),
                 p.cases, p.unsupported, p.undecided, p.worst_ratio_overall());
  }
  // What was cut: each property that decided fewer cases than planned, or is undecided, with its reason.
  bool cut_header = false;
  for (const reporting::Run &run : doc.runs)
    for (const PropertyReport &p : run.report.properties) {
      const int decided = p.cases - p.undecided;
      if (p.counterexample || p.tier == Tier::off || p.verdict == Verdict::unsupported) continue;
      if (p.verdict == Verdict::pass && decided >= run.report.cases && !p.budget_exhausted) continue;
      if (!cut_header) fmt::print("cut short:\n");
      cut_header = true;
      fmt::print("  {} {} {}: {}, {} / {} cases decided{}\n", run.report.kernel, dtype_name(run.report.dtype), p.id,
                 verdict_name(p.verdict), decided, run.report.cases, p.note.empty() ? "" : " — " + p.note);
    }
  // The contract each kernel was checked against, once per kernel (the same for every dtype).
  for (std::size_t n = 0; n < doc.runs.size(); ++n) {
    const RunReport &r = doc.runs[n].report;
    if (n > 0 && doc.runs[n - 1].report.kernel == r.kernel && doc.runs[n - 1].report.contract == r.contract) continue;
    fmt::print("contract of {}: {}\n", r.kernel, r.contract.describe_changes());
  }
  // What the cases reached (coverage.h), for each run that decided any.
  for (const reporting::Run &run : doc.runs) {
    const RunCoverage rc = run.report.coverage();
    if (rc.count(CornerStatus::reached) > 0)
      fmt::print("coverage of {} {}: {}\n", run.report.kernel, dtype_name(run.report.dtype), rc.describe());
  }
  // Where the time went (the one part of a run that depends on the machine): each run, its kernel's share, and its
  // slowest properties.
  for (const reporting::Run &run : doc.runs) {
    double seconds = 0, kernel = 0;
    std::vector<const PropertyReport *> by_time;
    for (const PropertyReport &p : run.report.properties) {
      seconds += p.timing.seconds;
      kernel += p.timing.kernel_seconds;
      by_time.push_back(&p);
    }
    if (by_time.empty()) continue;
    std::stable_sort(by_time.begin(), by_time.end(),
                     [](const auto *a, const auto *b) { return a->timing.seconds > b->timing.seconds; });
    std::string slowest;
    for (std::size_t n = 0; n < std::min<std::size_t>(kSlowestShown, by_time.size()); ++n)
      slowest += fmt::format("{}{} {:.1f} s", n ? ", " : "", by_time[n]->id, by_time[n]->timing.seconds);
    fmt::print("time of {} {}: {:.1f} s, {:.1f} s of it in the kernel; slowest: {}\n", run.report.kernel,
               dtype_name(run.report.dtype), seconds, kernel, slowest);
  }
  // Counterexamples grouped by root cause, failures before warnings; numbered as `replay --failure N` takes them.
  const auto failures = doc.failures();
  std::vector<reporting::FailureGroup> groups = reporting::group_failures(doc);
  std::stable_partition(groups.begin(), groups.end(), [](const auto &g) { return !g.warning; });
  for (const reporting::FailureGroup &g : groups) {
    fmt::print("\n{} {}\n  {}\n", g.warning ? "warning (beyond the declared contract):" : "failure:", g.headline,
               g.caption);
    for (const auto &member : g.members) {
      const std::size_t number = std::find(failures.begin(), failures.end(), member) - failures.begin() + 1;
      const PropertyReport &p = doc.runs[member.first].report.properties[member.second];
      const Counterexample &cx = *p.counterexample;
      fmt::print("  counterexample {}: {} — {} (step {}, found after {} cases, {} shrinks)\n    {}\n", number, p.id,
                 cx.minimal.spec.describe(), cx.outcome.step ? step_id(*cx.outcome.step) : "?", cx.found_after,
                 cx.shrink_steps, cx.outcome.detail);
    }
  }
}

std::vector<reporting::Run> check_serially(const std::vector<const attncheck_kernel *> &kernels,
                                           const std::vector<Dtype> &dtypes,
                                           const std::function<CheckOptions(std::size_t, Dtype)> &options_for,
                                           const reporting::KernelSource &src, std::string_view profile,
                                           bool quiet, bool strict, bool sharded) {
  std::vector<reporting::Run> runs;
  Progress progress(static_cast<int>(kernels.size() * dtypes.size()), quiet);
  for (std::size_t n = 0; n < kernels.size(); ++n)
    for (Dtype dt : dtypes) {
      CheckOptions opt = options_for(n, dt);
      if (sharded && opt.properties.empty()) {  // another shard's run
        runs.push_back({src, std::string(profile), run_header(*kernels[n], opt)});
        continue;
      }
      opt.on_progress = [&progress](const CheckProgress &p) { progress.update(p); };
      progress.start_run(fmt::format("{} {}", kernels[n]->name, dtype_name(dt)));
      reporting::Run run{src, std::string(profile), check(*kernels[n], opt)};
      progress.finish_run(run_line(run.report, strict));
      runs.push_back(std::move(run));
    }
  return runs;
}

}  // namespace attncheck::gate
