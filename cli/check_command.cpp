// attncheck check: the CI gate. Every selected property of every selected kernel and dtype, on generated cases,
// each failure shrunk and reported.
#include "commands.h"
#include "attncheck/gate.h"
#include "jobs.h"
#include "kernel_loader.h"
#include "shard.h"

#include "attncheck/check.h"
#include "attncheck/containment.h"
#include "attncheck/corpus.h"
#include "attncheck/hand_over.h"
#include "attncheck/property.h"
#include "attncheck/report_io.h"

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <ctime>
#include <functional>
#include <thread>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <iostream>
#include <optional>
#include <sstream>

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

std::string known_properties() {
  std::string s;
  for (const PropertyDef *d : all_properties()) s += (s.empty() ? "" : ", ") + std::string(d->id);
  return s;
}

using OptionsFor = std::function<CheckOptions(std::size_t, Dtype)>;

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

/// The same runs from `jobs` worker processes (jobs.h), one property at a time, merged in the serial order. Each
/// (kernel, dtype) run keeps its own guard, ending one after another as in a serial check.
std::vector<reporting::Run> check_on_workers(const CheckArgs &a, const std::vector<const attncheck_kernel *> &kernels,
                                             const std::vector<Dtype> &dtypes, int jobs,
                                             const OptionsFor &options_for, const reporting::KernelSource &src,
                                             std::string_view profile, ExecKernel::CallTimes &times,
                                             bool sharded) {
  std::vector<std::string> all_ids;
  for (const PropertyDef *d : all_properties()) all_ids.push_back(std::string(d->id));
  std::vector<std::vector<std::string>> run_ids;  // per run, the properties it checks (a shard: those it owns)
  std::vector<WorkItem> items;
  auto end = std::chrono::steady_clock::now();  // the runs' guards end one after another, as in a serial check
  for (std::size_t n = 0; n < kernels.size(); ++n)
    for (Dtype dt : dtypes) {
      const CheckOptions opt = options_for(n, dt);
      run_ids.push_back(opt.properties.empty() && !sharded ? all_ids : opt.properties);
      end += opt.time_budget;
      for (const std::string &id : run_ids.back()) items.push_back({n, dt, id, end, {}});
    }
  std::vector<std::string> command{"/proc/self/exe"};
  for (const std::string &arg : program_arguments()) command.push_back(arg);
  command.push_back("--worker");
  std::vector<bool> done;
  std::size_t finished = 0;
  const std::vector<reporting::Run> parts = items.empty() ? std::vector<reporting::Run>{} :
      run_on_workers(command, items, jobs, g_cancel, done,
                     [&](std::size_t i, const reporting::Run &part) {
                       if (a.quiet) return;
                       fmt::print(stderr, "[{}/{}] {} {} {}: {}\n", ++finished, items.size(),
                                  kernels[items[i].kernel]->name,
                                  dtype_name(items[i].dtype), items[i].property,
                                  verdict_name(part.report.properties.at(0).verdict));
                     },
                     times);
  std::vector<reporting::Run> runs;
  std::size_t i = 0;
  for (std::size_t n = 0; n < kernels.size(); ++n)
    for (Dtype dt : dtypes) {
      const CheckOptions opt = options_for(n, dt);
      reporting::Run run{src, std::string(profile), gate::run_header(*kernels[n], opt)};
      RunReport &r = run.report;
      for (const std::string &id : run_ids[runs.size()]) {
        if (done[i]) {  // with its evidence, which the worker gathered (its kernel compiled that shape)
          r.properties.push_back(parts[i].report.properties.at(0));
        } else {  // never started: the check was interrupted
          const PropertyDef &def = *find_property(id);
          PropertyReport p;
          p.id = id;
          p.formula = std::string(def.formula);
          p.summary = std::string(def.summary);
          p.tier = tier_of(def, opt.contract, dt);
          p.interrupted = true;
          p.note = "not run: interrupted";
          r.properties.push_back(std::move(p));
        }
        ++i;
      }
      // A worker's escalated counterexample goes to its required property's line, with its evidence.
      settle_hand_overs(r);
      if (!a.quiet) fmt::print(stderr, "{}\n", reporting::run_line(r, a.strict));
      runs.push_back(std::move(run));
    }
  return runs;
}

int run_check(const CheckArgs &a) {
  using Kind = reporting::KernelSource::Kind;
  if (!a.plugin.empty() && !a.exec.empty()) return usage_error("give --plugin or --exec, not both");
  const std::vector<std::string> ids = split_ids(a.properties);
  for (const std::string &id : ids)
    if (!find_property(id)) return usage_error("unknown property '" + id + "'; known: " + known_properties());
  std::vector<Dtype> dtypes;
  for (const std::string &d : a.dtypes.empty() ? std::vector<std::string>{"f32", "f16", "bf16"} : a.dtypes)
    dtypes.push_back(parse_dtype(d));

  // A shard of the campaign (--shard, else the runner's environment): the (kernel, dtype, property) items i with
  // i mod N = I − 1, in report order; its partial report goes to --report-dir for `attncheck merge`.
  std::optional<ShardChoice> shard;
  if (!a.worker) {
    std::string error;
    shard = a.shard ? parse_shard(*a.shard, &error) : shard_from_environment(&error);
    if (!error.empty()) return usage_error(error);
    if (shard && a.report_dir.empty())
      return usage_error("shard " + std::to_string(shard->index) + "/" + std::to_string(shard->count) + " (from " +
                         shard->source + ") writes a partial report for `attncheck merge`: give --report-dir");
  }
  // Bazel asks a test that shards to say so by touching this file.
  if (shard && shard->source.starts_with("TEST_SHARD_INDEX"))
    if (const char *status = std::getenv("TEST_SHARD_STATUS_FILE")) std::ofstream{status};
  std::vector<std::string> shard_ids = ids;  // every run's properties, in report order
  if (shard_ids.empty())
    for (const PropertyDef *d : all_properties()) shard_ids.push_back(std::string(d->id));

  reporting::KernelSource src;
  if (!a.exec.empty()) src = {Kind::exec, a.exec};
  // An absolute path: replay may run from another directory.
  else if (!a.plugin.empty() && a.plugin != "builtin") src = {Kind::plugin, absolute_path(a.plugin)};
  LoaderOptions so;
  so.call_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(a.timeout * 1000));
  so.first_call_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(a.first_call_timeout * 1000));
  so.memory_limit_mib = a.memory_limit_mib;
  // Every process the kernels leave behind, in or out of their process groups, is this process's to reap, and none
  // outlives the check: the reports are written after the last one is gone (SPEC.md §8).
  containment::adopt_orphans();
  if (a.confine_writes) {  // before any kernel process starts
    if (a.report_dir.empty() && a.junit.empty())
      return usage_error("--confine-writes keeps kernels out of the reports: give --report-dir or --junit");
    std::vector<std::filesystem::path> reports;
    for (const std::string &path : {a.report_dir, a.junit, a.corpus})
      if (!path.empty()) reports.emplace_back(path);
    try {
      containment::confine_writes(reports);
    } catch (const std::runtime_error &e) {
      return usage_error(e.what());
    }
  }
  const EndStrays strays_guard;  // on every way out, after `source` below has stopped its kernel processes
  std::optional<KernelLoader> source;
  std::vector<const attncheck_kernel *> kernels;
  try {
    source.emplace(src, so);
    if (a.kernel.empty())
      for (const attncheck_kernel &k : source->kernels()) kernels.push_back(&k);
    else
      kernels.push_back(&source->find(a.kernel));
  } catch (const LoaderError &e) {
    return usage_error(e.what());
  }

  // Each kernel's contract: what it declares (plugin symbol or exec hello), then --accumulate, then --contract.
  std::vector<KernelContract> contracts;
  const std::string overrides = (a.accumulate ? "accumulate=" + *a.accumulate + " " : "") + a.contract.value_or("");
  for (const attncheck_kernel *k : kernels) {
    try {
      contracts.push_back(resolve_contract(source->declared_contract(*k), overrides));
    } catch (const ContractError &e) {
      return usage_error(std::string("--contract: ") + e.what() + " (spec/SPEC.md §3.1)");
    }
  }

  // Where reports go is checked before any case runs: a typo should not cost the whole check.
  try {
    if (!a.report_dir.empty() && !a.worker) reporting::prepare_report_dir(a.report_dir);
    if (!a.junit.empty() && !a.worker) reporting::write_file(a.junit, "");
  } catch (const std::runtime_error &e) {
    return usage_error(e.what());
  }

  // The corpus (--corpus): read before any case runs, created when missing; a worker reads what its parent read (the
  // parent stores the run's counterexamples only once every worker is done).
  std::optional<gate::Corpus> corpus;
  try {
    if (!a.corpus.empty()) corpus = a.worker ? gate::read_corpus(a.corpus) : gate::open_corpus(a.corpus);
  } catch (const gate::CorpusError &e) {
    return usage_error("--corpus: " + std::string(e.what()));
  }

  gate::Request request;
  request.properties = ids;
  request.profile = gate::find_profile(a.profile);
  request.cases = a.cases;
  request.time_budget = a.time_budget;
  request.seed = a.seed;
  request.shape_pool = a.shape_pool;
  request.memory_limit_mib = a.memory_limit_mib;
  request.evidence = true;  // every report shows it, the terminal's captions too (the hints it verified)
  const gate::ProfileSpec &prof = *request.profile;
  std::vector<KernelRunState> states(kernels.size());  // per kernel, across its dtypes and properties
  const CancelOnSignal cancel_on_signal;
  auto options_for = [&](std::size_t n, Dtype dt) {
    CheckOptions opt = gate::run_options(request, dt, contracts[n], states[n], &g_cancel);
    if (corpus) opt.corpus = gate::corpus_cases(*corpus, kernels[n]->name, dt);
    if (shard) {  // this shard's properties of the run, under the run's whole guard (a guard, not a share)
      const std::size_t run = n * dtypes.size() + static_cast<std::size_t>(
                                  std::find(dtypes.begin(), dtypes.end(), dt) - dtypes.begin());
      const reporting::Shard s{shard->index, shard->count, {}};
      opt.properties.clear();
      for (std::size_t p = 0; p < shard_ids.size(); ++p)
        if (s.owns(run * shard_ids.size() + p)) opt.properties.push_back(shard_ids[p]);
    }
    return opt;
  };
  // A worker of `--jobs`: one property of one kernel and dtype per item, the report (and evidence) on stdout.
  if (a.worker) {
    const int rc = serve_items([&](const WorkItem &it) {
      merge_shapes(states[it.kernel].hung, it.hung);  // other workers' hangs: this worker skips those shapes too
      CheckOptions opt = options_for(it.kernel, it.dtype);
      opt.properties = {it.property};
      opt.end = it.end;
      reporting::Run run{src, std::string(prof.name), check(*kernels[it.kernel], opt)};
      return ItemResult{std::move(run), states[it.kernel].hung};
    }, [&] { return source->exec_call_times(); });
    source.reset();
    end_strays(a.quiet);
    return rc;
  }

  reporting::Document doc;
  doc.tool_version = ATTNCHECK_VERSION;
  doc.strict = a.strict;
  if (shard) {
    doc.shard = reporting::Shard{shard->index, shard->count, shard_ids};
    if (!a.quiet)
      fmt::print(stderr, "shard {}/{} (from {}): every {}th of the {} (kernel, dtype, property) items\n", shard->index,
                 shard->count, shard->source, shard->count, kernels.size() * dtypes.size() * shard_ids.size());
  }
  const int jobs = a.jobs.value_or(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  ExecKernel::CallTimes worker_times;  // the workers' exec kernels' (--jobs)
  try {
    doc.runs = jobs > 1 ? check_on_workers(a, kernels, dtypes, jobs, options_for, src, prof.name, worker_times,
                                           shard.has_value())
                        : gate::check_serially(kernels, dtypes, options_for, src, prof.name, a.quiet, a.strict,
                                               shard.has_value());
  } catch (const std::runtime_error &e) {
    fmt::print(stderr, "attncheck: {}\n", e.what());
    return gate::kExitInternal;
  }
  fmt::print("{}", reporting::to_text(doc));
  const std::optional<ExecKernel::CallTimes> call_times = source->exec_call_times();
  source.reset();
  end_strays(a.quiet);
  if (auto t = call_times; t && (*t += worker_times).first_calls > 0) {
    fmt::print("exec call time{}: {} first calls of a shape (compilation) {:.1f} s, {} other calls {:.1f} s\n",
               jobs > 1 ? " (summed over the workers)" : "", t->first_calls, t->first_seconds,
               t->other_calls, t->other_seconds);
  }
  if (g_cancel.load()) fmt::print(stderr, "attncheck: interrupted: the reports hold what was decided\n");
  try {
    if (!a.report_dir.empty()) {
      reporting::write_reports(doc, a.report_dir);
      if (!a.quiet) fmt::print(stderr, "reports written to {}/ (report.json, summary.md, report.html)\n",
                               a.report_dir);
    }
    if (!a.junit.empty()) reporting::write_file(a.junit, reporting::to_junit(doc));
    if (corpus) {  // every counterexample and warning of the run, for the next runs to replay first
      const std::vector<std::string> added = gate::store_corpus(doc, a.corpus);
      if (!a.quiet)
        fmt::print(stderr, "corpus {}: {} new entr{} (it held {})\n", a.corpus, added.size(),
                   added.size() == 1 ? "y" : "ies", corpus->entries.size());
    }
  } catch (const std::runtime_error &e) {
    return usage_error(e.what());
  }
  const bool nothing_owned = shard && std::all_of(doc.runs.begin(), doc.runs.end(), [](const reporting::Run &r) {
    return r.report.properties.empty();
  });
  return nothing_owned ? gate::kExitPass : gate::exit_code(doc, a.strict, g_cancel.load());
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
  cmd->add_option("--shard", args->shard,
                  "Check the I-th of N slices of the campaign (I/N, 1-based; default: ATTNCHECK_SHARD, or the index and "
                  "count of a Bazel/GTest, Slurm array or Kubernetes Indexed Job run) and write its partial report to "
                  "--report-dir; `attncheck merge` joins the N into the unsharded run's report");
  cmd->add_flag("--worker", args->worker)->group("");  // internal: a worker process of --jobs (cli/jobs.h)
  cmd->callback([args, &action] { action = [args] { return run_check(*args); }; });
}

}  // namespace attncheck::cli
