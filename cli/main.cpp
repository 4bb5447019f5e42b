// attncheck: property-based verification of scaled dot-product attention kernels.
#include "commands.h"

#include <exception>
#include <iostream>

namespace {
std::vector<std::string> g_arguments;
}  // namespace

const std::vector<std::string> &attncheck::cli::program_arguments() { return g_arguments; }

int attncheck::cli::usage_error(const std::string &message) {
  std::cerr << "attncheck: " << message << '\n';
  return gate::kExitUsage;
}

int attncheck::cli::run_error(const gate::RunError &e) {
  std::cerr << "attncheck: " << (e.input.empty() ? "" : "--" + e.input + ": ") << e.what() << '\n';
  return e.exit_code;
}

int main(int argc, char **argv) {
  using namespace attncheck::cli;
  namespace gate = attncheck::gate;
  g_arguments.assign(argv + 1, argv + argc);
  CLI::App app{"attncheck: checks scaled dot-product attention kernels against an arbitrary-precision reference.\n"
               "Exit codes: 0 pass, 1 counterexample found, 2 usage or configuration error, 3 inconclusive, "
               "4 internal error."};
  app.require_subcommand(1);
  // Bad flags get the one-line treatment of every other usage error.
  app.failure_message([](const CLI::App *, const CLI::Error &e) {
    return std::string("attncheck: ") + e.what() + " (see --help)\n";
  });
  Action action;
  register_check_command(app, action);
  register_replay_command(app, action);
  register_merge_command(app, action);
  register_judge_command(app, action);
  register_infer_command(app, action);
  register_corpus_command(app, action);
  register_list_command(app, action);
  register_study_command(app, action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    const int rc = app.exit(e);
    return rc == 0 ? gate::kExitPass : gate::kExitUsage;
  }
  try {
    return action ? action() : gate::kExitUsage;
  } catch (const std::exception &e) {
    std::cerr << "attncheck: internal error: " << e.what() << '\n';
    return gate::kExitInternal;
  }
}
