// attncheck replay: re-runs a recorded counterexample (its exact inputs, from report.json) against the same kernel.
#include "commands.h"
#include "kernel_loader.h"

#include "attncheck/check.h"
#include "attncheck/replay.h"
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
  std::optional<std::string> contract;
};

int run_replay(const ReplayArgs &a) {
  reporting::Document doc;
  gate::ReplayTarget target;
  std::optional<KernelContract> judged;
  try {
    doc = reporting::read_report(a.report, "pass the report.json that `check --report-dir` wrote");
    target = gate::replay_target(doc, a.failure);
    if (a.contract) judged = parse_contract(*a.contract);
  } catch (const reporting::ReportError &e) {
    return usage_error(e.what());
  } catch (const gate::ReplayError &e) {
    return usage_error("--failure " + std::to_string(a.failure) + ": " + e.what() + " (report '" + a.report + "')");
  } catch (const ContractError &e) {
    return usage_error(std::string("--contract: ") + e.what() + " (spec/SPEC.md §3.1)");
  }
  const reporting::Run &run = *target.run;
  const PropertyReport &prop = *target.property;
  const Counterexample &cx = target.counterexample();

  // Under a contract that turns the property off nothing runs: no kernel is loaded.
  const gate::ReplayResult plan = gate::replay_plan(target, judged);
  LoaderOptions so;
  so.call_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(a.timeout * 1000));
  std::optional<KernelLoader> source;
  const attncheck_kernel *kernel = nullptr;
  try {
    if (plan.tier != Tier::off) {
      source.emplace(run.source, so);
      kernel = &source->find(run.report.kernel);
    }
  } catch (const LoaderError &e) {
    return usage_error(e.what());
  }
  fmt::print("counterexample {} of {}: {} {} {} ({}; contract {})\n  {}\n", target.failure, target.of,
             run.report.kernel, dtype_name(run.report.dtype), prop.id, run.report.precision().describe(),
             run.report.contract.describe_changes(), cx.minimal.spec.describe());
  fmt::print("recorded: {} at step {}: {}\n", verdict_name(cx.outcome.verdict),
             cx.outcome.step ? step_id(*cx.outcome.step) : "?", cx.outcome.detail);
  const gate::ReplayResult r = kernel ? gate::replay(target, *kernel, judged) : plan;
  if (judged) fmt::print("judged under contract {}\n", r.contract.describe_changes());
  if (r.tier == Tier::off) {
    fmt::print("not run: {}\n", r.outcome.detail);
  } else {
    const Outcome &o = r.outcome;
    fmt::print("replayed: {}{}{}\n", verdict_name(o.verdict),
               o.step ? fmt::format(" at step {}", step_id(*o.step)) : std::string(),
               o.detail.empty() ? std::string() : ": " + o.detail);
    // A warning (an advisory property: beyond the kernel's contract) fails the gate only under --strict.
    if (r.verdict() == Verdict::warn)
      fmt::print("(a warning: behaviour beyond the kernel's contract{})\n",
                 doc.strict ? "; the check was --strict" : "");
  }
  return gate::replay_exit_code(r, doc.strict);
}
}  // namespace

void register_replay_command(CLI::App &app, Action &action) {
  auto args = std::make_shared<ReplayArgs>();
  CLI::App *cmd = app.add_subcommand(
      "replay",
      "Re-run a recorded counterexample from report.json against the same kernel and show its verdict.\n"
      "Exit codes: 0 it passes now (or still warns: a warning fails only a --strict check; or the --contract given "
      "asks nothing of its property), 1 it still fails, 2 usage error (unreadable or malformed report, bad --failure "
      "or --contract), 3 undecided, 4 internal error.");
  cmd->add_option("report", args->report, "report.json written by `attncheck check --report-dir`")->required();
  cmd->add_option("--failure", args->failure, "Which counterexample (1-based, in report order)")
      ->capture_default_str();
  cmd->add_option("--contract", args->contract,
                  "Judge it under this contract instead of the report's: key=value,... over the defaults "
                  "(spec/SPEC.md §3.1), e.g. to see whether a declaration would explain it");
  cmd->add_option("--timeout", args->timeout, "Seconds one kernel call may take")->check(CLI::PositiveNumber);
  cmd->callback([args, &action] { action = [args] { return run_replay(*args); }; });
}

}  // namespace attncheck::cli
