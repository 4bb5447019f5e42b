// Internals shared by the report writers: exact float text, escaping, enum names and tensor shapes.
#pragma once

#include "attncheck/report_io.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attncheck::reporting::detail {

/// C99 hex float ("0x1.8p-1"), or "inf", "-inf", "nan" (NaN's sign and payload are not kept).
std::string hex(double x);
/// Inverse of hex (any strtod spelling of a whole string); false when `s` is not a number.
bool parse_hex(std::string_view s, double *out);
/// "%.9g": the decimal shown next to a hex value.
std::string decimal(double x);
/// "0x1.8p-1 (0.75)".
std::string hex_dec(double x);
/// An error ÷ bound for people: "%.3g", "inf" for +∞.
std::string ratio_text(double r);

/// The evidence of property `pi` of `run`, or nullptr.
const Evidence *evidence_of(const Run &run, std::size_t pi);

/// &, <, >, ", ' as entities: safe in HTML/XML text and attribute values. Control characters other than tab,
/// newline and carriage return (invalid in XML 1.0) become U+FFFD.
std::string xml_escape(std::string_view s);
/// Text safe inside a Markdown table cell or paragraph: HTML specials as entities, '|' and '`' escaped, newlines
/// as spaces.
std::string md_escape(std::string_view s);
/// The first line of `s` (for one-line summaries of multi-line texts).
std::string first_line(std::string_view s);

/// Logical shapes of a case's tensors.
std::vector<std::int64_t> q_shape(const Shape &s);
std::vector<std::int64_t> k_shape(const Shape &s);
std::vector<std::int64_t> v_shape(const Shape &s);
std::vector<std::int64_t> o_shape(const Shape &s);
/// Product of the dimensions.
std::size_t numel(const std::vector<std::int64_t> &shape);

/// The evidence's worst element when it shows the failure itself (error ÷ bound > 1). The evidence is the kernel
/// on the problem that failed (Counterexample::judged), but a property that compares the kernel with itself (bits, or two
/// problems within the sum of their bounds) may fail where each result alone is within its bound: its evidence is
/// then context and has no telling element.
std::optional<std::size_t> telling_worst(const Evidence &e);

/// The two problems of an evidence with an original (a metamorphic failure) in one plain-text line: the failing
/// element's row (else the first that differs) on both, and the rows that differ, e.g. "row O[0,0,3] differs (the
/// failing element's): original [0.5, 0.25] vs modified (keys hidden from row 3 …) [0.75, 0.125]; exact [0.5, 0.25]
/// on both; 1 of 4 rows differs beyond what the property allows: O[0,0,3]". "" without an original.
std::string comparison_text(const Evidence &e, std::string_view failing_what);
/// The row comparison_text shows: the marked row, else the first differing row, else −1.
std::int64_t shown_row(const Evidence &e);

/// Whether `p` is cut short: undecided, out of budget or short of its `planned` cases — not one with a
/// counterexample (which ends a search by design), one its contract turns off, or one the kernel declined.
bool cut_short(const PropertyReport &p, int planned);
/// Whether the kernel declined every property of `r` (a run of a dtype its contract declares, with at least one).
bool declined_entirely(const RunReport &r);
/// One line per declared shape of `r` (CheckOptions::shapes; none declared: empty), over its properties:
/// "llama-3-8b decode: B=2 …: 21 passed (worst err/bound 0.42); failed: lse (1.7); undecided: …; declined by the
/// kernel: 0; not taken: 9".
std::vector<std::string> shape_lines(const RunReport &r);
/// N of `attncheck replay --failure N` for `member`, one of `failures` (Document::failures()).
std::size_t failure_number(const std::vector<std::pair<std::size_t, std::size_t>> &failures,
                           std::pair<std::size_t, std::size_t> member);

/// "attncheck replay report.json --failure N".
std::string replay_command(std::size_t failure_number);

}  // namespace attncheck::reporting::detail
