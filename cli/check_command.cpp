// attncheck check: the CI gate. Every selected property of every selected kernel and dtype, on generated cases,
// each failure shrunk and reported.
#include "commands.h"
#include "jobs.h"
#include "kernel_loader.h"
#include "shard.h"

#include "attncheck/containment.h"
#include "attncheck/report_io.h"
#include "attncheck/run.h"
#include "attncheck/shapes.h"

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

namespace attncheck::cli {

namespace {

/// Set by SIGINT/SIGTERM: the check stops, and the reports are written with what was decided. A second signal
/// ends the process at once (the default action) — unless it comes within kSignalEcho of the first: `timeout`, CI
/// runners and terminals deliver one request twice (to the process and to its group).
std::atomic<bool> g_cancel{false};
std::atomic<std::int64_t> g_first_signal_ns{0};
constexpr std::int64_t kSignalEcho = 1'000'000'000;  // ns

std::int64_t monotonic_ns() {  // clock_gettime: async-signal-safe
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return std::int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

extern "C" void on_cancel_signal(int sig) {
  const std::int64_t now = monotonic_ns();
  std::int64_t first = 0;
  if (g_first_signal_ns.compare_exchange_strong(first, now)) {
    g_cancel.store(true);
  } else if (now - first > kSignalEcho) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
}

/// Installs on_cancel_signal for SIGINT and SIGTERM while it lives.
struct CancelOnSignal {
  CancelOnSignal() {
    g_cancel.store(false);
    g_first_signal_ns.store(0);
    std::signal(SIGINT, on_cancel_signal);
    std::signal(SIGTERM, on_cancel_signal);
  }
  ~CancelOnSignal() {
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
  }
};

struct CheckArgs {
  std::string plugin, exec, kernel, properties, profile = "default", report_dir, junit, corpus;
  std::optional<std::string> accumulate, contract;
  std::vector<std::string> dtypes;
  std::optional<int> cases;
  std::optional<double> time_budget;
  std::uint64_t seed = 1;
  double timeout = 10, first_call_timeout = 60;
  std::uint64_t memory_limit_mib = 4096;
  bool quiet = false;
  bool strict = false;
  bool confine_writes = false;
  std::optional<int> jobs;
  bool worker = false;  // internal: a worker process of --jobs
  std::string shape_pool = "auto";
  std::optional<std::string> shard;
  std::optional<std::string> shapes;
};

std::string absolute_path(const std::string &path) {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::absolute(path, ec);
  return ec ? path : p.lexically_normal().string();
}

std::vector<std::string> split_ids(const std::string &list) {
  std::vector<std::string> ids;
  std::stringstream ss(list);
  for (std::string id; std::getline(ss, id, ',');)
    if (!id.empty()) ids.push_back(id);
  return ids;
}

/// Kills the processes the kernels left running (containment.h), and says so.
void end_strays(bool quiet) {
  if (const int strays = containment::kill_strays(); strays > 0 && !quiet)
    fmt::print(stderr, "attncheck: ended {} process{} the kernel left running\n", strays, strays == 1 ? "" : "es");
}

/// Kills the processes the kernels left running when it goes out of scope (the ways out that write no report).
struct EndStrays {
  EndStrays() = default;
  EndStrays(const EndStrays &) = delete;
  EndStrays &operator=(const EndStrays &) = delete;
  ~EndStrays() { containment::kill_strays(); }
};

/// The gate's request of the command line; `shard` from --shard or the runner's environment (not in a worker).
gate::CheckRequest request_of(const CheckArgs &a, std::optional<ShardChoice> shard) {
  gate::CheckRequest rq;
  rq.plan.properties = split_ids(a.properties);
  rq.plan.profile = gate::find_profile(a.profile);
  rq.plan.cases = a.cases;
  rq.plan.time_budget = a.time_budget;
  rq.plan.seed = a.seed;
  rq.plan.shape_pool = a.shape_pool;
  rq.plan.memory_limit_mib = a.memory_limit_mib;
  rq.plan.evidence = true;  // every report shows it, the terminal's captions too (the hints it verified)
  if (a.shapes) rq.plan.shapes = gate::declared_shapes(*a.shapes);
  rq.dtypes = a.dtypes;
  // Each kernel's contract: what it declares (plugin symbol or exec hello), then --accumulate, then --contract.
  rq.contract = (a.accumulate ? "accumulate=" + *a.accumulate + " " : "") + a.contract.value_or("");
  rq.strict = a.strict;
  rq.quiet = a.quiet;
  if (shard) rq.shard = gate::ShardRequest{shard->index, shard->count, shard->source};
  return rq;
}

/// The kernel source of the command line.
reporting::KernelSource source_of(const CheckArgs &a) {
  using Kind = reporting::KernelSource::Kind;
  if (!a.exec.empty()) return {Kind::exec, a.exec};
  // An absolute path: replay may run from another directory.
  if (!a.plugin.empty() && a.plugin != "builtin") return {Kind::plugin, absolute_path(a.plugin)};
  return {};
}

LoaderOptions loader_options(const CheckArgs &a) {
  LoaderOptions so;
  so.call_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(a.timeout * 1000));
  so.first_call_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(a.first_call_timeout * 1000));
  so.memory_limit_mib = a.memory_limit_mib;
  return so;
}

/// Kernel processes may not write the reports (--confine-writes); before any kernel process starts. Usage errors
/// as their one line, else "".
std::string confine_writes(const CheckArgs &a) {
  if (a.report_dir.empty() && a.junit.empty())
    return "--confine-writes keeps kernels out of the reports: give --report-dir or --junit";
  std::vector<std::filesystem::path> reports;
  for (const std::string &path : {a.report_dir, a.junit, a.corpus})
    if (!path.empty()) reports.emplace_back(path);
  try {
    containment::confine_writes(reports);
  } catch (const std::runtime_error &e) {
    return e.what();
  }
  return "";
}

/// The gate's items on `jobs` worker processes (jobs.h), handed to whichever finishes first; each item's line comes
/// with the evidence its worker gathered (its kernel compiled that shape). `times` sums their exec call times.
std::vector<std::optional<PropertyReport>> check_on_workers(const std::vector<gate::Item> &gate_items,
                                                            const std::vector<const attncheck_kernel *> &kernels,
                                                            int jobs, bool quiet, ExecKernel::CallTimes &times) {
  std::vector<WorkItem> items;
  for (const gate::Item &it : gate_items) items.push_back({it.kernel, it.dtype, it.property, it.end, {}});
  std::vector<std::string> command{"/proc/self/exe"};
  for (const std::string &arg : program_arguments()) command.push_back(arg);
  command.push_back("--worker");
  std::vector<bool> done;
  std::size_t finished = 0;
  const std::vector<reporting::Run> parts = run_on_workers(
      command, items, jobs, g_cancel, done,
      [&](std::size_t i, const reporting::Run &part) {
        if (quiet) return;
        fmt::print(stderr, "[{}/{}] {} {} {}: {}\n", ++finished, items.size(), kernels[items[i].kernel]->name,
                   dtype_name(items[i].dtype), items[i].property,
                   verdict_name(part.report.properties.at(0).verdict));
      },
      times);
  std::vector<std::optional<PropertyReport>> lines(items.size());
  for (std::size_t i = 0; i < items.size(); ++i)
    if (done[i]) lines[i] = parts[i].report.properties.at(0);
  return lines;
}

/// A worker of `--jobs`: one property of one kernel and dtype per item, the report (and evidence) on stdout.
int serve_worker(gate::Check &check, const gate::Kernels &kernels, std::optional<KernelLoader> &source,
                 const CheckArgs &a) {
  const std::string profile(gate::find_profile(a.profile)->name);
  const int rc = serve_items([&](const WorkItem &it) {
    KernelRunState &state = check.state(it.kernel);
    merge_shapes(state.hung, it.hung);  // other workers' hangs: this worker skips those shapes too
    CheckOptions opt = check.options(it.kernel, it.dtype);
    opt.properties = {it.property};
    opt.end = it.end;
    reporting::Run run{kernels.source, profile, attncheck::check(*kernels.list[it.kernel], opt)};
    return ItemResult{std::move(run), state.hung};
  }, [&] { return source->exec_call_times(); });
  source.reset();
  end_strays(a.quiet);
  return rc;
}

int run_check(const CheckArgs &a) {
  if (!a.plugin.empty() && !a.exec.empty()) return usage_error("give --plugin or --exec, not both");
  // A shard of the campaign (--shard, else the runner's environment); a worker's parent has one.
  std::optional<ShardChoice> shard;
  std::string error;
  if (!a.worker) shard = a.shard ? parse_shard(*a.shard, &error) : shard_from_environment(&error);
  if (!error.empty()) return usage_error(error);
  // Bazel asks a test that shards to say so by touching this file.
  if (shard && shard->source.starts_with("TEST_SHARD_INDEX"))
    if (const char *status = std::getenv("TEST_SHARD_STATUS_FILE")) std::ofstream{status};
  // Every process the kernels leave behind, in or out of their process groups, is this process's to reap, and none
  // outlives the check: the reports are written after the last one is gone (SPEC.md §8).
  containment::adopt_orphans();
  if (a.confine_writes)
    if (error = confine_writes(a); !error.empty()) return usage_error(error);
  const EndStrays strays_guard;  // on every way out, after `source` below has stopped its kernel processes
  std::optional<KernelLoader> source;
  gate::Kernels kernels;
  try {
    source.emplace(source_of(a), loader_options(a));
    kernels = source->kernels_of_check(a.kernel);
  } catch (const LoaderError &e) {
    return usage_error(e.what());
  }
  const CancelOnSignal cancel_on_signal;
  try {
    gate::Check check(request_of(a, shard), kernels, {a.report_dir, a.junit, a.corpus}, &g_cancel, a.worker);
    if (a.worker) return serve_worker(check, kernels, source, a);
    const int jobs = a.jobs.value_or(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
    ExecKernel::CallTimes worker_times;  // the workers' exec kernels' (--jobs)
    gate::Hooks hooks;
    if (jobs > 1)
      hooks.items = [&](const std::vector<gate::Item> &items) {
        return check_on_workers(items, kernels.list, jobs, a.quiet, worker_times);
      };
    hooks.finish = [&](const reporting::Document &doc) {
      fmt::print("{}", reporting::to_text(doc));
      std::optional<ExecKernel::CallTimes> t = source->exec_call_times();
      source.reset();
      end_strays(a.quiet);
      if (t && (*t += worker_times).first_calls > 0)
        fmt::print("exec call time{}: {} first calls of a shape (compilation) {:.1f} s, {} other calls {:.1f} s\n",
                   jobs > 1 ? " (summed over the workers)" : "", t->first_calls, t->first_seconds, t->other_calls,
                   t->other_seconds);
      if (g_cancel.load()) fmt::print(stderr, "attncheck: interrupted: the reports hold what was decided\n");
    };
    const gate::CheckResult r = check.run(hooks);
    if (!a.report_dir.empty() && !a.quiet)
      fmt::print(stderr, "reports written to {}/ (report.json, summary.md, report.html)\n", a.report_dir);
    if (!a.corpus.empty() && !a.quiet)
      fmt::print(stderr, "corpus {}: {} new entr{} (it held {})\n", a.corpus, r.corpus_added.size(),
                 r.corpus_added.size() == 1 ? "y" : "ies", r.corpus_held);
    return r.exit_code;
  } catch (const gate::RunError &e) {
    return run_error(e);
  }
}
}  // namespace

void register_check_command(CLI::App &app, Action &action) {
  auto args = std::make_shared<CheckArgs>();
  CLI::App *cmd = app.add_subcommand(
      "check",
      "Check kernels against every property (spec/SPEC.md) on generated cases; failures are shrunk to minimal "
      "counterexamples.\nExit codes: 0 every property passed, 1 a counterexample was found, 2 usage or "
      "configuration error, 3 inconclusive (too few cases could run), 4 internal error.");
  cmd->add_option("--plugin", args->plugin, "Shared object exporting attncheck_kernels, or 'builtin' (default)");
  cmd->add_option("--exec", args->exec,
                  "A kernel in any language: a command speaking the exec protocol (spec/EXEC_PROTOCOL.md)");
  cmd->add_option("--kernel", args->kernel, "Check only this kernel (default: every kernel of the source)");
  cmd->add_option("--dtype", args->dtypes, "Storage dtypes: f32, f16, bf16 (repeatable; default: all three)")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}));
  cmd->add_option("--properties", args->properties, "Comma-separated property ids (default: all; see `list`)");
  cmd->add_option("--profile", args->profile,
                  "The plan: quick (15 cases per property, seconds), default (100 cases, a minute or two per kernel "
                  "and dtype), thorough (1000 cases)")
      ->check(CLI::IsMember({"quick", "default", "thorough"}))
      ->capture_default_str();
  cmd->add_option("--cases", args->cases, "Cases per property (overrides the profile)")
      ->check(CLI::Range(1, 1'000'000));
  cmd->add_option("--seed", args->seed, "Seed: the same seed gives the same cases, verdicts and report")
      ->capture_default_str();
  cmd->add_option("--time-budget", args->time_budget,
                  "The guard, in seconds per kernel and dtype (profiles: 120, 600, 7200): when it runs out, nothing "
                  "new starts and the properties it cut are undecided")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--contract", args->contract,
                  "What the kernel promises, overriding what it declares: key=value,... (spec/SPEC.md §3.1), e.g. "
                  "causal=top-left,lse=none,determinism=within-bound");
  cmd->add_option("--accumulate", args->accumulate,
                  "The kernel's accumulation dtype, f32 or f16 (shorthand for --contract accumulate=…)")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}));
  cmd->add_flag("--strict", args->strict,
                "Warnings (behaviour beyond the declared contract) fail the gate too (exit 1)");
  cmd->add_option("--first-call-timeout", args->first_call_timeout,
                  "Exec kernels: seconds the first call of each new shape may take (a JIT compiler compiles then)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--timeout", args->timeout, "Seconds one kernel call may take before it counts as a hang")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--memory-limit", args->memory_limit_mib,
                  "MiB of memory a kernel's process may write (its data segment: heap and anonymous mappings, not mapped libraries; sandboxed plugins, exec kernels)")
      ->check(CLI::Range(std::uint64_t{64}, std::uint64_t{1} << 30))
      ->capture_default_str();
  cmd->add_option("--report-dir", args->report_dir, "Write report.json, summary.md and report.html here");
  cmd->add_option("--junit", args->junit, "Write JUnit XML here (one testcase per kernel, dtype and property)");
  cmd->add_option("--corpus", args->corpus,
                  "A counterexample corpus (created when missing): its entries for each kernel and dtype are replayed "
                  "before each property's search, and every counterexample and warning of this run is added to it "
                  "(`attncheck corpus DIR` lists and prunes it; spec/REPORT_SCHEMA.md)");
  cmd->add_flag("--confine-writes", args->confine_writes,
                "Kernel processes may not write beneath --report-dir and --junit, nor create or remove entries in "
                "the directories above them (Landlock, Linux 5.19 or later; spec/SPEC.md §8)");
  cmd->add_flag("--quiet", args->quiet, "No progress output");
  cmd->add_option("--jobs", args->jobs,
                  "Worker processes checking properties in parallel (default: the number of cores); the report is "
                  "the same whatever the number")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--shape-pool", args->shape_pool,
                  "Draw case shapes from a pool of N (values, masks and layouts stay random) so that a JIT-compiled "
                  "kernel compiles a few shapes: auto (on when the kernel's first call of a shape is much slower than "
                  "a repeat: a probe of three calls before the first property), 0 (off) or N")
      ->check(CLI::IsMember({"auto"}) | CLI::Range(0, 1000))
      ->capture_default_str();
  cmd->add_option("--shapes", args->shapes,
                  "Production shapes every property that can take them runs on too, after its search: a preset ("
                  "llama-3-8b, llama-3-70b, qwen3-14b, qwen3-235b-a22b, gemma-3-1b, gemma-3-27b, mistral-7b, "
                  "deepseek-v3; `attncheck list --shapes`) or a JSON file of presets and shapes ({\"B\", \"Hq\", "
                  "\"Hkv\", \"Lq\", \"Lk\", \"D\", \"Dv\", \"causal\", \"window\", \"softcap\"}: "
                  "gate/include/attncheck/shapes.h); a failure there is shrunk like any other")
      ->type_name("PRESET|FILE");
  cmd->add_option("--shard", args->shard,
                  "Check the I-th of N slices of the campaign (I/N, 1-based; default: ATTNCHECK_SHARD, or the index and "
                  "count of a Bazel/GTest, Slurm array or Kubernetes Indexed Job run) and write its partial report to "
                  "--report-dir; `attncheck merge` joins the N into the unsharded run's report");
  cmd->add_flag("--worker", args->worker)->group("");  // internal: a worker process of --jobs (cli/jobs.h)
  cmd->callback([args, &action] { action = [args] { return run_check(*args); }; });
}

}  // namespace attncheck::cli
