// attncheck replay: re-runs a recorded counterexample (its exact inputs, from report.json) against the same kernel.
#include "commands.h"
#include "kernel_source.h"

#include "attncheck/property.h"
#include "attncheck/report_io.h"

#include <fmt/core.h>

#include <iostream>
#include <optional>

namespace attncheck::cli {

namespace {
struct ReplayArgs {
  std::string report;
  std::size_t failure = 1;
  double timeout = 10;
};

int run_replay(const ReplayArgs &a) {
  reporting::Document doc;
  try {
    doc = reporting::read_report(a.report, "pass the report.json that `check --report-dir` wrote");
  } catch (const reporting::ReportError &e) {
    return usage_error(e.what());
  }
  const auto failures = doc.failures();
  if (failures.empty()) return usage_error("report '" + a.report + "' records no counterexample: nothing to replay");
  if (a.failure < 1 || a.failure > failures.size())
    return usage_error(fmt::format("--failure {} is out of range: the report has {} counterexample(s)", a.failure,
                             failures.size()));
  const auto [r, q] = failures[a.failure - 1];
  const reporting::Run &run = doc.runs[r];
  const PropertyReport &prop = run.report.properties[q];
  const Counterexample &cx = *prop.counterexample;
  const PropertyDef *def = find_property(prop.id);
  if (!def) return usage_error("the report names property '" + prop.id + "', which this attncheck does not have");

  SourceOptions so;
  so.call_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(a.timeout * 1000));
  std::optional<KernelSource> source;
  const attncheck_kernel *kernel = nullptr;
  try {
    source.emplace(run.source, so);
    kernel = &source->find(run.report.kernel);
  } catch (const SourceError &e) {
    return usage_error(e.what());
  }
  fmt::print("counterexample {} of {}: {} {} {} ({}; contract {})\n  {}\n", a.failure, failures.size(),
             run.report.kernel, dtype_name(run.report.dtype), prop.id, run.report.profile.describe(),
             run.report.contract.describe_changes(), cx.minimal.spec.describe());
  fmt::print("recorded: {} at step {}: {}\n", verdict_name(cx.outcome.verdict),
             cx.outcome.step ? step_id(*cx.outcome.step) : "?", cx.outcome.detail);
  const Env env{*kernel, run.report.profile, run.report.contract};
  const Outcome o = def->run(env, cx.minimal);
  fmt::print("replayed: {}{}{}\n", verdict_name(o.verdict),
             o.step ? fmt::format(" at step {}", step_id(*o.step)) : std::string(),
             o.detail.empty() ? std::string() : ": " + o.detail);
  // A warning (an advisory property: beyond the kernel's contract) fails the gate only under --strict.
  const bool warning = prop.tier == Tier::advisory;
  if (warning && o.verdict == Verdict::fail)
    fmt::print("(a warning: behaviour beyond the kernel's contract{})\n", doc.strict ? "; the check was --strict" : "");
  switch (o.verdict) {
    case Verdict::fail: return warning && !doc.strict ? kExitPass : kExitCounterexample;
    case Verdict::pass: return kExitPass;
    default: return kExitInconclusive;
  }
}
}  // namespace

void register_replay_command(CLI::App &app, Action &action) {
  auto args = std::make_shared<ReplayArgs>();
  CLI::App *cmd = app.add_subcommand(
      "replay",
      "Re-run a recorded counterexample from report.json against the same kernel and show its verdict.\n"
      "Exit codes: 0 it passes now (or still warns: a warning fails only a --strict check), 1 it still fails, 2 usage error (unreadable or malformed report, bad "
      "--failure), 3 undecided, 4 internal error.");
  cmd->add_option("report", args->report, "report.json written by `attncheck check --report-dir`")->required();
  cmd->add_option("--failure", args->failure, "Which counterexample (1-based, in report order)")
      ->capture_default_str();
  cmd->add_option("--timeout", args->timeout, "Seconds one kernel call may take")->check(CLI::PositiveNumber);
  cmd->callback([args, &action] { action = [args] { return run_replay(*args); }; });
}

}  // namespace attncheck::cli
