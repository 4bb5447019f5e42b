// attncheck check: every kernel of a plugin against the reference and the error model.
#include "commands.h"
#include "plugin.h"

#include "attncheck/gate.h"

#include <fmt/core.h>

#include <iostream>
#include <optional>
#include <unistd.h>

namespace attncheck::cli {

namespace {
struct CheckArgs {
  std::string plugin = "builtin";
  std::string kernel;
  std::vector<std::string> dtypes;
  int cases = 200;
  std::uint64_t seed = 1;
  bool forward_only = false;
  bool quiet = false;
};

void print_table(const std::vector<GateRow> &rows) {
  fmt::print("{:<12} {:<5} {:>6} {:>12} {:>16} {:>16}  {}\n", "kernel", "dtype", "cases", "unsupported",
             "worst fwd err/β", "worst bwd err/β", "verdict");
  for (const GateRow &r : rows) {
    const std::string bwd = r.has_backward ? fmt::format("{:.3g}", r.backward.ratio) : "-";
    fmt::print("{:<12} {:<5} {:>6} {:>12} {:>16.3g} {:>16}  {}\n", r.kernel, dtype_name(r.dtype), r.cases,
               r.unsupported, r.forward.ratio, bwd, verdict_name(r.verdict()));
  }
}

int run_check(const CheckArgs &a) {
  std::optional<Plugin> plugin;
  GateOptions opt;
  std::vector<attncheck_kernel> selected;
  try {
    plugin.emplace(a.plugin);
    if (a.kernel.empty())
      selected.assign(plugin->kernels().begin(), plugin->kernels().end());
    else
      selected.push_back(plugin->find(a.kernel));
    if (!a.dtypes.empty()) {
      opt.dtypes.clear();
      for (const std::string &d : a.dtypes) opt.dtypes.push_back(parse_dtype(d));
    }
  } catch (const std::exception &e) {
    std::cerr << "attncheck: " << e.what() << '\n';
    return kExitUsage;
  }
  opt.cases = a.cases;
  opt.seed = a.seed;
  opt.backward = !a.forward_only;
  const bool tty = isatty(STDERR_FILENO) != 0;
  auto progress = [&](Dtype dt, int done, int total) {
    if (a.quiet) return;
    if (tty)
      fmt::print(stderr, "\r{} {}/{} problems", dtype_name(dt), done, total);
    else if (done == total || done % 50 == 0)
      fmt::print(stderr, "{} {}/{} problems\n", dtype_name(dt), done, total);
    if (tty && done == total) fmt::print(stderr, "\n");
  };
  const auto rows = run_gate(selected, opt, progress);
  print_table(rows);
  bool any_ran = false, any_fail = false;
  for (const GateRow &r : rows) {
    any_ran |= r.verdict() != GateRow::Verdict::unsupported;
    if (r.verdict() == GateRow::Verdict::fail) {
      any_fail = true;
      fmt::print("\n{} {}: {}\n", r.kernel, dtype_name(r.dtype), r.worst_case);
    }
  }
  if (any_fail) return kExitCounterexample;
  return any_ran ? kExitPass : kExitInconclusive;
}
}  // namespace

void register_check_command(CLI::App &app, Action &action) {
  auto args = std::make_shared<CheckArgs>();
  CLI::App *cmd = app.add_subcommand(
      "check", "Check kernels against the arbitrary-precision reference within the error model (spec/SPEC.md).\n"
               "Exit codes: 0 pass, 1 counterexample found, 2 usage or configuration error, 3 inconclusive, "
               "4 internal error.");
  cmd->add_option("--plugin", args->plugin, "Shared object exporting attncheck_kernels, or 'builtin'")
      ->capture_default_str();
  cmd->add_option("--kernel", args->kernel, "Check only this kernel (default: every kernel of the plugin)");
  cmd->add_option("--dtype", args->dtypes, "Storage dtypes to check: f32, f16, bf16 (default: all)")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}));
  cmd->add_option("--cases", args->cases, "Random problems per dtype")->check(CLI::Range(1, 1'000'000))
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "Seed: the same seed gives the same problems and verdicts")
      ->capture_default_str();
  cmd->add_flag("--forward-only", args->forward_only, "Do not check backward");
  cmd->add_flag("--quiet", args->quiet, "No progress lines");
  cmd->callback([args, &action] { action = [args] { return run_check(*args); }; });
}

}  // namespace attncheck::cli
