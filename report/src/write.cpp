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

[[noreturn]] void cannot_write_file(const std::filesystem::path &path, const std::string &reason) {
  throw std::runtime_error("cannot write '" + path.string() + "': " + reason);
}

/// Writes all of `text` to `fd`; false with errno set when it cannot.
bool write_all(int fd, const std::string &text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

/// A fresh file beside `path`, renamed over it: whatever was there (a file, a link a kernel planted) is replaced, not
/// written through, and a reader sees the old or the new text, never half of one.
void replace_file(const std::filesystem::path &path, const std::string &text) {
  std::string temp = path.string() + ".XXXXXX";
  const int fd = mkostemp(temp.data(), O_CLOEXEC);
  if (fd < 0) cannot_write_file(path, std::strerror(errno));
  if (!write_all(fd, text)) {
    const int e = errno;
    ::close(fd);
    ::unlink(temp.c_str());
    cannot_write_file(path, std::string("write failed (") + std::strerror(e) + ")");
  }
  ::fchmod(fd, kFileMode & ~process_umask());  // as open() would have made it (mkostemp makes it 0600)
  if (::close(fd) != 0 || ::rename(temp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(temp.c_str());
    cannot_write_file(path, std::strerror(e));
  }
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
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return replace_file(path, text);
  // What the user pointed at: a link (`--junit /dev/stdout`), a device or a pipe is written through. Opened without
  // blocking: a pipe nobody reads is an error at once, not a hang.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_CLOEXEC, kFileMode);
  if (fd < 0) cannot_write_file(path, errno == ENXIO ? "a pipe nobody reads" : std::strerror(errno));
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  const bool ok = write_all(fd, text);
  const int e = errno;
  ::close(fd);
  if (!ok) cannot_write_file(path, std::string("write failed (") + std::strerror(e) + ")");
}

void write_reports(const Document &doc, const std::filesystem::path &dir) {
  prepare_report_dir(dir);
  // Rendered before anything is written, so a writer's exception leaves no half-written set behind.
  const std::string json = to_json(doc), markdown = to_markdown(doc), html = to_html(doc);
  replace_file(dir / "report.json", json);
  replace_file(dir / "summary.md", markdown);
  replace_file(dir / "report.html", html);
}

}  // namespace attncheck::reporting
