#include "progress.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstdio>
#include <unistd.h>

namespace attncheck::gate {

namespace {
constexpr int kBarWidth = 24;
/// Redraw at most this often: a terminal needs no more, and a slow one would slow the check.
constexpr auto kRedrawInterval = std::chrono::milliseconds(100);

std::string clock_text(double seconds) {
  const auto s = static_cast<long>(seconds + 0.5);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

/// "[######..................]  25% ETA 0:42": a share `f` done after `elapsed` seconds.
std::string bar_text(double f, double elapsed) {
  std::string bar(static_cast<std::size_t>(f * kBarWidth), '#');
  bar.resize(kBarWidth, '.');
  return fmt::format("[{}] {:3.0f}% ETA {}", bar, 100 * f, f > 0.01 ? clock_text(elapsed * (1 - f) / f) : "?");
}
}  // namespace

Progress::Progress(int runs, bool quiet)
    : runs_(runs), quiet_(quiet), tty_(isatty(STDERR_FILENO) != 0), start_(Clock::now()) {}

void Progress::start_run(const std::string &label) {
  ++run_;
  label_ = label;
  last_property_ = static_cast<std::size_t>(-1);
  if (quiet_) return;
  if (!tty_) fmt::print(stderr, "[{}/{}] checking {}\n", run_ + 1, runs_, label);
}

double Progress::fraction(const CheckProgress &p) const {
  if (p.property_count == 0 || runs_ == 0) return 0;
  const double within =
      (static_cast<double>(p.property_index) + std::min(1.0, p.cases / std::max(1.0, double(p.target)))) /
      static_cast<double>(p.property_count);
  return (run_ + within) / runs_;
}

void Progress::draw(const std::string &text) {
  fmt::print(stderr, "\r\033[K{}", text);
  std::fflush(stderr);
}

void Progress::update(const CheckProgress &p) {
  if (quiet_) return;
  if (!tty_) {
    if (p.property_index != last_property_) {
      last_property_ = p.property_index;
      fmt::print(stderr, "  {} ({}/{})\n", p.property, p.property_index + 1, p.property_count);
    }
    return;
  }
  const Clock::time_point now = Clock::now();
  if (now - last_draw_ < kRedrawInterval) return;
  last_draw_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const std::string what = p.shrinking ? fmt::format("shrinking ({} tried)", p.shrinks_tried)
                                       : fmt::format("{}/{} cases", p.cases, p.target);
  draw(fmt::format("{}  {}  {} ({}/{}) {}", bar_text(fraction(p), elapsed), label_, p.property, p.property_index + 1,
                   p.property_count, what));
}

void Progress::finish_run(const std::string &line) {
  if (quiet_) return;
  if (tty_) draw("");
  fmt::print(stderr, "{}{}\n", tty_ ? "\r" : "  ", line);
}

JudgeBar::JudgeBar() : tty_(isatty(STDERR_FILENO) != 0), start_(Clock::now()) {}

JudgeBar::~JudgeBar() {
  if (drawn_) {
    fmt::print(stderr, "\r\033[K");
    std::fflush(stderr);
  }
}

void JudgeBar::update(const JudgeProgress &p) {
  const Clock::time_point now = Clock::now();
  if (!tty_ || now - last_draw_ < kRedrawInterval || p.total == 0) return;
  last_draw_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  if (p.explaining) {
    fmt::print(stderr, "\r\033[Kjudge: {} — the tensors fail; judging them under the declarations that could "
                       "explain it",
               clock_text(elapsed));
  } else {
    fmt::print(stderr, "\r\033[Kjudge: {}  {} of {} query rows bounded",
               bar_text(static_cast<double>(p.rows) / static_cast<double>(p.total), elapsed), p.rows, p.total);
  }
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace attncheck::gate
