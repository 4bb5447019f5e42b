// Reports of a check run, for people and for machines: report.json (replayable, schema in spec/REPORT_SCHEMA.md),
// summary.md (a CI job summary or pull-request comment), report.html (self-contained, for reading a
// counterexample), JUnit XML (one testcase per kernel, dtype and property) and the terminal text (the gate's table,
// and Python's Report.summary()).
//
// Every writer is deterministic: the same Document gives the same bytes (wall times are never written).
//
// Example:
//   attncheck::reporting::Document doc;
//   doc.tool_version = "0.1.0";
//   opt.evidence = true;                                             // each counterexample's values, for the files
//   doc.runs.push_back({source, "default", attncheck::check(kernel, opt)});
//   attncheck::reporting::write_reports(doc, "reports/");             // report.json, summary.md, report.html
//
// Reporting renders: it never calls a kernel, the reference or the error model (the engine gathered the evidence).
#pragma once

#include "attncheck/kernel_abi.h"
#include "attncheck/results.h"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace attncheck::reporting {

/// A malformed, truncated or foreign report.json; what() is one line: "report.json: <what is wrong>".
struct ReportError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// How the kernel was reached, so that replay can reach it again.
struct KernelSource {
  enum class Kind : std::uint8_t { builtin, plugin, exec, python };
  Kind kind = Kind::builtin;
  /// The plugin's path, the exec command, or a Python function's module:qualname; empty for builtin.
  std::string location;
  friend bool operator==(const KernelSource &, const KernelSource &) = default;
};
std::string_view kind_name(KernelSource::Kind k);  ///< "builtin", "plugin", "exec", "python"

/// One checked (kernel, dtype).
struct Run {
  KernelSource source;
  std::string plan;  ///< the profile that planned it: "quick", "default" or "thorough" (report.json's run_profile)
  RunReport report;  ///< each counterexample with its Evidence when the check gathered it (CheckOptions::evidence)
};

/// A slice of a campaign (`attncheck check --shard I/N`): the (kernel, dtype, property) items of the whole check,
/// numbered in report order (runs, then `properties` within each run), item i belonging to shard i mod N + 1.
struct Shard {
  int index = 1, count = 1;                ///< I (1-based) of N
  std::vector<std::string> properties;     ///< the property ids of every run, in report order
  friend bool operator==(const Shard &, const Shard &) = default;
  /// Whether item `item` (0-based, report order) is this shard's.
  bool owns(std::size_t item) const { return static_cast<int>(item % static_cast<std::size_t>(count)) == index - 1; }
};

struct Document {
  std::string tool_version;
  std::vector<Run> runs;
  /// Set in a shard's partial report: its runs hold only the properties it owns (`attncheck merge` joins them).
  std::optional<Shard> shard;
  /// --strict: warnings (advisory properties that found a counterexample) count as failures — in the verdicts
  /// written, in JUnit (<failure>) and in the roll-ups. Set by the CLI; kept in report.json.
  bool strict = false;
  /// Every counterexample in document order, failures and warnings alike: (run index, property index).
  /// `attncheck replay --failure N` is the N-th (1-based) of these.
  std::vector<std::pair<std::size_t, std::size_t>> failures() const;
  /// The roll-up over runs (each RunReport::verdict(strict)): fail > undecided > warn > pass.
  Verdict verdict() const;
};

/// Counterexamples that share one root cause: the same run, the same kind (failure or warning), minimal cases of the
/// same shape and mask (their values' family and layout do not change what the element means) and the same failing
/// element signature — the failing ladder step, the
/// tensor (O, LSE, dQ, dK, dV, or the name the check used) and the kind of wrongness (NaN, ±Inf, wrong sign, a row
/// that sees no key, a value out of its bound, bits that differ, a failed call, a write outside the outputs …),
/// read off Outcome::step and Outcome::detail. One defect found by several properties becomes one group.
struct FailureGroup {
  /// One line: kernel, dtype, the signature and the member properties with their failure numbers, e.g.
  /// "bug:no_rescale (f32) · step values: O out of bound · accuracy, shift_invariance · failures 1, 3".
  std::string headline;
  /// What the failing element shows, from its step and element (not the properties' generic summaries), e.g.
  /// "step mask: LSE[0,0,1] of a row that sees no key is +Inf, the contract fixes −Inf" or
  /// "step values: O elements out of bound by up to 3.1e5× (O[0,0,1,2]: got 0.41, exact 0.37) — O is the exact
  /// attention at scale 1, not 1/√D = 0.125 — no declaration explains it" (the hints' texts, when any).
  std::string caption;
  /// (run index, property index) of each member, in document order (the order of Document::failures()).
  std::vector<std::pair<std::size_t, std::size_t>> members;
  /// True when the members are warnings (advisory properties: beyond the declared contract), false for failures.
  bool warning = false;
  /// The declarations that explain every member (Counterexample::explained_by), which the caption names.
  std::vector<Explanation> explained;
  /// What the evidence shows about the defect (Evidence::hints of the first member that has any), which the caption
  /// quotes; empty when a declaration explains the group or nothing was verified.
  std::vector<Hint> hints;
};

/// The counterexamples of `doc` grouped by root cause (see FailureGroup), groups ordered by their first member in
/// document order. Pure and deterministic: the same Document gives the same groups.
std::vector<FailureGroup> group_failures(const Document &doc);

/// report.json. Inputs of every counterexample are exact (C99 hex floats), so replay rebuilds the very case.
std::string to_json(const Document &doc);
/// Parses report.json (throws ReportError).
Document from_json(std::string_view text);
/// report.json without its top-level `timing` object: what the same seed makes byte-identical whatever the load,
/// `--jobs` or `--shard` (timing is where the time went, the one part that depends on the machine). Tools that
/// compare reports compare this (or `jq 'del(.timing)'`). Throws ReportError for text that is not JSON.
std::string content_of(std::string_view report_json);
/// Reads and parses the report.json at `path`; a ReportError names the file, and when it cannot be opened says
/// `what_to_do`.
Document read_report(const std::filesystem::path &path, std::string_view what_to_do);
/// One entry of a counterexample corpus (`attncheck check --corpus DIR`; the format: spec/REPORT_SCHEMA.md, "Corpus
/// entries"): a minimal counterexample or warning a run recorded, replayable on its own — the kernel it failed, the
/// property, its exact inputs, and the contract and verdict it was judged with. The gate keeps the files
/// (gate/include/attncheck/corpus.h); this is their content.
struct CorpusEntry {
  std::string hash;  ///< corpus_hash of the entry: the file's name, less ".json"
  std::string kernel;
  Dtype dtype = Dtype::f32;
  std::string property;
  Verdict verdict = Verdict::fail;  ///< as the run that recorded it judged it: fail, or warn (an advisory property)
  Tier tier = Tier::required;
  KernelContract contract;          ///< the contract it was judged under
  KernelSource source;              ///< how that run reached the kernel
  std::uint64_t seed = 0;           ///< the property's RapidCheck seed in that run
  std::string reproduce;            ///< its reproduce string in that run
  Outcome outcome;                  ///< the outcome recorded (without a failing case)
  Case minimal;                     ///< the exact inputs
};
/// The content hash of a corpus entry: 128-bit FNV-1a, 32 lowercase hex digits, of the canonical case — kernel,
/// dtype, property and the exact inputs as report.json writes them, compact. The same counterexample gives the same
/// hash, whatever the run, seed or contract that found it.
std::string corpus_hash(std::string_view kernel, Dtype dtype, std::string_view property, const Case &minimal);
/// A corpus entry's file text (deterministic, like report.json; "hash" written as corpus_hash computes it).
std::string to_corpus_json(const CorpusEntry &e);
/// Parses a corpus entry's text, its hash recomputed and compared (throws ReportError, one line: "corpus entry: …").
CorpusEntry corpus_entry_from_json(std::string_view text);

/// summary.md: verdict table per kernel and dtype (with its contract and warning count), then the failures and,
/// in their own section, the warnings — each grouped by root cause (group_failures): the group's headline and
/// caption, then each member counterexample (shape, step, worst element in hex and decimal, the replay command; for
/// a metamorphic failure, the failing element's row on both problems and the rows that differ).
std::string to_markdown(const Document &doc);
/// report.html: self-contained (inline CSS and SVG); per run its contract and per property verdicts and tiers;
/// counterexamples grouped by root cause, failures in red and warnings in amber, each with its inputs (those of
/// the failing problem), a heatmap of error ÷ bound over the output (for a metamorphic failure, one per problem side by
/// side, the rows that differ outlined, the failing row's values on both), the attention probabilities, an error
/// histogram. Every string that came from a kernel or a plugin is HTML-escaped.
std::string to_html(const Document &doc);
/// JUnit XML: one <testsuite> per (kernel, dtype) with its contract as a <property>, one <testcase> per property;
/// failures carry the counterexample text in <failure>; a warning is a passing testcase with a "warning"
/// <property> and "WARNING: …" in <system-out> — or a <failure> when doc.strict.
std::string to_junit(const Document &doc);

/// What the terminal text shows besides what `attncheck check` prints (the defaults); Python's Report.summary()
/// sets each.
struct TextOptions {
  /// One line per (kernel, dtype), its verdict and counts (run_line), in place of the table's line per property.
  bool run_lines = false;
  /// Under "cut short", each property the kernel declined entirely too (in a run it did not decline entirely), and
  /// why.
  bool declined = false;
  /// The failures and warnings counted apart, in one line before the counterexamples.
  bool totals = false;
  /// Under each counterexample, the declarations that explain it (those its group's caption does not name) and its
  /// minimal inputs in decimal, each tensor of at most kSmallTensor elements.
  bool inputs = false;
  static constexpr std::size_t kSmallTensor = 64;
};

/// The terminal text: the gate's table — one line per (kernel, dtype, property), or one for a dtype the kernel
/// declined entirely — then what was cut short and why, each kernel's contract, each run's coverage and time, and the
/// counterexamples grouped by root cause (failures first), numbered as `attncheck replay --failure N` takes them.
/// `opt` adds what Python's summary shows. Deterministic but for the time lines.
///
/// Example:
///   fmt::print("{}", to_text(doc));  // what `attncheck check --kernel bug:no_rescale --dtype f32` prints:
///   // kernel         dtype property                   tier      verdict      cases  declined undecided  worst err/β
///   // bug:no_rescale f32   accuracy                   required  FAIL             5         0         0     3.05e+05
///   // …
///   // failure: bug:no_rescale (f32) · step values: O out of bound · accuracy, long_rows, … · failures 1, 2, …
///   //   step values: O elements out of bound by up to 7.5e5× (O[0,0,0,0]: got 0.731059, exact 0.268941) — …
///   //   counterexample 1: accuracy — f32 B=1 Hq=1 … (step values, found after 5 cases, 16 shrinks)
///   //     O[0,0,0,0]: got 0x1.764d5p-1 (0.731058598), exact 0x1.136561454ba86p-2 (0.268941421), …
///   fmt::print("{}", to_text(doc, {.run_lines = true, .declined = true, .totals = true, .inputs = true}));
///   // bug:no_rescale f32: FAIL — 13 passed, 12 failed, 0 warnings, 0 undecided, 9 unsupported (235 cases)
///   // … and under each counterexample its small inputs, "    q = [[[[…]]]]"  (Python's Report.summary())
std::string to_text(const Document &doc, const TextOptions &opt = {});
/// Counterexample `failure` (1-based, Document::failures() order) as to_text shows it, under its group's headline
/// and caption (Python's Counterexample.describe()). Throws std::out_of_range when there is none such.
std::string counterexample_text(const Document &doc, std::size_t failure, const TextOptions &opt = {});
/// A run's verdict in one line (the progress bar's last word on it), e.g.
/// "bug:no_rescale f32: FAIL — 30 passed, 1 failed, 0 warnings, 0 undecided, 3 unsupported (512 cases)".
std::string run_line(const RunReport &r, bool strict);

/// A judgment of given tensors (attncheck.judge, `attncheck judge`) for people: the verdict with the problem and the
/// contract, one line per tensor (its worst element in hex and decimal, its error ÷ bound, how many elements exceed
/// their bound), the first failing check of the ladder, and the declarations under which the tensors would pass:
///   // attncheck judge: FAIL — f16 B=1 Hq=8 Hkv=2 Lq=128 Lk=128 D=64 Dv=64 causal, scale 0.125, contract defaults
///   //   O    worst O[0,3,17,5]: got 0x1.8p-1 (0.75), exact … (0.6875), bound 0.0012 — error ÷ bound 52.1;
///   //        3 of 65536 elements exceed their bound
///   //   first failing check: values — O[0,3,17,5]: …
///   //   would pass under causal=top-left: the causal mask is aligned top-left (…)
std::string judgment_text(const Judgment &j);

/// Where a judgment's inputs were kept, and the command that judges them again (empty: none fits, e.g. features
/// the CLI does not take).
struct JudgmentFiles {
  std::string inputs;  ///< the .npz of q, k, v, the outputs and dout, as `attncheck judge --inputs` reads it
  std::string replay;  ///< "attncheck judge --inputs inputs.npz --dtype f16 --scale … --causal --contract '…'"
};
/// The judgment as report.json (spec/REPORT_SCHEMA.md, Judgment documents: "format": "attncheck-judgment").
std::string judgment_json(const Judgment &j, const JudgmentFiles &files);
/// Writes report.json, summary.md and report.html of judgment `j` into `dir` (created if needed; as write_reports).
/// Throws std::runtime_error with a one-line message.
void write_judgment(const Judgment &j, const JudgmentFiles &files, const std::filesystem::path &dir);

/// Creates `dir` if needed and checks that it can be written; throws std::runtime_error with a one-line message.
void prepare_report_dir(const std::filesystem::path &dir);

/// Writes `text` to `path` (the --junit file): a new file renamed over a regular file or none, so that readers see the
/// whole old or the whole new text; through a link, a device or a pipe (`--junit /dev/stdout`), where a pipe nobody
/// reads is an error, not a wait. Throws std::runtime_error with a one-line message.
void write_file(const std::filesystem::path &path, const std::string &text);

/// Writes report.json, summary.md and report.html into `dir` (created if needed), each a new file renamed over its
/// name: what was there, a link a kernel planted included, is replaced, never written through. Throws
/// std::runtime_error with a one-line message when the directory cannot be written.
void write_reports(const Document &doc, const std::filesystem::path &dir);

}  // namespace attncheck::reporting
