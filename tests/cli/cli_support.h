// Helpers of the CLI end-to-end tests: run a command line, capturing stdout and stderr, and check usage errors.
#pragma once

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>

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

/// A fresh directory under /tmp, removed with everything in it at scope exit.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char name[] = "/tmp/attncheck-cli-test-XXXXXX";
    REQUIRE(mkdtemp(name) != nullptr);
    path = name;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
  std::string operator/(const std::string &file) const { return (path / file).string(); }
};

/// The bytes of a file ("" when it cannot be read).
inline std::string slurp(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// The report.json at `path` without its timing, the last top-level key (reporting::content_of): what the same seed
/// makes byte-identical.
inline std::string report_content(const std::string &path) {
  const std::string text = slurp(path);
  const std::size_t timing = text.rfind(",\n  \"timing\": ");
  return timing == std::string::npos ? text : text.substr(0, timing) + "\n}\n";
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
