// Progress of a check run: a bar with an ETA on a terminal, plain lines in CI (stderr); and of a long judgment.
#pragma once

#include "attncheck/check.h"
#include "attncheck/given.h"

#include <chrono>
#include <string>

namespace attncheck::gate {

class Progress {
 public:
  /// `runs` (kernel, dtype) pairs will be checked; `quiet` prints nothing.
  Progress(int runs, bool quiet);
  /// A new (kernel, dtype) run starts.
  void start_run(const std::string &label);
  /// The engine's progress within the current run.
  void update(const CheckProgress &p);
  /// The current run finished with this one-line result.
  void finish_run(const std::string &line);

 private:
  using Clock = std::chrono::steady_clock;
  /// Fraction of all runs done, from the current run's property and case counts.
  double fraction(const CheckProgress &p) const;
  void draw(const std::string &text);

  int runs_ = 0, run_ = -1;
  bool quiet_ = false, tty_ = false;
  std::string label_;
  Clock::time_point start_, last_draw_;
  std::size_t last_property_ = static_cast<std::size_t>(-1);
};

/// A long judgment of given tensors (gate::judge): a bar of the rows bounded, with an ETA, on a terminal's stderr;
/// nothing elsewhere (a log gains nothing from it).
class JudgeBar {
 public:
  JudgeBar();
  ~JudgeBar();
  JudgeBar(const JudgeBar &) = delete;
  JudgeBar &operator=(const JudgeBar &) = delete;
  void update(const JudgeProgress &p);

 private:
  using Clock = std::chrono::steady_clock;
  bool tty_ = false, drawn_ = false;
  Clock::time_point start_, last_draw_;
};

}  // namespace attncheck::gate
