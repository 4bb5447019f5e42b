// A child process run with /bin/sh -c, in its own process group, with pipes on stdin, stdout and stderr: line
// I/O with deadlines, stderr forwarded line by line and its tail kept, and a stop that leaves no stray process.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <deque>
#include <functional>
#include <string>
#include <string_view>

namespace attncheck::exec_detail {

using Clock = std::chrono::steady_clock;

class ChildProcess {
 public:
  using StderrSink = std::function<void(std::string_view)>;
  /// Starts `/bin/sh -c command`; throws std::system_error when the pipes or the spawn fail.
  ChildProcess(const std::string &command, StderrSink sink);
  /// stop()s the child.
  ~ChildProcess();
  ChildProcess(const ChildProcess &) = delete;
  ChildProcess &operator=(const ChildProcess &) = delete;

  enum class Read { line, timeout, eof, too_long };
  /// The next stdout line (LF removed, and a CR before it); forwards stderr lines while it waits. On eof the rest
  /// of stderr is drained and the exit awaited briefly (exit_description() then says how it ended).
  Read read_line(std::string &line, Clock::time_point deadline);
  /// True when stdout holds data nobody asked for (checked between requests).
  bool has_unread_output();
  /// Writes `line` + LF; false when the child no longer reads its stdin (EPIPE; no SIGPIPE reaches us).
  bool write_line(std::string_view line);
  void close_stdin();
  /// Waits until the child has exited (not reaped) or the deadline passes; true when it has exited.
  bool wait_exit(Clock::time_point deadline);
  /// Sends `quit`-less termination: SIGTERM to the process group, SIGKILL after a grace period, then reaps.
  void stop();
  /// Closes stdin, waits up to `grace` for a voluntary exit, then stop()s.
  void finish(std::chrono::milliseconds grace);

  pid_t pid() const { return pid_; }
  bool exited() const { return exited_; }
  /// Exit status when it exited normally, else -1.
  int exit_status() const { return exit_code_; }
  /// "exited with status 3", "was killed by signal 9 (Killed)", "is still running".
  std::string exit_description() const;
  /// The last non-empty stderr line, or "".
  std::string last_stderr_line() const;

 private:
  void on_stderr_bytes(const char *p, std::size_t n);
  void flush_stderr_partial();
  /// Reads what stdout/stderr have now, waiting at most until `deadline`; false when stdout reached EOF.
  bool pump(Clock::time_point deadline);
  void drain_stderr(Clock::time_point deadline);

  pid_t pid_ = -1;
  int in_ = -1, out_ = -1, err_ = -1;  // parent's ends: child's stdin (write), stdout (read), stderr (read)
  bool exited_ = false, reaped_ = false;
  int exit_code_ = -1, exit_signal_ = 0;
  std::string out_buf_, err_buf_;
  std::deque<std::string> err_tail_;
  StderrSink sink_;
  /// stderr passed to the sink so far, and dropped past kMaxForwardedStderr (said once, at stop).
  std::size_t forwarded_ = 0, dropped_ = 0;
};

}  // namespace attncheck::exec_detail
