// attncheck corpus: lists a counterexample corpus (`check --corpus DIR`), and prunes the entries that pass now.
#include "commands.h"
#include "kernel_loader.h"

#include "attncheck/containment.h"
#include "attncheck/corpus.h"

#include <fmt/core.h>

#include <optional>

namespace attncheck::cli {

namespace {
/// Ends the processes the kernels left running when it goes out of scope (containment.h), on every way out.
struct EndStrays {
  EndStrays() = default;
  EndStrays(const EndStrays &) = delete;
  EndStrays &operator=(const EndStrays &) = delete;
  ~EndStrays() { containment::kill_strays(); }
};

struct CorpusArgs {
  std::string dir, plugin, exec, kernel;
  bool prune = false;
  double timeout = 10;
};

/// Lists the entries, one line each (gate::corpus_line), in hash order.
int list_entries(const gate::Corpus &corpus) {
  for (const reporting::CorpusEntry &e : corpus.entries) fmt::print("{}\n", gate::corpus_line(e));
  if (corpus.entries.empty()) fmt::print(stderr, "corpus {}: no entries\n", corpus.dir.string());
  return gate::kExitPass;
}

/// Replays each entry (of --kernel, when given) on the source's kernel of its name, under the contract it was
/// recorded with, and deletes those that pass now; an entry whose kernel the source lacks, or that still fails, warns
/// or stays undecided, is kept. One line per entry, then the counts.
int prune_entries(const CorpusArgs &a, const gate::Corpus &corpus) {
  using Kind = reporting::KernelSource::Kind;
  reporting::KernelSource src;
  if (!a.exec.empty()) src = {Kind::exec, a.exec};
  else if (!a.plugin.empty() && a.plugin != "builtin") src = {Kind::plugin, a.plugin};
  LoaderOptions so;
  so.call_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(a.timeout * 1000));
  containment::adopt_orphans();
  const EndStrays strays;  // after `source` below has stopped its kernel processes
  std::optional<KernelLoader> source;
  try {
    source.emplace(src, so);
    if (!a.kernel.empty()) source->find(a.kernel);  // a --kernel the source lacks is a usage error
  } catch (const LoaderError &e) {
    return usage_error(e.what());
  }
  const std::vector<gate::Pruned> pruned = gate::prune_corpus(
      corpus,
      [&](const std::string &name) -> const attncheck_kernel * {
        for (const attncheck_kernel &k : source->kernels())
          if (k.name && name == k.name) return &k;
        return nullptr;
      },
      a.kernel);
  int dropped = 0, kept = 0;
  for (const gate::Pruned &p : pruned) {
    ++(p.dropped ? dropped : kept);
    fmt::print("{}\n", gate::pruned_line(p));
  }
  fmt::print("pruned {}: {} dropped, {} kept\n", corpus.dir.string(), dropped, kept);
  return gate::kExitPass;
}

int run_corpus(const CorpusArgs &a) {
  if (!a.plugin.empty() && !a.exec.empty()) return usage_error("give --plugin or --exec, not both");
  if (!a.prune && (!a.plugin.empty() || !a.exec.empty() || !a.kernel.empty()))
    return usage_error("--plugin, --exec and --kernel choose the kernels that --prune replays on: give --prune");
  gate::Corpus corpus;
  try {
    corpus = gate::read_corpus(a.dir);
    return a.prune ? prune_entries(a, corpus) : list_entries(corpus);
  } catch (const gate::CorpusError &e) {
    return usage_error(e.what());
  }
}
}  // namespace

void register_corpus_command(CLI::App &app, Action &action) {
  auto args = std::make_shared<CorpusArgs>();
  CLI::App *cmd = app.add_subcommand(
      "corpus",
      "List a counterexample corpus (`check --corpus DIR`): one line per entry — hash, kernel, dtype, property, "
      "verdict, shape. With --prune, replay each entry on the current kernel of its name (under the contract it was "
      "recorded with) and delete those that pass now.\nExit codes: 0 listed or pruned, 2 usage error or bad input "
      "(the directory missing or unreadable, a corrupt entry, a kernel source that does not load), 4 internal "
      "error.");
  cmd->add_option("dir", args->dir, "The corpus directory")->required();
  cmd->add_flag("--prune", args->prune, "Replay each entry and delete those that pass now (prints what it dropped)");
  cmd->add_option("--plugin", args->plugin, "--prune: the kernels' shared object, or 'builtin' (default)");
  cmd->add_option("--exec", args->exec, "--prune: the kernels' exec command (spec/EXEC_PROTOCOL.md)");
  cmd->add_option("--kernel", args->kernel, "--prune: only the entries of this kernel");
  cmd->add_option("--timeout", args->timeout, "Seconds one kernel call may take")->check(CLI::PositiveNumber);
  cmd->callback([args, &action] { action = [args] { return run_corpus(*args); }; });
}

}  // namespace attncheck::cli
