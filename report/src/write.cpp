// Report files: report.json, summary.md and report.html written into one directory, and report.json read back.
#include "common.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace attncheck::reporting {

namespace {

[[noreturn]] void cannot_write(const std::filesystem::path &dir, const std::string &reason) {
  throw std::runtime_error("cannot write report directory '" + dir.string() + "': " + reason);
}

/// The permissions open(O_CREAT) asks for before the umask.
constexpr mode_t kFileMode = 0666;

/// The process's umask, read without umask(2)'s set-and-restore (which would race with other threads' files).
mode_t process_umask() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.starts_with("Umask:")) return static_cast<mode_t>(std::stoul(line.substr(6), nullptr, 8));
  return 022;  // the usual one, where /proc says nothing
}

}  // namespace

void prepare_report_dir(const std::filesystem::path &dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) cannot_write(dir, ec.message());
  if (!std::filesystem::is_directory(dir, ec)) cannot_write(dir, "not a directory");
  // Writable: a probe file, removed at once.
  const std::filesystem::path probe = dir / ".attncheck-write-test";
  {
    std::ofstream f(probe, std::ios::binary | std::ios::trunc);
    if (!f) cannot_write(dir, std::strerror(errno));
  }
  std::filesystem::remove(probe, ec);
}

Document read_report(const std::filesystem::path &path, std::string_view what_to_do) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw ReportError("cannot read '" + path.string() + "': " + std::string(what_to_do));
  std::stringstream text;
  text << f.rdbuf();
  try {
    return from_json(text.str());
  } catch (const ReportError &e) {
    // The parser names the file generically; name the one read.
    std::string msg = e.what();
    const std::string generic = "report.json:";
    if (msg.starts_with(generic)) msg.replace(0, generic.size(), "'" + path.string() + "':");
    throw ReportError(msg);
  }
}

void write_file(const std::filesystem::path &path, const std::string &text) {
  auto fail = [&](const std::string &reason) {
    throw std::runtime_error("cannot write '" + path.string() + "': " + reason);
  };
  // A fresh file beside it, renamed over it: whatever was at `path` (a file, a link planted there) is replaced, not
  // written through, and a reader sees the old or the new text, never half of one.
  std::string temp = path.string() + ".XXXXXX";
  const int fd = mkostemp(temp.data(), O_CLOEXEC);
  if (fd < 0) fail(std::strerror(errno));
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = errno;
      ::close(fd);
      ::unlink(temp.c_str());
      fail(std::string("write failed (") + std::strerror(e) + ")");
    }
    done += static_cast<std::size_t>(n);
  }
  ::fchmod(fd, kFileMode & ~process_umask());  // as open() would have made it (mkostemp makes it 0600)
  if (::close(fd) != 0 || ::rename(temp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(temp.c_str());
    fail(std::strerror(e));
  }
}

void write_reports(const Document &doc, const std::filesystem::path &dir) {
  prepare_report_dir(dir);
  // Rendered before anything is written, so a writer's exception leaves no half-written set behind.
  const std::string json = to_json(doc), markdown = to_markdown(doc), html = to_html(doc);
  write_file(dir / "report.json", json);
  write_file(dir / "summary.md", markdown);
  write_file(dir / "report.html", html);
}

}  // namespace attncheck::reporting
