// Both cores: `attncheck check --jobs N` runs its (kernel, dtype, property) items on N worker processes — this
// executable re-run with the same arguments plus --worker, each with its own kernel source (sandbox server or exec
// child) — handing the next item to whichever worker finishes first. Each property's cases depend only on the
// seed, its id and the dtype, so the merged reports are the serial run's, byte for byte (unless a time budget
// binds). Each worker's kernel threads get cores / N (OMP_NUM_THREADS, ATTNCHECK_THREADS, unless already set).
//
// Parent → worker, one line per item:   item <index> <kernel index> <dtype> <property> <budget ms> <end ms>
// Worker → parent, per item:             done <index> <bytes>\n<report.json of a one-property run, <bytes> long>
#pragma once

#include "attncheck/dtype.h"
#include "attncheck/report_io.h"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace attncheck::cli {

/// One property of one kernel and dtype, with its share of the time budget.
struct WorkItem {
  std::size_t kernel = 0;  ///< index among the check's kernels
  Dtype dtype = Dtype::f32;
  std::string property;
  std::chrono::milliseconds budget{0};  ///< at most this; at dispatch, its share of what is left of its run's budget
  /// The end of its (kernel, dtype) run's budget, as if the runs went one after another: the item never runs past
  /// it, and a failure's shrinking may borrow up to it. Steady clock, system-wide on Linux.
  std::chrono::steady_clock::time_point end;
};

/// Runs `items` on `jobs` workers started as `worker_command` (argv, the executable first). Returns one Run per item,
/// in item order; `done[i]` says whether item i ran (not when cancelled first). `on_done(i, run)` is called as item i
/// finishes.
/// Throws std::runtime_error (one line) when a worker cannot be started or breaks the protocol.
std::vector<reporting::Run> run_on_workers(const std::vector<std::string> &worker_command,
                                           const std::vector<WorkItem> &items, int jobs,
                                           const std::atomic<bool> &cancel, std::vector<bool> &done,
                                           const std::function<void(std::size_t, const reporting::Run &)> &on_done);

/// The worker's side: reads items from stdin until it closes, runs each with `run_item` and writes its report.
int serve_items(const std::function<reporting::Run(const WorkItem &)> &run_item);

}  // namespace attncheck::cli
