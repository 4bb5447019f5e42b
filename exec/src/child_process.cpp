#include "child_process.h"

#include "attncheck/containment.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <system_error>
#include <utility>
#include <thread>

extern char **environ;

namespace attncheck::exec_detail {

namespace {

/// A stdout line longer than this is a protocol violation (spec/EXEC_PROTOCOL.md §2).
constexpr std::size_t kMaxLineBytes = 65536;
/// Bytes per read(2).
constexpr std::size_t kReadChunk = 65536;
/// stderr lines kept for messages.
constexpr std::size_t kStderrTailLines = 20;
/// stderr of one child passed on to the sink; the rest is counted (a kernel cannot flood the gate's log).
constexpr std::size_t kMaxForwardedStderr = 64 * 1024;
/// After stdout's EOF: how long to collect the rest of stderr, and to wait for the exit status.
constexpr auto kDrainGrace = std::chrono::milliseconds(500);
constexpr auto kExitGrace = std::chrono::milliseconds(1000);
/// Between SIGTERM and SIGKILL.
constexpr auto kTermGrace = std::chrono::milliseconds(1000);
/// Exit status of a child whose exec() of /bin/sh failed (as the shell's for a command not found).
constexpr int kExecFailed = 127;
/// Polling step while waiting for an exit (waitid has no timeout).
constexpr auto kExitPollStep = std::chrono::milliseconds(5);

int ms_until(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

void close_fd(int &fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

[[noreturn]] void throw_errno(const char *what) { throw std::system_error(errno, std::generic_category(), what); }

}  // namespace

ChildProcess::ChildProcess(const std::string &command, StderrSink sink) : sink_(std::move(sink)) {
  int pin[2], pout[2], perr[2];
  // O_CLOEXEC: the parent's ends must not leak into other children (a leaked stdin write end hides EOF).
  if (::pipe2(pin, O_CLOEXEC) != 0) throw_errno("pipe2");
  if (::pipe2(pout, O_CLOEXEC) != 0) {
    ::close(pin[0]), ::close(pin[1]);
    throw_errno("pipe2");
  }
  if (::pipe2(perr, O_CLOEXEC) != 0) {
    ::close(pin[0]), ::close(pin[1]), ::close(pout[0]), ::close(pout[1]);
    throw_errno("pipe2");
  }
  // fork() rather than posix_spawn(): the child enters the kernels' Landlock domain before it execs.
  const std::shared_ptr<const containment::Domain> domain = containment::kernel_domain();
  std::string sh = "/bin/sh", dash_c = "-c", cmd = command;
  char *argv[] = {sh.data(), dash_c.data(), cmd.data(), nullptr};
  int spawn_errno = 0;
  {
    const containment::SpawnLock lock;
    pid_ = ::fork();
    if (pid_ == 0) {
      // Only async-signal-safe calls until exec (the parent may have threads). Own process group: stop() reaches
      // helpers that `sh -c` starts. Default signal state: the parent may block or ignore SIGPIPE, a child must not
      // inherit that.
      domain->enter();  // first: the dup2()s below may overwrite the ruleset's descriptor
      for (auto [fd, target] : {std::pair{pin[0], STDIN_FILENO}, {pout[1], STDOUT_FILENO}, {perr[1], STDERR_FILENO}})
        fd == target ? ::fcntl(fd, F_SETFD, 0) : ::dup2(fd, target);  // dup2 clears close-on-exec, fcntl when it can't
      ::setpgid(0, 0);
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      for (int s : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT}) ::sigaction(s, &dfl, nullptr);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::execve(sh.c_str(), argv, environ);
      ::_exit(kExecFailed);
    }
    if (pid_ < 0) spawn_errno = errno;
    else containment::register_child(pid_);
  }
  if (pid_ > 0) ::setpgid(pid_, pid_);  // as the child does: whichever runs first
  ::close(pin[0]), ::close(pout[1]), ::close(perr[1]);
  in_ = pin[1], out_ = pout[0], err_ = perr[0];
  if (pid_ < 0) {
    close_fd(in_), close_fd(out_), close_fd(err_);
    throw std::system_error(spawn_errno, std::generic_category(), "fork");
  }
}

ChildProcess::~ChildProcess() { stop(); }

void ChildProcess::on_stderr_bytes(const char *p, std::size_t n) {
  err_buf_.append(p, n);
  std::size_t start = 0, nl;
  while ((nl = err_buf_.find('\n', start)) != std::string::npos) {
    std::string line = err_buf_.substr(start, nl - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    // A kernel cannot flood the gate: past kMaxForwardedStderr its lines are counted, not passed on.
    if (forwarded_ + line.size() < kMaxForwardedStderr) {
      forwarded_ += line.size() + 1;
      if (sink_) sink_(line);
    } else {
      dropped_ += line.size() + 1;
    }
    err_tail_.push_back(std::move(line));
    if (err_tail_.size() > kStderrTailLines) err_tail_.pop_front();
    start = nl + 1;
  }
  err_buf_.erase(0, start);
  if (err_buf_.size() > kMaxLineBytes) on_stderr_bytes("\n", 1);  // a huge unterminated line: cut it
}

void ChildProcess::flush_stderr_partial() {
  if (!err_buf_.empty()) on_stderr_bytes("\n", 1);
}

bool ChildProcess::pump(Clock::time_point deadline) {
  if (out_ < 0) return false;
  pollfd fds[2] = {{out_, POLLIN, 0}, {err_, POLLIN, 0}};
  const nfds_t n = err_ >= 0 ? 2 : 1;
  if (::poll(fds, n, ms_until(deadline)) < 0) {
    if (errno == EINTR) return true;
    throw_errno("poll");
  }
  char buf[kReadChunk];
  if (n == 2 && fds[1].revents) {
    const ssize_t r = ::read(err_, buf, sizeof buf);
    if (r > 0) on_stderr_bytes(buf, static_cast<std::size_t>(r));
    else if (r == 0 || errno != EINTR) close_fd(err_), flush_stderr_partial();
  }
  if (fds[0].revents) {
    const ssize_t r = ::read(out_, buf, sizeof buf);
    if (r > 0) out_buf_.append(buf, static_cast<std::size_t>(r));
    else if (r == 0 || errno != EINTR) {
      close_fd(out_);
      return false;
    }
  }
  return true;
}

void ChildProcess::drain_stderr(Clock::time_point deadline) {
  char buf[kReadChunk];
  while (err_ >= 0) {
    pollfd p{err_, POLLIN, 0};
    if (::poll(&p, 1, ms_until(deadline)) <= 0) return;  // a grandchild may still hold stderr open
    const ssize_t r = ::read(err_, buf, sizeof buf);
    if (r > 0) on_stderr_bytes(buf, static_cast<std::size_t>(r));
    else if (r == 0 || errno != EINTR) close_fd(err_), flush_stderr_partial();
  }
}

ChildProcess::Read ChildProcess::read_line(std::string &line, Clock::time_point deadline) {
  while (true) {
    const std::size_t nl = out_buf_.find('\n');
    if (nl != std::string::npos) {
      line = out_buf_.substr(0, nl);
      out_buf_.erase(0, nl + 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      return Read::line;
    }
    if (out_buf_.size() > kMaxLineBytes) return Read::too_long;
    if (out_ < 0) {
      drain_stderr(Clock::now() + kDrainGrace);
      wait_exit(Clock::now() + kExitGrace);
      return Read::eof;
    }
    if (Clock::now() >= deadline) return Read::timeout;
    pump(deadline);
  }
}

bool ChildProcess::has_unread_output() {
  if (out_ >= 0) {
    pollfd p{out_, POLLIN, 0};
    if (::poll(&p, 1, 0) > 0 && (p.revents & POLLIN)) pump(Clock::now());
  }
  return !out_buf_.empty();
}

bool ChildProcess::write_line(std::string_view line) {
  if (in_ < 0) return false;
  std::string data(line);
  data.push_back('\n');
  // EPIPE instead of SIGPIPE, without touching the process-wide disposition: block it on this thread and
  // consume the one our write raised.
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  sigset_t pending;
  sigpending(&pending);
  const bool was_pending = sigismember(&pending, SIGPIPE);
  bool ok = true;
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t w = ::write(in_, data.data() + done, data.size() - done);
    if (w > 0) {
      done += static_cast<std::size_t>(w);
    } else if (errno != EINTR) {
      ok = false;
      if (errno == EPIPE && !was_pending) {
        const timespec zero{0, 0};
        sigtimedwait(&pipe_set, nullptr, &zero);
      }
      break;
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return ok;
}

void ChildProcess::close_stdin() { close_fd(in_); }

bool ChildProcess::wait_exit(Clock::time_point deadline) {
  while (!exited_ && pid_ > 0) {
    siginfo_t si{};
    // WNOWAIT: the child stays a zombie, so its pid (= process group id) cannot be reused before stop() is done.
    if (::waitid(P_PID, static_cast<id_t>(pid_), &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid_) {
      exited_ = true;
      if (si.si_code == CLD_EXITED) exit_code_ = si.si_status;
      else exit_signal_ = si.si_status;
      break;
    }
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(kExitPollStep);
  }
  return exited_;
}

void ChildProcess::stop() {
  if (pid_ <= 0 || reaped_) return;
  close_fd(in_);
  if (!exited_) {
    ::kill(-pid_, SIGTERM);
    if (!wait_exit(Clock::now() + kTermGrace)) {
      ::kill(-pid_, SIGKILL);
      wait_exit(Clock::time_point::max());
    }
  }
  ::kill(-pid_, SIGKILL);  // stragglers of the group; safe while the leader is an unreaped zombie
  if (dropped_ > 0 && sink_) {
    sink_("... " + std::to_string(dropped_) + " more bytes of stderr dropped (attncheck passes on " +
          std::to_string(kMaxForwardedStderr / 1024) + " KiB per child)");
    dropped_ = 0;
  }
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  containment::forget_child(pid_);
  containment::reap_orphans();  // what the kernel left outside its group, when this process adopts them
  close_fd(out_), close_fd(err_);
}

void ChildProcess::finish(std::chrono::milliseconds grace) {
  close_stdin();
  const auto deadline = Clock::now() + grace;
  // Keep reading (and discarding) its output meanwhile so that a chatty exit cannot block on a full pipe.
  while (!wait_exit(Clock::now()) && Clock::now() < deadline) {
    if (out_ >= 0) {
      pump(std::min(deadline, Clock::now() + kExitPollStep));
      out_buf_.clear();
    } else {
      wait_exit(deadline);
    }
  }
  drain_stderr(Clock::now());
  stop();
}

std::string ChildProcess::exit_description() const {
  if (!exited_) return "is still running";
  if (exit_signal_) {
    const char *name = ::strsignal(exit_signal_);
    return "was killed by signal " + std::to_string(exit_signal_) + (name ? " (" + std::string(name) + ")" : "");
  }
  return "exited with status " + std::to_string(exit_code_);
}

std::string ChildProcess::last_stderr_line() const {
  for (auto it = err_tail_.rbegin(); it != err_tail_.rend(); ++it)
    if (it->find_first_not_of(" \t") != std::string::npos) return *it;
  return "";
}

}  // namespace attncheck::exec_detail
