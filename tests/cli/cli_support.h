// Helpers of the CLI end-to-end tests: run a command line, capturing stdout and stderr, and check usage errors.
#pragma once

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace cli_test {

struct Run {
  int status = -1;  ///< exit status; −1 when the command did not exit normally (e.g. killed by a signal)
  std::string out, err;
};

/// Runs a shell command line, capturing stdout and stderr separately.
inline Run run(const std::string &args) {
  char err_template[] = "/tmp/attncheck-cli-test-XXXXXX";
  const int fd = mkstemp(err_template);
  REQUIRE(fd >= 0);
  close(fd);
  const std::string err_file = err_template;
  const std::string cmd = args + " 2>" + err_file;
  Run r;
  FILE *p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf{};
  std::size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::ifstream f(err_file);
  std::stringstream ss;
  ss << f.rdbuf();
  r.err = ss.str();
  std::remove(err_file.c_str());
  return r;
}

/// The attncheck command line with `args`.
inline std::string attncheck(const std::string &args) { return std::string(ATTNCHECK_EXE) + " " + args; }

/// Exit 2 with exactly one line on stderr that contains `needle`.
inline void require_usage_error(const Run &r, const std::string &needle) {
  INFO("stderr: " << r.err);
  REQUIRE(r.status == 2);
  REQUIRE(r.err.find(needle) != std::string::npos);
  REQUIRE(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

}  // namespace cli_test
