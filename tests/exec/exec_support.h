// Helpers of the exec tests: the interpreters and scripts CMake found and quiet ExecOptions (random problems and
// outputs come from tests/support's kernel_testkit.h).
#pragma once

#include "attncheck/exec_kernel.h"
#include "attncheck/kernel_call.h"
#include "attncheck/problem.h"
#include "kernel_testkit.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iterator>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace exect {

using namespace attncheck;
using namespace attncheck::testkit;

/// `python3 script args` as a shell command, paths quoted.
inline std::string python_command(const char *python, const char *script, const std::string &args = "") {
  std::string cmd = shell_quote(python) + " " + shell_quote(script);
  if (!args.empty()) cmd.append(" ").append(args);
  return cmd;
}
/// A misbehaving peer (tests/exec/peer.py MODE ARG).
inline std::string peer(const std::string &mode, const std::string &arg = "") {
  std::string args = mode;
  if (!arg.empty()) args.append(" ").append(shell_quote(arg));
  return python_command(ATTNCHECK_TEST_PYTHON, ATTNCHECK_EXEC_PEER, args);
}
#if ATTNCHECK_HAVE_NUMPY
/// examples/exec/numpy_kernel.py with `args`.
inline std::string numpy_kernel(const std::string &args = "") {
  return python_command(ATTNCHECK_NUMPY_PYTHON, ATTNCHECK_NUMPY_KERNEL, args);
}
#endif

/// Timeout of the tests that wait for a peer that never answers.
inline constexpr std::chrono::milliseconds kShortTimeout{1000};

/// Options that collect the child's stderr instead of printing it.
struct Quiet {
  std::shared_ptr<std::vector<std::string>> lines = std::make_shared<std::vector<std::string>>();
  std::shared_ptr<std::mutex> mu = std::make_shared<std::mutex>();
  /// `timeout` for every call; the start (a Python interpreter importing NumPy: seconds on a loaded machine) gets
  /// `start_timeout`, by default never less than kStartTimeout, so that only a test that means it sees it bind.
  static constexpr std::chrono::milliseconds kStartTimeout{30'000};
  ExecOptions options(std::chrono::milliseconds timeout = std::chrono::milliseconds(30'000),
                      std::optional<std::chrono::milliseconds> start_timeout = std::nullopt) const {
    ExecOptions o;
    o.call_timeout = o.first_call_timeout = timeout;
    o.start_timeout = start_timeout.value_or(std::max(timeout, kStartTimeout));
    o.on_stderr = [l = lines, m = mu](std::string_view s) {
      std::lock_guard lock(*m);
      l->emplace_back(s);
    };
    return o;
  }
};

}  // namespace exect
