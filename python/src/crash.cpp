// The crash record of an in-process check (crash.h).
#include "crash.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <string_view>
#include <utility>

namespace attncheck::python::crash {

namespace {
/// The line the handler writes starts so: the tool's prefix, then what happened.
constexpr std::string_view kTool = "attncheck: ", kDied = "the process died of signal ";
constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr std::size_t kSignalCount = std::size(kSignals);
constexpr const char *kFile = "crash.txt";
char g_crumb[4096];
std::atomic<std::size_t> g_crumb_size{0};
int g_fd = -1;
struct sigaction g_previous[kSignalCount];
bool g_installed = false;

void write_all(int fd, const char *p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w <= 0) return;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

extern "C" void on_fatal(int sig) {
  char number[16];
  std::size_t len = 0;
  for (int x = sig; len == 0 || x > 0; x /= 10) number[len++] = static_cast<char>('0' + x % 10);
  char head[64];
  std::size_t at = 0;
  for (std::string_view part : {kTool, kDied})
    for (char ch : part) head[at++] = ch;
  while (len > 0) head[at++] = number[--len];
  const std::size_t n = g_crumb_size.load();
  for (int fd : {2, g_fd}) {
    if (fd < 0) continue;
    write_all(fd, head, at);
    write_all(fd, g_crumb, n);
  }
  for (std::size_t i = 0; i < kSignalCount; ++i)
    if (kSignals[i] == sig) sigaction(sig, &g_previous[i], nullptr);
  raise(sig);
}

}  // namespace

void before_call(const std::string &kernel, bool backward) {
  if (!g_installed) return;
  const std::optional<CaseInProgress> c = case_in_progress();
  const std::string dt = c ? std::string(dtype_name(c->dtype)) : "?";
  const int n = std::snprintf(
      g_crumb, sizeof g_crumb,
      " in a call of kernel '%s' (%s) — property %s, %s, %s case: %s. Replay: attncheck.check(fn, properties=['%s'], "
      "dtypes=['%s'], seed=%llu)\nkernel=%s property=%s dtype=%s\n",
      kernel.c_str(), backward ? "backward" : "forward", c ? c->property.c_str() : "?", dt.c_str(),
      c ? c->phase.c_str() : "?", c ? c->spec.c_str() : "?", c ? c->property.c_str() : "?", dt.c_str(),
      static_cast<unsigned long long>(c ? c->seed : 0), kernel.c_str(), c ? c->property.c_str() : "?", dt.c_str());
  g_crumb_size.store(n < 0 ? 0 : std::min(static_cast<std::size_t>(n), sizeof g_crumb - 1));
}

Trace::Trace(const std::string &report_dir) {
  if (!report_dir.empty())
    path_ = report_dir + "/" + kFile, g_fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  g_crumb_size.store(0);
  struct sigaction sa {};
  sa.sa_handler = on_fatal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_ONSTACK;
  for (std::size_t i = 0; i < kSignalCount; ++i) sigaction(kSignals[i], &sa, &g_previous[i]);
  g_installed = true;
}

Trace::~Trace() {
  g_installed = false;
  for (std::size_t i = 0; i < kSignalCount; ++i) sigaction(kSignals[i], &g_previous[i], nullptr);
  if (g_fd >= 0) ::close(g_fd), ::unlink(path_.c_str());
  g_fd = -1;
}

std::optional<Previous> previous(const std::string &report_dir) {
  if (report_dir.empty()) return std::nullopt;
  const std::string path = report_dir + "/" + kFile;
  std::FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) return std::nullopt;
  std::string text(sizeof g_crumb + 64, '\0');
  text.resize(std::fread(text.data(), 1, text.size(), f));
  std::fclose(f);
  std::remove(path.c_str());
  Previous p;
  const std::size_t eol = text.find('\n');
  p.line = text.substr(0, eol);
  if (eol == std::string::npos) return std::nullopt;  // died before it wrote the whole crumb
  std::string fields = text.substr(eol + 1);
  for (const auto &[key, out] : {std::pair{"kernel=", &p.kernel}, {"property=", &p.property}, {"dtype=", &p.dtype}}) {
    const std::size_t at = fields.find(key);
    if (at == std::string::npos) return std::nullopt;
    const std::size_t from = at + std::strlen(key);
    *out = fields.substr(from, fields.find_first_of(" \n", from) - from);
  }
  return p;
}

void leave_out(CheckOptions &opt, const Previous &p, const std::string &kernel, Dtype dt) {
  if (p.kernel == kernel && p.dtype == dtype_name(dt)) opt.excluded.push_back(p.property);
}

void report(reporting::Document &doc, const Previous &p) {
  for (reporting::Run &run : doc.runs) {
    if (run.report.kernel != p.kernel || dtype_name(run.report.dtype) != p.dtype) continue;
    PropertyReport pr;
    if (find_property_info(p.property)) pr = property_line(p.property, run.report.contract, run.report.dtype);
    pr.id = p.property;
    pr.tier = Tier::required;
    pr.verdict = Verdict::fail;
    std::string_view what = p.line;
    if (what.starts_with(kTool)) what.remove_prefix(kTool.size());
    pr.note = "not run again: the previous check with this report directory died in it (" + std::string(what) + ")";
    insert_line(run.report, std::move(pr));
  }
}

}  // namespace attncheck::python::crash
