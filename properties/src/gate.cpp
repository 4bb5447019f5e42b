#include "attncheck/gate.h"

#include "attncheck/error_model.h"
#include "attncheck/kernel_call.h"
#include "attncheck/random_problem.h"
#include "attncheck/reference.h"

#include <random>

namespace attncheck {

GateRow::Verdict GateRow::verdict() const {
  if (cases == 0) return Verdict::unsupported;
  return (errors == 0 && forward.ratio <= 1 && backward.ratio <= 1) ? Verdict::pass : Verdict::fail;
}

std::string_view verdict_name(GateRow::Verdict v) {
  switch (v) {
    case GateRow::Verdict::pass: return "pass";
    case GateRow::Verdict::fail: return "FAIL";
    case GateRow::Verdict::unsupported: return "unsupported";
  }
  return "?";
}

namespace {
std::string where(const Problem &p, const char *tensor, const Worst &w) {
  return p.shape.describe() + " " + std::string(mask_name(p.params.mask)) + " " + p.q.describe() + ": " + tensor +
         " " + w.describe();
}

void track(GateRow &row, Worst &slot, const Worst &w, const Problem &p, const char *tensor) {
  if (w.ratio > slot.ratio || slot.index < 0) {
    const bool worst_overall = w.ratio > std::max(row.forward.ratio, row.backward.ratio);
    slot = w;
    if (worst_overall && row.errors == 0) row.worst_case = where(p, tensor, w);
  }
}
}  // namespace

std::vector<GateRow> run_gate(std::span<const attncheck_kernel> kernels, const GateOptions &opt,
                              const GateProgress &progress) {
  std::vector<GateRow> rows;
  for (Dtype dt : opt.dtypes) {
    const std::size_t first = rows.size();
    for (const attncheck_kernel &k : kernels) {
      GateRow r;
      r.kernel = k.name ? k.name : "?";
      r.dtype = dt;
      r.has_backward = opt.backward && k.backward != nullptr;
      rows.push_back(r);
    }
    // Seeded per dtype, so one dtype's problems do not depend on which other dtypes run.
    std::mt19937_64 rng(opt.seed * 0x9e3779b97f4a7c15ull + static_cast<std::uint64_t>(dt));
    const PrecisionProfile profile = PrecisionProfile::for_storage(dt);
    for (int c = 0; c < opt.cases; ++c) {
      RandomProblemOptions popt;
      popt.backward = opt.backward;
      const Problem p = random_problem(rng, dt, popt);
      std::optional<ExactForward> exact;
      std::optional<ForwardBounds> fb;
      std::optional<ExactBackward> exact_b;
      std::optional<BackwardBounds> bb;
      for (std::size_t n = 0; n < kernels.size(); ++n) {
        const attncheck_kernel &k = kernels[n];
        GateRow &row = rows[first + n];
        Tensor out = make_out(p.shape, dt), lse = make_lse(p.shape);
        const CallResult fr = call_forward(k, p, out, &lse);
        if (fr.status == ATTNCHECK_UNSUPPORTED) {
          ++row.unsupported;
          continue;
        }
        ++row.cases;
        if (!fr.ok()) {
          if (row.errors++ == 0) row.worst_case = p.shape.describe() + ": forward returned an error: " + fr.message;
          continue;
        }
        if (!exact) {
          exact = reference_forward(p);
          fb = forward_bounds(p, *exact, profile);
        }
        track(row, row.forward, compare(out, exact->out, fb->out), p, "O");
        track(row, row.forward, compare(lse, exact->lse, fb->lse), p, "LSE");
        if (!row.has_backward) continue;
        Tensor dq = Tensor::contiguous(dt, p.q.shape()), dk = Tensor::contiguous(dt, p.k.shape()),
               dv = Tensor::contiguous(dt, p.v.shape());
        const CallResult br = call_backward(k, p, out, &lse, dq, dk, dv);
        if (br.status == ATTNCHECK_UNSUPPORTED) continue;
        if (!br.ok()) {
          if (row.errors++ == 0) row.worst_case = p.shape.describe() + ": backward returned an error: " + br.message;
          continue;
        }
        if (!exact_b) {
          exact_b = reference_backward(p);
          bb = backward_bounds(p, *exact, profile);
        }
        track(row, row.backward, compare(dq, exact_b->dq, bb->dq), p, "dQ");
        track(row, row.backward, compare(dk, exact_b->dk, bb->dk), p, "dK");
        track(row, row.backward, compare(dv, exact_b->dv, bb->dv), p, "dV");
      }
      if (progress) progress(dt, c + 1, opt.cases);
    }
  }
  return rows;
}

}  // namespace attncheck
