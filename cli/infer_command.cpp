// attncheck infer: the contract a kernel satisfies, as one line to paste into attncheck_contracts, the exec hello,
// --contract or Python's contract= (gate/include/attncheck/infer.h does the search).
#include "commands.h"
#include "kernel_loader.h"

#include "attncheck/containment.h"
#include "attncheck/infer.h"
#include "attncheck/check.h"

#include <fmt/core.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <optional>
#include <sstream>

namespace attncheck::cli {

namespace {

/// Set by SIGINT/SIGTERM: the check in flight stops, and infer prints the best contract found so far (exit 3).
std::atomic<bool> g_cancel{false};
extern "C" void on_infer_signal(int) { g_cancel.store(true); }

struct InferArgs {
  std::string plugin, exec, kernel, properties, profile = "quick", from = "defaults";
  std::optional<std::string> contract;
  std::vector<std::string> dtypes;
  std::optional<int> cases;
  std::optional<double> time_budget;
  std::uint64_t seed = 1;
  double timeout = 10, first_call_timeout = 60;
  std::uint64_t memory_limit_mib = 4096;
  bool json = false, quiet = false;
};

int run_infer(const InferArgs &a) {
  using Kind = reporting::KernelSource::Kind;
  if (!a.plugin.empty() && !a.exec.empty()) return usage_error("give --plugin or --exec, not both");
  std::vector<std::string> ids;
  {
    std::stringstream ss(a.properties);
    for (std::string id; std::getline(ss, id, ',');)
      if (!id.empty()) ids.push_back(id);
  }
  for (const std::string &id : ids)
    if (!find_property_info(id)) return usage_error("unknown property '" + id + "' (`attncheck list` lists them)");
  std::vector<Dtype> dtypes;
  for (const std::string &d : a.dtypes.empty() ? std::vector<std::string>{"f32", "f16", "bf16"} : a.dtypes)
    dtypes.push_back(parse_dtype(d));

  reporting::KernelSource src;
  if (!a.exec.empty()) src = {Kind::exec, a.exec};
  else if (!a.plugin.empty() && a.plugin != "builtin")
    src = {Kind::plugin, std::filesystem::absolute(a.plugin).lexically_normal().string()};
  LoaderOptions so;
  so.call_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(a.timeout * 1000));
  so.first_call_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(a.first_call_timeout * 1000));
  so.memory_limit_mib = a.memory_limit_mib;
  containment::adopt_orphans();
  std::optional<KernelLoader> source;
  const attncheck_kernel *kernel = nullptr;
  try {
    source.emplace(src, so);
    kernel = &source->find(a.kernel);
  } catch (const LoaderError &e) {
    containment::kill_strays();
    return usage_error(e.what());
  }

  gate::InferRequest rq;
  try {
    rq.declared = resolve_contract(source->declared_contract(*kernel));
    // Where the search starts: the defaults but for what no probe can find (--from defaults), or the declaration;
    // then what --contract says the kernel does.
    const KernelContract base = a.from == "declared" ? rq.declared : gate::search_start(rq.declared);
    rq.start = parse_contract(a.contract.value_or(""), base);
  } catch (const ContractError &e) {
    containment::kill_strays();
    return usage_error(std::string("--contract: ") + e.what() + " (spec/SPEC.md §3.1)");
  }
  rq.check.properties = ids;
  rq.check.profile = gate::find_profile(a.profile);
  rq.check.cases = a.cases;
  rq.check.time_budget = a.time_budget;
  rq.check.seed = a.seed;
  rq.check.memory_limit_mib = a.memory_limit_mib;
  rq.dtypes = dtypes;
  rq.quiet = a.quiet;
  g_cancel.store(false);
  rq.cancel = &g_cancel;
  std::signal(SIGINT, on_infer_signal);
  std::signal(SIGTERM, on_infer_signal);
  std::optional<gate::InferResult> r;
  try {
    r = gate::infer(*kernel, rq, src);
  } catch (const std::runtime_error &e) {
    fmt::print(stderr, "attncheck: {}\n", e.what());
    source.reset();
    containment::kill_strays();
    return gate::kExitInternal;
  }
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  source.reset();
  containment::kill_strays();
  fmt::print("{}", a.json ? gate::infer_json(*r) : gate::infer_text(*r));
  return r->exit_code;
}

}  // namespace

void register_infer_command(CLI::App &app, Action &action) {
  auto args = std::make_shared<InferArgs>();
  CLI::App *cmd = app.add_subcommand(
      "infer",
      "Find the contract a kernel satisfies (spec/SPEC.md §3.1): check it, adopt the declaration that explains its "
      "failures, check again; print the contract as one line for attncheck_contracts, the exec hello, --contract or "
      "contract=.\nExit codes: 0 a contract was found under which the kernel passes, 1 no contract value fits a "
      "failure (a bug; its counterexample is printed), 2 usage or configuration error, 3 undecided (cases declined "
      "or cut short, or interrupted), 4 internal error.");
  cmd->add_option("--plugin", args->plugin, "Shared object exporting attncheck_kernels, or 'builtin' (default)");
  cmd->add_option("--exec", args->exec, "A kernel in any language: a command speaking the exec protocol");
  cmd->add_option("--kernel", args->kernel, "The kernel to infer the contract of")->required();
  cmd->add_option("--dtype", args->dtypes, "Storage dtypes: f32, f16, bf16 (repeatable; default: all three)")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}));
  cmd->add_option("--properties", args->properties, "Comma-separated property ids (default: all; see `list`)");
  cmd->add_option("--profile", args->profile, "The plan of each check: quick, default or thorough")
      ->check(CLI::IsMember({"quick", "default", "thorough"}))
      ->capture_default_str();
  cmd->add_option("--cases", args->cases, "Cases per property (overrides the profile)")->check(CLI::Range(1, 1'000'000));
  cmd->add_option("--seed", args->seed, "Seed: the same seed gives the same checks and the same contract")
      ->capture_default_str();
  cmd->add_option("--time-budget", args->time_budget, "The guard of each check, in seconds per dtype")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--from", args->from,
                  "Where the search starts: defaults (the defaults, keeping of the declaration only what no check can "
                  "find: features, accumulate-pv, round-p, tanh, exp, lse=none) or declared (the kernel's whole declaration)")
      ->check(CLI::IsMember({"defaults", "declared"}))
      ->capture_default_str();
  cmd->add_option("--contract", args->contract,
                  "What you know the kernel does, over where the search starts: key=value,... (e.g. accumulate=f16)");
  cmd->add_flag("--json", args->json, "Print one JSON object (README, \"Infer a kernel's contract\")");
  cmd->add_flag("--quiet", args->quiet, "No progress output");
  cmd->add_option("--timeout", args->timeout, "Seconds one kernel call may take before it counts as a hang")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--first-call-timeout", args->first_call_timeout,
                  "Exec kernels: seconds the first call of each new shape may take")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--memory-limit", args->memory_limit_mib, "MiB of memory a kernel's process may write")
      ->check(CLI::Range(std::uint64_t{64}, std::uint64_t{1} << 30))
      ->capture_default_str();
  cmd->callback([args, &action] { action = [args] { return run_infer(*args); }; });
}

}  // namespace attncheck::cli
