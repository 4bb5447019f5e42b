// The check sequence, written once for every front: validate what was asked, resolve each kernel's contract, prepare
// the outputs, read the corpus, run (here, or on a front's workers through one seam), assemble and settle each run's
// report, write the outputs, store the corpus, and the exit code. The fronts convert their arguments and kernels and
// print; a run report is assembled in one place (assemble_run, check.h): by check() for a serial run, by
// Check::run for items run elsewhere, by merge_shards for a campaign's shards.
//
//   gate::CheckRequest rq;                      // the plan, dtypes, contract overrides, strict, quiet, shard
//   rq.plan.profile = gate::find_profile("quick");
//   gate::Kernels kernels{{&my_kernel}, {"causal=top-left"}, {}};
//   const gate::CheckResult r = gate::run(rq, kernels, {.report_dir = "reports"}, &cancel);
//   return r.exit_code;                         // 0 pass, 1 counterexample, 3 inconclusive, 4 attncheck's own
#pragma once

#include "attncheck/corpus.h"
#include "attncheck/gate.h"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace attncheck::gate {

/// Where a check's results go; "" for none.
struct Outputs {
  std::string report_dir;  ///< report.json, summary.md, report.html
  std::string junit;       ///< JUnit XML
  std::string corpus;      ///< a counterexample corpus (corpus.h): its cases replayed first, the run's added after
};

/// The kernels of a check, as a front found them.
struct Kernels {
  std::vector<const attncheck_kernel *> list;
  std::vector<std::string> declared;  ///< each one's declared contract (contract.h text; "" for the defaults)
  reporting::KernelSource source;
};

/// A slice of a campaign: the (kernel, dtype, property) items i with i mod count = index − 1, in report order.
struct ShardRequest {
  int index = 1, count = 1;
  std::string source;  ///< where the front found it ("--shard", an environment variable), for its messages
};

/// A check as a front asks for it.
struct CheckRequest {
  Request plan;
  std::vector<std::string> dtypes;  ///< f32, f16, bf16; empty: all three
  std::string contract;             ///< overrides each kernel's declaration (contract.h text)
  bool strict = false;              ///< warnings fail the gate too
  bool quiet = false;               ///< no progress on stderr
  std::optional<ShardRequest> shard;
};

/// What stops a check before or after its run, in one line: `exit_code` is kExitUsage (what the front was given:
/// fix the arguments) or kExitInternal; `input` names the argument it concerns ("contract", "corpus"; "" for none),
/// which a front spells its own way (the CLI's `--corpus: …`, Python's `corpus: …`).
struct RunError : std::runtime_error {
  RunError(int exit_code, std::string input, const std::string &what)
      : std::runtime_error(what), exit_code(exit_code), input(std::move(input)) {}
  int exit_code;
  std::string input;
};

/// One (kernel, dtype, property) item of a check, for a front that runs items elsewhere (the CLI's --jobs).
struct Item {
  std::size_t kernel = 0;  ///< index into Kernels::list
  Dtype dtype = Dtype::f32;
  std::string property;
  /// The end of its run's guard, as if the runs went one after another (CheckOptions::end).
  std::chrono::steady_clock::time_point end;
};
/// Runs `items` elsewhere: each one's property line, in item order; nullopt for one that never started (the check
/// was cancelled first). Throws std::runtime_error (one line) when it cannot.
using ItemRunner = std::function<std::vector<std::optional<PropertyReport>>(const std::vector<Item> &items)>;

/// What a front adds to the sequence; each may be empty.
struct Hooks {
  std::function<void()> start;  ///< once everything is ready, before the first case
  /// A run's options before it starts (a front's own: Python leaves out a property its process died in).
  std::function<void(CheckOptions &, std::size_t kernel, Dtype)> adjust;
  ItemRunner items;  ///< runs the items elsewhere; empty: one run after another here, with a progress bar
  /// After the last case, before anything is written (a front stops its kernels, prints, adds its notes).
  std::function<void(reporting::Document &)> finish;
};

struct CheckResult {
  reporting::Document doc;
  int exit_code = kExitPass;
  std::vector<std::string> corpus_added;  ///< the corpus entries the run added (Outputs::corpus)
  std::size_t corpus_held = 0;            ///< the entries it held before
};

/// A check made ready: its request validated, each kernel's contract resolved, the outputs' directories prepared
/// and the corpus read. Throws RunError.
class Check {
 public:
  /// `part`: a part of another process's check (a worker of --jobs): nothing is prepared, and the corpus is read as
  /// that check read it (never created); run() is not called.
  Check(const CheckRequest &request, const Kernels &kernels, const Outputs &outputs,
        const std::atomic<bool> *cancel, bool part = false);

  const std::vector<Dtype> &dtypes() const { return dtypes_; }
  /// The options of kernel n's run in dt: the plan, its contract, its corpus cases, this shard's properties.
  CheckOptions options(std::size_t n, Dtype dt);
  /// What kernel n's runs learnt so far, shared across its dtypes and properties.
  KernelRunState &state(std::size_t n) { return states_[n]; }

  /// Runs every kernel in every dtype, assembles the document, writes the outputs and stores the corpus (RunError
  /// when they cannot be written).
  CheckResult run(const Hooks &hooks);

 private:
  std::vector<reporting::Run> run_items(const Hooks &hooks);

  CheckRequest request_;
  Kernels kernels_;
  Outputs outputs_;
  const std::atomic<bool> *cancel_;
  std::vector<Dtype> dtypes_;
  std::vector<KernelContract> contracts_;
  std::vector<std::string> shard_ids_;  ///< every run's properties in report order (a shard's numbering)
  std::optional<Corpus> corpus_;
  std::vector<KernelRunState> states_;
};

/// The whole sequence: Check(request, kernels, outputs, cancel).run(hooks).
CheckResult run(const CheckRequest &request, const Kernels &kernels, const Outputs &outputs,
                const std::atomic<bool> *cancel, const Hooks &hooks = {});

/// resolve_contract(declared, overrides) (contract.h); a contract that does not parse is a RunError of kExitUsage
/// for the input "contract".
KernelContract contract_of(std::string_view declared, std::string_view overrides = {});

/// Storage dtypes by name (f32, f16, bf16); every one for none. RunError naming an unknown one.
std::vector<Dtype> dtypes_of(const std::vector<std::string> &names);
/// RunError naming an id no property has, with the ids there are.
void check_property_ids(const std::vector<std::string> &ids);

/// The whole campaign from the partial reports of its shards (each index 1..N once, the same check): runs in order,
/// each property from the shard that owns it, assembled as the unsharded check assembles it — the document it
/// writes, byte for byte. Throws reporting::ReportError naming what does not fit (a missing or repeated shard,
/// another check's report, a property a shard lacks).
reporting::Document merge_shards(const std::vector<reporting::Document> &shards);

}  // namespace attncheck::gate
