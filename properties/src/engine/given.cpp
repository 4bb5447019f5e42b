// Judging given tensors (given.h): the outputs stand in for a call's, and accuracy's and gradient_accuracy's ladders
// judge them as they judge a kernel's.
#include "attncheck/given.h"

#include "attncheck/check.h"
#include "attncheck/error_model.h"
#include "attncheck/property.h"
#include "diagnosis/diagnosis.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <stdexcept>

namespace attncheck {

namespace {

constexpr std::string_view kGradientProperty = "gradient_accuracy";

std::string dims(const std::vector<std::int64_t> &shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// `t` has `shape` and one of `dtypes`, else std::invalid_argument naming `name` and what it should be.
void require(const Tensor &t, std::string_view name, const std::vector<std::int64_t> &shape,
             std::initializer_list<Dtype> dtypes) {
  if (t.shape() != shape)
    throw std::invalid_argument(std::string(name) + " has shape " + dims(t.shape()) + "; this problem's " +
                                std::string(name) + " is " + dims(shape) + " (SPEC.md §2.1)");
  for (Dtype d : dtypes)
    if (t.dtype() == d) return;
  std::string want;
  for (Dtype d : dtypes) want += (want.empty() ? "" : " or ") + std::string(dtype_name(d));
  throw std::invalid_argument(std::string(name) + " is " + std::string(dtype_name(t.dtype())) + "; expected " + want +
                              " (the storage dtype of q, k, v" + (name == "lse" ? ", or float32)" : ")"));
}

/// A tensor's elements held against their exact values and bounds as the ladder holds them: an element whose bound
/// or exact value is not finite is undecided unless it is exact; an infinite result the bound lets the exact value
/// round to counts as within; an LSE of +∞ where the exact LSE is −∞ is exact (SPEC.md §2.3); NaN is +∞ wrong.
TensorJudgment judge_tensor(std::string_view name, const Tensor &got_t, const std::vector<double> &exact,
                            const std::vector<double> &bound) {
  TensorJudgment j;
  j.tensor = std::string(name);
  j.shape = got_t.shape();
  const std::vector<double> got = got_t.to_vector();
  j.elements = static_cast<std::int64_t>(got.size());
  std::int64_t worst = -1;
  double worst_ratio = -1;
  for (std::size_t x = 0; x < got.size(); ++x) {
    double g = got[x];
    if (name == "LSE" && exact[x] == -INFINITY && g == INFINITY) g = -INFINITY;
    if (!std::isfinite(bound[x]) || std::isnan(exact[x])) {
      if (g != exact[x]) ++j.undecided;
      continue;
    }
    double r = overflow_within_bound(g, exact[x], bound[x], got_t.dtype()) ? 0 : error_ratio(g, exact[x], bound[x]);
    if (std::isnan(r)) r = std::numeric_limits<double>::infinity();
    if (r > 1) ++j.exceeding;
    if (r > worst_ratio) worst_ratio = r, worst = static_cast<std::int64_t>(x);
  }
  if (worst < 0) return j;
  const auto w = static_cast<std::size_t>(worst);
  j.worst_index = element_index(j.shape, worst);
  j.got = got[w], j.exact = exact[w], j.bound = bound[w], j.ratio = worst_ratio;
  return j;
}

/// The ladders on `given` under `contract`; `record`: each tensor's judgment too.
Judgment ladders(Problem p, const GivenOutputs &given, const KernelContract &contract, bool record) {
  const Shape &s = p.shape;
  const Dtype dt = p.dtype();
  const bool top_left = contract.causal == CausalAlign::top_left;
  if (p.params.mask != Mask::none) p.params.mask = top_left ? Mask::causal_top_left : Mask::causal;
  p.features.top_left = top_left;  // a window aligns as the causal mask does (SPEC.md §2.7)
  auto fr = std::make_shared<ForwardRun>();
  fr->call.status = ATTNCHECK_OK;
  fr->out = *given.out;
  fr->has_lse = given.lse.has_value();
  fr->lse = given.lse ? *given.lse : make_lse(s);
  if (!given.lse) fr->lse.fill_storage(std::numeric_limits<double>::quiet_NaN());

  // What the ladders saw, by tensor: the screen may judge twice (fast, then MPFR) and the last look is the one kept.
  auto seen = std::make_shared<std::map<std::string, TensorJudgment>>();
  SeenTensor look;
  if (record)
    look = [seen](std::string_view name, const Tensor &got, const std::vector<double> &exact,
                  const std::vector<double> &bound) {
      (*seen)[std::string(name)] = judge_tensor(name, got, exact, bound);
    };
  const PrecisionProfile precision = contract.precision(dt);
  Judgment j;
  j.shape = s, j.dtype = dt, j.contract = contract, j.scale = p.params.scale, j.mask = p.params.mask;
  j.features = p.features;
  j.forward = forward_ladder(precision, contract, p, fr, look);
  if (given.dq) {
    j.backward_tier = property_tier(kGradientProperty, contract, dt);
    if (j.backward_tier == Tier::off) {
      j.notes.push_back("dQ, dK, dV not judged: the contract asks nothing of gradient_accuracy (" +
                        contract.describe_changes() + ")");
    } else if (contract.empty_rows == EmptyRows::unspecified && any_row_sees_no_key(p)) {
      j.notes.push_back("dQ, dK, dV not judged: under empty-rows=unspecified the rows that see no key are the "
                        "kernel's to fill, and they feed the gradients (SPEC.md §3.1)");
    } else {
      auto br = std::make_shared<BackwardRun>();
      br->call.status = ATTNCHECK_OK;
      br->dq = *given.dq, br->dk = *given.dk, br->dv = *given.dv;
      j.backward = backward_ladder(precision, p, fr, br, look);
    }
  }
  for (const char *name : {"O", "LSE", "dQ", "dK", "dV"})
    if (auto it = seen->find(name); it != seen->end()) j.tensors.push_back(std::move(it->second));
  return j;
}

}  // namespace

Verdict Judgment::verdict() const {
  const bool backward_fails = backward && backward->verdict == Verdict::fail;
  if (forward.verdict == Verdict::fail || (backward_fails && backward_tier == Tier::required)) return Verdict::fail;
  if (backward_fails) return Verdict::warn;
  if (forward.verdict == Verdict::undecided || (backward && backward->verdict == Verdict::undecided))
    return Verdict::undecided;
  return Verdict::pass;
}

namespace {
/// Tells `on_progress` of the rows the error model bounds on this thread while it lives (bounded_rows_hook).
class BoundedRows {
 public:
  BoundedRows(const std::function<void(const JudgeProgress &)> &on_progress, std::int64_t total)
      : on_progress_(on_progress), progress_{.rows = 0, .total = total, .explaining = false} {
    if (!on_progress_) return;
    bounded_rows_hook() = [this](std::int64_t rows) {
      progress_.rows = std::min(progress_.total, progress_.rows + rows);
      on_progress_(progress_);
    };
  }
  ~BoundedRows() {
    if (on_progress_) bounded_rows_hook() = nullptr;
  }
  BoundedRows(const BoundedRows &) = delete;
  BoundedRows &operator=(const BoundedRows &) = delete;
  /// The first pass is done; what is bounded next is an explanation's.
  void explaining() {
    progress_.explaining = true;
    if (on_progress_) on_progress_(progress_);
  }

 private:
  const std::function<void(const JudgeProgress &)> &on_progress_;
  JudgeProgress progress_;
};
}  // namespace

Judgment judge_given(const Problem &p, const GivenOutputs &given, const KernelContract &contract, bool explain,
                     const std::function<void(const JudgeProgress &)> &on_progress) {
  const Shape &s = p.shape;
  const Dtype dt = p.dtype();
  if (!contract.implements(dt))
    throw std::invalid_argument("the contract does not declare " + std::string(dtype_name(dt)) + " (dtypes=" +
                                dtype_list(contract.dtypes) + "): nothing to judge q, k, v of that dtype against");
  if (!given.out) throw std::invalid_argument("out is missing: judge needs the kernel's output O");
  require(*given.out, "out", {s.B, s.Hq, s.Lq, s.Dv}, {dt});
  if (given.lse) require(*given.lse, "lse", {s.B, s.Hq, s.Lq}, {Dtype::f32, dt});
  const int gradients = given.dq.has_value() + given.dk.has_value() + given.dv.has_value();
  if (gradients != 0 && gradients != 3) throw std::invalid_argument("give dq, dk and dv together, or none of them");
  if (gradients) {
    if (!p.dout) throw std::invalid_argument("dq, dk, dv need dout, the gradient of the loss the backward was given");
    if (!given.lse && contract.lse != LseOutput::none)
      throw std::invalid_argument("dq, dk, dv need lse, the forward's log-sum-exp the backward read (or declare "
                                  "lse=none)");
    require(*given.dq, "dq", {s.B, s.Hq, s.Lq, s.D}, {dt});
    require(*given.dk, "dk", {s.B, s.Hkv, s.Lk, s.D}, {dt});
    require(*given.dv, "dv", {s.B, s.Hkv, s.Lk, s.Dv}, {dt});
  }
  BoundedRows meter(on_progress, s.B * s.Hq * s.Lq * (gradients ? 2 : 1));
  Judgment j = ladders(p, given, contract, /*record=*/true);
  const bool forward_failed = j.forward.verdict == Verdict::fail;
  if (explain && (forward_failed || (j.backward && j.backward->verdict == Verdict::fail))) {
    meter.explaining();
    j.explained_by = diagnosis::explain_given(forward_failed ? j.forward : *j.backward, contract, dt,
                                              [&](const KernelContract &changed) {
                                                const Judgment again = ladders(p, given, changed, false);
                                                return forward_failed || !again.backward ? again.forward
                                                                                         : *again.backward;
                                              });
  }
  if (explain && forward_failed && j.explained_by.empty())
    j.hints =
        diagnosis::given_hints(p, contract.precision(dt), contract, *given.out, given.lse ? &*given.lse : nullptr);
  return j;
}

}  // namespace attncheck
