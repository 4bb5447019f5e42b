// The coverage model (SPEC.md §7.4): the input space the ABI and the contract allow, named as corners — buckets of
// one dimension each that kernels are known to special-case (a batch past 8, a GQA group of 7, Lk = 0, a zero-stride
// V, a strided dO, a boolean mask byte other than 1, …). The engine classifies every case of a property's search
// (corners_of) and counts, per corner, the cases that reached it and were decided (passed or failed) and the ones the
// kernel declined; a report sums them per run (run_coverage) and says "corners reached N/M" — a bug is caught only
// if its input arrives, and a report shows which inputs did.
//
// Example:
//   attncheck::CaseSpec s;
//   s.shape = {.B = 9, .Hq = 14, .Hkv = 2, .Lq = 1, .Lk = 0, .D = 64, .Dv = 64};
//   attncheck::CornerSet c = attncheck::corners_of(s, {.backward = false, .lse = true});
//   // c holds "b9+", "g5-8", "g-npot5+", "gqa-kv2+", "lq1", "lk0", "d64", …
#pragma once

#include "attncheck/case.h"

#include <array>
#include <bitset>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace attncheck {

struct RunReport;

/// What a corner needs of a run besides its feature to be reachable at all.
enum class CornerNeeds : std::uint8_t {
  nothing,
  backward,      ///< a backward call (dO's layouts): some property of the run calls the backward
  lse,           ///< an LSE output (its layouts): the contract's lse is not none
  empty_rows,    ///< rows that see no key: the contract fixes them (empty-rows=zero)
  two_features,  ///< two features in one case: the contract declares two, one of them combinable (kCombinableFeatures)
  declared_features,  ///< an independence property's case (CornerContext::declared_features) with a declared feature
};

/// One bucket of one dimension of the input space.
struct Corner {
  std::string_view id;         ///< stable and short: the key in report.json ("g5-8", "v-expand-heads")
  std::string_view dimension;  ///< "B", "Hq/Hkv", "Lq, Lk", "D, Dv", "layout", "mask", "values", "features"
  std::string_view name;       ///< what it is, for people: "Hq/Hkv in 5…8"
  std::uint32_t feature = 0;   ///< ATTNCHECK_FEATURE_* the contract must declare (0: none)
  CornerNeeds needs = CornerNeeds::nothing;
};

/// Every corner of the model, in report order (dimension by dimension).
std::span<const Corner> corners();
inline constexpr std::size_t kCornerCount = 112;
/// The index of corner `id` in corners(), or nullopt.
std::optional<std::size_t> corner_index(std::string_view id);

using CornerSet = std::bitset<kCornerCount>;
/// The calls a case becomes: whether the property calls the backward (dO counts) and passes an LSE (its layout counts).
struct CornerContext {
  bool backward = false;
  bool lse = true;
  /// The property needs no feature of its own and draws the declared ones now and then (CaseOptions::declared_features:
  /// the independence properties).
  bool declared_features = false;
};
/// The corners of these ids; throws std::invalid_argument for an id that names none.
CornerSet corners_named(std::span<const std::string_view> ids);
/// The corners case `s` reaches, read off the problem the kernel is given (CaseSpec::problem_shape, the tensors'
/// layouts, the feature settings).
CornerSet corners_of(const CaseSpec &s, CornerContext ctx);

/// Per corner, the cases of a property's search that reached it: decided (pass or fail) and declined by the kernel.
/// Undecided cases are in neither: they are no evidence.
struct Coverage {
  std::array<int, kCornerCount> decided{}, declined{};
  int backward = 0;  ///< of the cases counted, those of a property that called the backward (dO's corners count)
  void add(const CornerSet &c, bool was_decided, CornerContext ctx);
  Coverage &operator+=(const Coverage &o);
  bool empty() const;
  friend bool operator==(const Coverage &, const Coverage &) = default;
};

/// A corner's standing in a run.
enum class CornerStatus : std::uint8_t {
  reached,       ///< decided cases reached it
  declined,      ///< cases reached it, and the kernel declined every one
  not_reached,   ///< reachable under the contract, and no case reached it
  not_declared,  ///< its feature, or the run's dtype, is not in the contract
  not_applicable,  ///< the run cannot reach it: no backward property ran, lse=none, empty-rows=unspecified, or fewer
                   ///< than two combinable features declared
};
/// "reached", "declined", "not reached", "not declared", "not applicable".
std::string_view corner_status_name(CornerStatus s);
/// The name as an identifier, its words joined by `joiner`: "not_reached" (report.json's keys), "not-reached" (CSS).
std::string corner_status_id(CornerStatus s, char joiner = '_');

/// One corner of a run: its counts summed over the run's properties, and its status.
struct CornerCount {
  const Corner *corner = nullptr;
  int decided = 0, declined = 0;
  CornerStatus status = CornerStatus::not_reached;
};
/// A run's coverage: every corner, in corners() order.
struct RunCoverage {
  std::vector<CornerCount> corners;
  /// Corners the run could reach: reached, declined or not reached.
  int applicable() const;
  int count(CornerStatus s) const;
  /// The ids of the corners of status `s`, in order, comma-separated, the first `most` of them ("… and 3 more").
  std::string ids(CornerStatus s, std::size_t most = kCornerCount) const;
  /// "corners reached 102/104 (declined: paged-page1; not reached: lk-16k)", naming at most kNamed of each.
  std::string describe() const;
  static constexpr std::size_t kNamed = 12;
};
/// The coverage of a run: its properties' counts summed, each corner's status under the run's contract. A corner
/// that needs the backward is applicable when cases of a property that calls the backward were counted.
RunCoverage run_coverage(const RunReport &r);

}  // namespace attncheck
