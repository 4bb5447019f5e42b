// write_reports: report.json, summary.md and report.html into one directory.
#include "common.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

namespace attncheck::reporting {

namespace {

[[noreturn]] void cannot_write(const std::filesystem::path &dir, const std::string &reason) {
  throw std::runtime_error("cannot write report directory '" + dir.string() + "': " + reason);
}

void write_file(const std::filesystem::path &dir, const char *name, const std::string &text) {
  const std::filesystem::path path = dir / name;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) cannot_write(dir, std::string(name) + ": " + std::strerror(errno));
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  f.close();
  if (!f) cannot_write(dir, std::string(name) + ": write failed (" + std::strerror(errno) + ")");
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

void write_reports(const Document &doc, const std::filesystem::path &dir) {
  prepare_report_dir(dir);
  // Rendered before anything is written, so a writer's exception leaves no half-written set behind.
  const std::string json = to_json(doc), markdown = to_markdown(doc), html = to_html(doc);
  write_file(dir, "report.json", json);
  write_file(dir, "summary.md", markdown);
  write_file(dir, "report.html", html);
}

}  // namespace attncheck::reporting
