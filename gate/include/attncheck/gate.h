// The gate: what its two fronts — the `attncheck check` command (cli/) and the Python module (python/) — share. The
// check sequence itself is in run.h (gate::run); here are its parts: the profiles, each (kernel, dtype) run's
// CheckOptions, the serial run with its progress bar, and the exit code. Replay is in replay.h, the search for the
// contract a kernel satisfies in infer.h, the corpus in corpus.h, contract resolution next to the parser
// (resolve_contract, contract.h), the verdict line and the table with the other renderings (report_io.h: run_line,
// to_text). The fronts only read their arguments, find kernels and print.
#pragma once

#include "attncheck/check.h"
#include "attncheck/report_io.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attncheck::gate {

/// Documented exit codes (README, `attncheck --help`).
enum ExitCode : int {
  kExitPass = 0,          ///< every property passed
  kExitCounterexample = 1, ///< a counterexample was found
  kExitUsage = 2,         ///< usage or configuration error
  kExitInconclusive = 3,  ///< too few cases could run
  kExitInternal = 4,      ///< internal error of attncheck
};

/// A profile: a plan (what is checked, drawn from the seed) and a guard (the wall-clock limit that bounds what a
/// misbehaving kernel costs: CheckOptions::time_budget).
struct ProfileSpec {
  std::string_view name;
  int cases;                    ///< cases per property
  std::chrono::seconds budget;  ///< the guard, per kernel and dtype
};
/// Each guard is at least 4× what its plan takes the slowest bundled run (naive float32) on a quiet 2-core machine,
/// with one job: a runner 4× oversubscribed still decides every property (SPEC.md §7, the plan and the guard).
/// quick: seconds, for pre-commit; default: a minute or two per kernel and dtype; thorough: tens of minutes.
inline constexpr ProfileSpec kProfiles[] = {
    {"quick", 15, std::chrono::seconds(120)},
    {"default", 100, std::chrono::seconds(600)},
    {"thorough", 1000, std::chrono::seconds(7200)},
};
/// The profile named `name`; nullptr for another name.
const ProfileSpec *find_profile(std::string_view name);

/// What a check asks for, whichever front it came from.
struct Request {
  std::vector<std::string> properties;  ///< ids; empty = all
  const ProfileSpec *profile = &kProfiles[1];
  std::optional<int> cases;           ///< overrides the profile's
  std::optional<double> time_budget;  ///< seconds per kernel and dtype; overrides the profile's
  std::uint64_t seed = 1;
  std::string shape_pool = "auto";    ///< "auto" or a pool size ("0": off)
  std::uint64_t memory_limit_mib = 4096;
  /// Gather each counterexample's evidence (the report files show it; not after an interruption, which wants the
  /// reports now).
  bool evidence = false;
  /// Production shapes every property that can take them runs on too (CheckOptions::shapes; shapes.h reads them).
  std::vector<DeclaredShape> shapes;
};

/// The CheckOptions of one (kernel, dtype) run, sharing `state` with the kernel's other runs (its dtypes, a
/// worker's items); `state` and `cancel` must outlive the run.
CheckOptions run_options(const Request &request, Dtype dt, const KernelContract &contract,
                          KernelRunState &state, const std::atomic<bool> *cancel);

/// The gate's exit code: 1 for a failure (a warning too under `strict`), else 4 when attncheck's own check failed
/// (Verdict::error), else 3 when something stayed undecided, the check was cancelled or nothing ran, else 0.
int exit_code(const reporting::Document &doc, bool strict, bool cancelled);

/// Runs `kernels` × `dtypes` one after another with a progress bar on stderr (a bar on a terminal, lines otherwise;
/// nothing when `quiet`). A run whose properties an options_for leaves empty under `sharded` has none (its shard owns
/// none of them): the run is listed, with no property.
std::vector<reporting::Run> check_serially(const std::vector<const attncheck_kernel *> &kernels,
                                           const std::vector<Dtype> &dtypes,
                                           const std::function<CheckOptions(std::size_t, Dtype)> &options_for,
                                           const reporting::KernelSource &src, std::string_view profile,
                                           bool quiet, bool strict, bool sharded = false);

/// A run's report before any property: kernel, dtype, contract, profile, seed and cases from `opt`.
RunReport run_header(const attncheck_kernel &kernel, const CheckOptions &opt);

}  // namespace attncheck::gate
