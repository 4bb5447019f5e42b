// A crash in process leaves a trace: before each in-process call the case in progress (the engine's
// case_in_progress) is formatted into a buffer, and a fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) writes
// it — with write(2), the one thing a signal handler may do — to stderr and to <report dir>/crash.txt, then dies as
// it would have (the handler before it, Python's faulthandler say, runs next). The next check with that report
// directory reports the property it died in as failed, naming the case, without calling it again (crash::report).
#pragma once

#include "attncheck/check.h"
#include "attncheck/report_io.h"

#include <optional>
#include <string>

namespace attncheck::python::crash {

/// Formats the breadcrumb of a call of `kernel` (outside any signal handler: snprintf is not async-signal-safe).
void before_call(const std::string &kernel, bool backward);

/// Installs the handlers for one in-process check (and opens <report_dir>/crash.txt); restores them when it ends,
/// removing the file: a check that ended left no crash to report.
class Trace {
 public:
  explicit Trace(const std::string &report_dir);
  ~Trace();
  Trace(const Trace &) = delete;
  Trace &operator=(const Trace &) = delete;

 private:
  std::string path_;
};

/// A crash the previous check with `report_dir` left (crash.txt, removed once read): its first line, and the kernel,
/// property and dtype it died in.
struct Previous {
  std::string line, kernel, property, dtype;
};
std::optional<Previous> previous(const std::string &report_dir);

/// The check's run of `kernel` in `dt` leaves out the property the previous check died in (it would die again).
void leave_out(CheckOptions &opt, const Previous &p, const std::string &kernel, Dtype dt);

/// That property, in the report of its run, failed: the previous check died in it (the crumb names the case).
void report(reporting::Document &doc, const Previous &p);

}  // namespace attncheck::python::crash
