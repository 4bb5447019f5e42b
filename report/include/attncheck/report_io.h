// Reports of a check run, for people and for machines: report.json (replayable, schema in spec/REPORT_SCHEMA.md),
// summary.md (a CI job summary or pull-request comment), report.html (self-contained, for reading a
// counterexample) and JUnit XML (one testcase per kernel, dtype and property).
//
// Every writer is deterministic: the same Document gives the same bytes (wall times are never written).
//
// Example:
//   attncheck::reporting::Document doc;
//   doc.tool_version = "0.1.0";
//   doc.runs.push_back({source, "default", attncheck::check(kernel, opt), {}});
//   attncheck::reporting::add_evidence(doc.runs.back(), kernel);      // re-runs each minimal counterexample
//   attncheck::reporting::write_reports(doc, "reports/");             // report.json, summary.md, report.html
#pragma once

#include "attncheck/kernel_abi.h"
#include "attncheck/report.h"

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
  enum class Kind : std::uint8_t { builtin, plugin, exec };
  Kind kind = Kind::builtin;
  std::string location;  ///< the plugin's path or the exec command; empty for builtin
  friend bool operator==(const KernelSource &, const KernelSource &) = default;
};
std::string_view kind_name(KernelSource::Kind k);  ///< "builtin", "plugin", "exec"

/// What the kernel returned on a minimal counterexample, element by element, for the output tensor the failure
/// is in — and the exact attention probabilities of the case, for the heatmaps.
struct Evidence {
  std::string tensor;                ///< "O", "LSE", "dQ", "dK" or "dV"
  std::vector<std::int64_t> shape;   ///< its logical shape
  std::vector<double> got, exact, bound;  ///< row-major; bound +∞ where the model cannot decide
  std::vector<double> probabilities;      ///< exact P [B,Hq,Lq,Lk] of the case; empty when larger than kMaxProbabilities
  std::string call_error;                 ///< the kernel's error message when the call itself failed
  static constexpr std::size_t kMaxProbabilities = 1 << 16;
  /// Row-major index of the largest |got − exact| / bound, or −1.
  std::int64_t worst_index() const;
};

/// One checked (kernel, dtype).
struct Run {
  KernelSource source;
  std::string profile;  ///< "quick", "default" or "thorough"
  Report report;
  /// Parallel to report.properties: evidence for each property with a counterexample (nullopt otherwise).
  std::vector<std::optional<Evidence>> evidence;
};

struct Document {
  std::string tool_version;
  std::vector<Run> runs;
  /// Every counterexample in document order: (run index, property index). `attncheck replay --failure N` is the
  /// N-th (1-based) of these.
  std::vector<std::pair<std::size_t, std::size_t>> failures() const;
};

/// Re-runs each counterexample's minimal case on `kernel` (forward, and backward for gradient properties) and
/// fills run.evidence with the failing tensor's values, the exact values, the bounds (error model, the run's
/// profile) and the exact probabilities.
void add_evidence(Run &run, const attncheck_kernel &kernel);

/// report.json. Inputs of every counterexample are exact (C99 hex floats), so replay rebuilds the very case.
std::string to_json(const Document &doc);
/// Parses report.json (throws ReportError).
Document from_json(std::string_view text);
/// summary.md: verdict table per kernel and dtype, then each counterexample (shape, step, worst element in hex and
/// decimal, the command that replays it).
std::string to_markdown(const Document &doc);
/// report.html: self-contained (inline CSS and SVG); per property verdicts; for each counterexample its inputs,
/// a heatmap of error ÷ bound over the output, the attention probabilities, an error histogram. Every string that
/// came from a kernel or a plugin is HTML-escaped.
std::string to_html(const Document &doc);
/// JUnit XML: one <testcase> per (kernel, dtype, property); failures carry the counterexample text.
std::string to_junit(const Document &doc);

/// Creates `dir` if needed and checks that it can be written; throws std::runtime_error with a one-line message.
void prepare_report_dir(const std::filesystem::path &dir);

/// Writes report.json, summary.md and report.html into `dir` (created if needed). Throws std::runtime_error with a
/// one-line message when the directory cannot be written.
void write_reports(const Document &doc, const std::filesystem::path &dir);

}  // namespace attncheck::reporting
