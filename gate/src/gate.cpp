#include "attncheck/gate.h"

#include "progress.h"

#include <fmt/core.h>

namespace attncheck::gate {

const ProfileSpec *find_profile(std::string_view name) {
  for (const ProfileSpec &p : kProfiles)
    if (p.name == name) return &p;
  return nullptr;
}

CheckOptions run_options(const Request &request, Dtype dt, const KernelContract &contract,
                          KernelRunState &state, const std::atomic<bool> *cancel) {
  const ProfileSpec &prof = *request.profile;
  CheckOptions opt;
  opt.dtype = dt;
  opt.properties = request.properties;
  opt.cases = request.cases.value_or(prof.cases);
  opt.seed = request.seed;
  opt.time_budget = std::chrono::milliseconds(static_cast<std::int64_t>(
      1000 * request.time_budget.value_or(static_cast<double>(prof.budget.count()))));
  opt.contract = contract;
  opt.cancel = cancel;
  opt.shared = &state;
  opt.huge_cases = prof.name == "thorough";
  opt.memory_limit_mib = request.memory_limit_mib;
  opt.evidence = request.evidence;
  opt.shapes = request.shapes;
  if (request.shape_pool == "auto") {
    opt.detect_compile = true;
  } else {
    opt.shape_pool = std::stoi(request.shape_pool);
  }
  return opt;
}

RunReport run_header(const attncheck_kernel &kernel, const CheckOptions &opt) {
  RunReport r;
  r.kernel = kernel.name;
  r.dtype = opt.dtype;
  r.contract = opt.contract;
  r.seed = opt.seed;
  r.cases = opt.cases;
  return r;
}

int exit_code(const reporting::Document &doc, bool strict, bool cancelled) {
  bool fail = false, error = false, undecided = cancelled, any_ran = false;
  for (const reporting::Run &run : doc.runs) {
    const Verdict v = run.report.verdict(strict);
    fail |= v == Verdict::fail;
    error |= v == Verdict::error;
    undecided |= v == Verdict::undecided;
    any_ran |= v != Verdict::unsupported;
  }
  if (fail) return kExitCounterexample;  // evidence against the kernel stands whatever else went wrong
  if (error) return kExitInternal;
  return (undecided || !any_ran) ? kExitInconclusive : kExitPass;
}

std::vector<reporting::Run> check_serially(const std::vector<const attncheck_kernel *> &kernels,
                                           const std::vector<Dtype> &dtypes,
                                           const std::function<CheckOptions(std::size_t, Dtype)> &options_for,
                                           const reporting::KernelSource &src, std::string_view profile,
                                           bool quiet, bool strict, bool sharded) {
  std::vector<reporting::Run> runs;
  Progress progress(static_cast<int>(kernels.size() * dtypes.size()), quiet);
  for (std::size_t n = 0; n < kernels.size(); ++n)
    for (Dtype dt : dtypes) {
      CheckOptions opt = options_for(n, dt);
      if (sharded && opt.properties.empty()) {  // another shard's run
        runs.push_back({src, std::string(profile), run_header(*kernels[n], opt)});
        continue;
      }
      opt.on_progress = [&progress](const CheckProgress &p) { progress.update(p); };
      progress.start_run(fmt::format("{} {}", kernels[n]->name, dtype_name(dt)));
      reporting::Run run{src, std::string(profile), check(*kernels[n], opt)};
      progress.finish_run(reporting::run_line(run.report, strict));
      runs.push_back(std::move(run));
    }
  return runs;
}

}  // namespace attncheck::gate
