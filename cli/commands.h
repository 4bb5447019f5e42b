// The attncheck subcommands; each file registers one on the CLI11 app and runs it.
#pragma once

#include "attncheck/gate.h"
#include "attncheck/run.h"

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace attncheck::cli {

/// Prints "attncheck: <message>" as one line on stderr and returns kExitUsage.
int usage_error(const std::string &message);
/// Prints the gate's error as one line ("attncheck: --corpus: …") and returns its exit code.
int run_error(const gate::RunError &e);

/// The command line attncheck was started with (argv[1..]), for re-running itself (check --jobs).
const std::vector<std::string> &program_arguments();

/// A subcommand's action; returns an exit code. Set by the register function, run by main after parsing.
using Action = std::function<int()>;

void register_check_command(CLI::App &app, Action &action);
void register_study_command(CLI::App &app, Action &action);
void register_replay_command(CLI::App &app, Action &action);
void register_list_command(CLI::App &app, Action &action);
void register_merge_command(CLI::App &app, Action &action);
void register_judge_command(CLI::App &app, Action &action);
void register_infer_command(CLI::App &app, Action &action);
void register_corpus_command(CLI::App &app, Action &action);

}  // namespace attncheck::cli
