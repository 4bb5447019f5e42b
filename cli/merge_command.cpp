// attncheck merge: the partial reports of a sharded campaign (`check --shard I/N`) joined into the report the
// unsharded check writes — report.json byte for byte — with the gate's exit code.
#include "commands.h"

#include "attncheck/report_io.h"
#include "attncheck/run.h"

#include <fmt/core.h>

#include <filesystem>

namespace attncheck::cli {

namespace {

struct MergeArgs {
  std::vector<std::string> inputs;
  std::string report_dir, junit;
  bool quiet = false;
};

/// A partial report: DIR/report.json, or the file itself. Throws ReportError naming it.
reporting::Document read_partial(const std::string &input) {
  const std::filesystem::path path =
      std::filesystem::is_directory(input) ? std::filesystem::path(input) / "report.json" : std::filesystem::path(input);
  return reporting::read_report(path, "give the --report-dir of each shard");
}

int run_merge(const MergeArgs &a) {
  reporting::Document doc;
  try {
    std::vector<reporting::Document> parts;
    for (const std::string &input : a.inputs) parts.push_back(read_partial(input));
    doc = gate::merge_shards(parts);
    reporting::prepare_report_dir(a.report_dir);
    reporting::write_reports(doc, a.report_dir);
    if (!a.junit.empty()) reporting::write_file(a.junit, reporting::to_junit(doc));
  } catch (const std::runtime_error &e) {
    return usage_error(e.what());
  }
  if (!a.quiet) {
    fmt::print("{}", reporting::to_text(doc));
    fmt::print(stderr, "merged {} shard reports into {}/ (report.json, summary.md, report.html)\n", a.inputs.size(),
               a.report_dir);
  }
  return gate::exit_code(doc, doc.strict, false);
}

}  // namespace

void register_merge_command(CLI::App &app, Action &action) {
  auto args = std::make_shared<MergeArgs>();
  CLI::App *cmd = app.add_subcommand(
      "merge",
      "Join the partial reports of a sharded check (`check --shard I/N --report-dir DIR`, one per shard) into the "
      "report of the unsharded check: report.json identical byte for byte, with summary.md, report.html and JUnit.\n"
      "Exit codes: those of `check` for the whole campaign: 0 pass, 1 counterexample, 2 usage error (a missing, "
      "repeated or foreign shard), 3 inconclusive.");
  cmd->add_option("reports", args->inputs, "Each shard's report directory (or its report.json)")->required();
  cmd->add_option("--report-dir", args->report_dir, "Write the merged report.json, summary.md and report.html here")
      ->required();
  cmd->add_option("--junit", args->junit, "Write JUnit XML of the whole campaign here");
  cmd->add_flag("--quiet", args->quiet, "Print nothing but errors");
  cmd->callback([args, &action] { action = [args] { return run_merge(*args); }; });
}

}  // namespace attncheck::cli
