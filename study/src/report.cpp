#include "attncheck/study.h"

#include <fstream>
#include <stdexcept>
#include <system_error>

namespace attncheck::study {
namespace {
void write_file(const std::filesystem::path &path, const std::string &text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw std::runtime_error("cannot write " + path.string());
  f << text;
  f.close();
  if (!f) throw std::runtime_error("cannot write " + path.string());
}
}  // namespace

void write_report(const StudyResult &r, const std::filesystem::path &dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create " + dir.string() + ": " + ec.message());
  write_file(dir / "study.md", render_markdown(r));
  write_file(dir / "study.html", render_html(r));
}

}  // namespace attncheck::study
