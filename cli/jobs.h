// Both cores: `attncheck check --jobs N` runs its (kernel, dtype, property) items on N worker processes — this
// executable re-run with the same arguments plus --worker, each with its own kernel source (sandbox server or exec
// child) — handing the next item to whichever worker finishes first. Each property's cases depend only on the
// seed, its id and the dtype, so the merged reports are the serial run's, byte for byte (unless the time guard
// binds). Each worker's kernel threads get cores / N (OMP_NUM_THREADS, ATTNCHECK_THREADS, unless already set).
//
// Parent → worker, one line per item:   item <index> <kernel index> <dtype> <property> <end ms> <hung>…
// Worker → parent, per item:             done <index> <bytes> <hung>…\n<report.json of a one-property run, <bytes> long>
//                  as it exits:           times <first calls> <their seconds> <other calls> <their seconds>  (exec)
// Each <hung> is a shape B,Hq,Hkv,Lq,Lk,D,Dv whose calls hung, were too slow or hit the memory limit
// (KernelRunState::hung): the parent collects the workers' and hands them on, so that one worker's hang spares the
// others the wait.
#pragma once

#include "attncheck/dtype.h"
#include "attncheck/exec_kernel.h"
#include "attncheck/report_io.h"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace attncheck::cli {

/// One property of one kernel and dtype.
struct WorkItem {
  std::size_t kernel = 0;  ///< index among the check's kernels
  Dtype dtype = Dtype::f32;
  std::string property;
  /// The end of its (kernel, dtype) run's time guard, as if the runs went one after another: the item never runs
  /// past it (CheckOptions::end). Steady clock, system-wide on Linux.
  std::chrono::steady_clock::time_point end;
  /// Shapes of this kernel whose calls hung, were too slow or hit the memory limit in any worker so far.
  std::vector<Shape> hung;
};

/// Adds to `shapes` each shape of `more` it does not hold yet.
void merge_shapes(std::vector<Shape> &shapes, const std::vector<Shape> &more);

/// What a worker sends back for an item: its one-property run, and the shapes of that kernel that hung in it so far.
struct ItemResult {
  reporting::Run run;
  std::vector<Shape> hung;
};

/// Called as item `index` finishes.
using OnItemDone = std::function<void(std::size_t index, const reporting::Run &run)>;

/// Runs `items` on `jobs` workers started as `worker_command` (argv, the executable first). Returns one Run per item,
/// in item order; `done[i]` says whether item i ran (not when cancelled first). `times` receives the workers' exec
/// kernels' call times, summed.
/// Throws std::runtime_error (one line) when a worker cannot be started or breaks the protocol.
std::vector<reporting::Run> run_on_workers(const std::vector<std::string> &worker_command,
                                           const std::vector<WorkItem> &items, int jobs,
                                           const std::atomic<bool> &cancel, std::vector<bool> &done,
                                           const OnItemDone &on_done, ExecKernel::CallTimes &times);

/// The worker's side: reads items from stdin until it closes, runs each with `run_item` and writes its report.
/// As stdin closes, it reports `call_times()` (an exec kernel's; nullopt: none).
int serve_items(const std::function<ItemResult(const WorkItem &)> &run_item,
                const std::function<std::optional<ExecKernel::CallTimes>()> &call_times);

}  // namespace attncheck::cli
