// Helpers shared by the sandbox tests.
#pragma once

#include "attncheck/kernel_call.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace sandbox_test {

/// A small float32 problem (B=1 Hq=2 Hkv=1 Lq=3 Lk=5 D=Dv=4) with exact inputs in [−0.5, 1].
inline attncheck::Problem small_problem() {
  using namespace attncheck;
  const Shape s{1, 2, 1, 3, 5, 4, 4};
  Problem p;
  p.shape = s;
  p.params = Params{default_scale(s.D), Mask::none};
  p.q = Tensor::contiguous(Dtype::f32, {s.B, s.Hq, s.Lq, s.D});
  p.k = Tensor::contiguous(Dtype::f32, {s.B, s.Hkv, s.Lk, s.D});
  p.v = Tensor::contiguous(Dtype::f32, {s.B, s.Hkv, s.Lk, s.Dv});
  for (Tensor *t : {&p.q, &p.k, &p.v}) {
    std::vector<double> x(static_cast<std::size_t>(t->numel()));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(i % 7) / 4 - 0.5;
    t->assign(x);
  }
  return p;
}

/// This process's children (every thread's), and how many of them are zombies.
struct Children {
  int alive = 0, zombies = 0;
};
inline Children children() {
  namespace fs = std::filesystem;
  Children c;
  for (const auto &task : fs::directory_iterator("/proc/self/task")) {
    std::ifstream f(task.path() / "children");
    for (long pid = 0; f >> pid;) {
      std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
      std::string line;
      std::getline(stat, line);
      const auto close = line.rfind(')');
      const bool zombie = close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
      ++(zombie ? c.zombies : c.alive);
    }
  }
  return c;
}

}  // namespace sandbox_test
