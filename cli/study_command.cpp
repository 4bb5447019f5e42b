// attncheck study: measures the claims about scaling attention logits by 1/√d_k and writes a report.
#include "commands.h"

#include "attncheck/study.h"

#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <stdexcept>

namespace attncheck::cli {

void register_study_command(CLI::App &app, Action &action) {
  struct StudyOptions {
    std::string out = "study";
    std::uint64_t seed = attncheck::study::kDefaultSeed;
    bool quick = false;
  };
  auto opts = std::make_shared<StudyOptions>();
  CLI::App *cmd = app.add_subcommand(
      "study", "Measure why attention scales logits by 1/sqrt(d_k): writes DIR/study.md and DIR/study.html.");
  cmd->add_option("--out", opts->out, "Output directory (created if missing)")->capture_default_str();
  cmd->add_option("--seed", opts->seed, "Random seed; the same seed gives the same report")->capture_default_str();
  cmd->add_flag("--quick", opts->quick, "Small samples (a few seconds), for CI");
  cmd->callback([opts, &action] {
    action = [opts] {
      const std::filesystem::path dir(opts->out);
      // Check the directory before the (long) computation so that a bad --out fails at once.
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      const std::filesystem::path probe = dir / ".attncheck-study-probe";
      if (!ec) {
        std::ofstream f(probe);
        if (!f) ec = std::make_error_code(std::errc::permission_denied);
      }
      if (ec) {
        std::cerr << "attncheck study: cannot write to --out " << dir.string() << ": " << ec.message() << '\n';
        return static_cast<int>(gate::kExitUsage);
      }
      std::filesystem::remove(probe, ec);
      attncheck::study::Options o;
      o.seed = opts->seed;
      o.quick = opts->quick;
      const auto start = std::chrono::steady_clock::now();
      const auto result = attncheck::study::run_study(o);
      try {
        attncheck::study::write_report(result, dir);
      } catch (const std::runtime_error &e) {
        std::cerr << "attncheck study: " << e.what() << '\n';
        return static_cast<int>(gate::kExitUsage);
      }
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      std::cout << "wrote " << (dir / "study.md").string() << " and " << (dir / "study.html").string() << " in "
                << took.count() << " s\n";
      return static_cast<int>(gate::kExitPass);
    };
  });
}

}  // namespace attncheck::cli
