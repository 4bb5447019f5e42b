// The counterexample corpus (`attncheck check --corpus DIR`, Python's `corpus=`): every counterexample and warning of a
// run is kept under DIR, one file per entry named by the content hash of its case (reporting::CorpusEntry, the format
// in spec/REPORT_SCHEMA.md), and every later run replays the entries of its kernel and dtype before each property's
// search (CheckOptions::corpus): a bug found once stays found, whatever the seed. `attncheck corpus DIR` lists the
// entries and prunes those that pass now. The one implementation behind the CLI and the Python module.
//
// Example:
//   const gate::Corpus corpus = gate::open_corpus("corpus/");            // created when missing
//   opt.corpus = gate::corpus_cases(corpus, kernel.name, opt.dtype);       // replayed first, in hash order
//   …                                                                      // the check, its Document
//   gate::store_corpus(doc, "corpus/");                                    // its counterexamples, new files only
#pragma once

#include "attncheck/check.h"
#include "attncheck/replay.h"
#include "attncheck/report_io.h"

#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace attncheck::gate {

/// A corpus that cannot be read or written — the directory missing or unreadable, an entry corrupt — in one line
/// that names the path. The fronts answer it with kExitUsage (gate.h).
struct CorpusError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A corpus directory's entries, in hash order (the order they are listed and replayed in).
struct Corpus {
  std::filesystem::path dir;
  std::vector<reporting::CorpusEntry> entries;
};

/// Entry files end in this; others (and names starting with '.', temporaries of a write in progress) are not entries.
inline constexpr std::string_view kCorpusSuffix = ".json";

/// Reads the corpus at `dir`: every "<hash>.json" in it, each parsed and its hash checked against its name. Throws
/// CorpusError when `dir` is missing, not a directory or unreadable, or an entry is corrupt (the file named).
Corpus read_corpus(const std::filesystem::path &dir);
/// read_corpus for a check: `dir` is created first when missing (a first run has no corpus yet).
Corpus open_corpus(const std::filesystem::path &dir);

/// The entries of `corpus` for `kernel` and `dtype`, as the engine replays them (CheckOptions::corpus): hash order.
std::vector<CorpusCase> corpus_cases(const Corpus &corpus, std::string_view kernel, Dtype dtype);

/// The corpus entry of property `p` of `run` (which has a counterexample).
reporting::CorpusEntry corpus_entry(const reporting::Run &run, const PropertyReport &p);

/// Stores every counterexample (failures and warnings) of `doc` under `dir` (created when missing): each entry a file
/// "<hash>.json", written to a temporary file in `dir` and renamed, so that concurrent runs (shards, other checks)
/// never see half a file and two writers of one case write the same bytes. An entry already there is kept as it is.
/// Returns the hashes of the entries added, in document order. Throws CorpusError when `dir` cannot be written.
std::vector<std::string> store_corpus(const reporting::Document &doc, const std::filesystem::path &dir);

/// `attncheck corpus DIR`'s line for an entry: "<hash>  <kernel>  <dtype>  <property>  <verdict>  <shape>".
std::string corpus_line(const reporting::CorpusEntry &e);

/// Runs entry `e`'s case on `kernel` judged under the contract it was recorded with (its precision profile for the
/// entry's dtype): what `corpus --prune` asks of each entry. Tier off (the property has nothing to check under that
/// contract) runs nothing: verdict undecided, the detail says why. Throws CorpusError for a property this attncheck
/// does not have.
ReplayResult replay_entry(const reporting::CorpusEntry &e, const attncheck_kernel &kernel);

/// Deletes entry `e`'s file from `corpus`. Throws CorpusError when it cannot.
void remove_entry(const Corpus &corpus, const reporting::CorpusEntry &e);

/// What a prune did with one entry.
struct Pruned {
  reporting::CorpusEntry entry;
  bool dropped = false;  ///< it passes now, and its file is deleted
  std::string why;       ///< "passes now", or why it is kept ("fail: …", "the source has no kernel …")
};
/// `attncheck corpus DIR --prune` (and Python's attncheck.prune_corpus): replays each entry of `corpus` — of kernel
/// `only`, when not empty — on `find(entry.kernel)` (replay_entry; nullptr: the source has no such kernel, and the
/// entry is kept), and deletes those that pass now. Entries that fail, warn or stay undecided are kept. Returns
/// one Pruned per entry considered, in hash order. Throws CorpusError when a file cannot be deleted.
std::vector<Pruned> prune_corpus(const Corpus &corpus,
                                 const std::function<const attncheck_kernel *(const std::string &)> &find,
                                 const std::string &only);
/// A prune's line for an entry: "dropped  <corpus_line>  (passes now)" or "kept     <corpus_line>  (why)".
std::string pruned_line(const Pruned &p);

}  // namespace attncheck::gate
