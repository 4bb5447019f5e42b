// The check sequence (run.h): one for the CLI and Python, and the one place their run reports are assembled.
#include "attncheck/run.h"

#include "attncheck/check.h"

#include <fmt/core.h>

#include <algorithm>

namespace attncheck::gate {

namespace {

RunError usage(std::string input, const std::string &what) { return {kExitUsage, std::move(input), what}; }

/// The line of a property whose item never started: the check was interrupted first.
PropertyReport not_started(const std::string &id, const CheckOptions &opt) {
  PropertyReport p = property_line(id, opt.contract, opt.dtype);
  p.interrupted = true;
  p.note = "not run: interrupted";
  return p;
}

}  // namespace

KernelContract contract_of(std::string_view declared, std::string_view overrides) {
  try {
    return resolve_contract(declared, overrides);
  } catch (const ContractError &e) {
    throw usage("contract", std::string(e.what()) + " (spec/SPEC.md §3.1)");
  }
}

std::vector<Dtype> dtypes_of(const std::vector<std::string> &names) {
  std::vector<Dtype> dtypes;
  for (const std::string &d : names.empty() ? std::vector<std::string>{"f32", "f16", "bf16"} : names) {
    if (d != "f32" && d != "f16" && d != "bf16") throw usage("", "unknown dtype '" + d + "': f32, f16 or bf16");
    dtypes.push_back(parse_dtype(d));
  }
  return dtypes;
}

void check_property_ids(const std::vector<std::string> &ids) {
  for (const std::string &id : ids) {
    if (find_property_info(id)) continue;
    std::string known;
    for (const PropertyInfo &p : property_catalog()) known += (known.empty() ? "" : ", ") + std::string(p.id);
    throw usage("", "unknown property '" + id + "'; known: " + known);
  }
}

Check::Check(const CheckRequest &request, const Kernels &kernels, const Outputs &outputs,
             const std::atomic<bool> *cancel, bool part)
    : request_(request), kernels_(kernels), outputs_(outputs), cancel_(cancel), states_(kernels.list.size()) {
  check_property_ids(request.plan.properties);
  dtypes_ = dtypes_of(request.dtypes);
  if (request.shard && outputs.report_dir.empty())
    throw usage("", "shard " + std::to_string(request.shard->index) + "/" + std::to_string(request.shard->count) +
                        " (from " + request.shard->source +
                        ") writes a partial report for `attncheck merge`: give --report-dir");
  shard_ids_ = request.plan.properties;
  if (shard_ids_.empty())
    for (const PropertyInfo &p : property_catalog()) shard_ids_.push_back(std::string(p.id));
  for (const std::string &declared : kernels.declared) contracts_.push_back(contract_of(declared, request.contract));
  // Where reports go is checked before any case runs: a typo should not cost the whole check.
  try {
    if (!outputs.report_dir.empty() && !part) reporting::prepare_report_dir(outputs.report_dir);
    if (!outputs.junit.empty() && !part) reporting::write_file(outputs.junit, "");
  } catch (const std::runtime_error &e) {
    throw usage("", e.what());
  }
  // Read before any case runs, created when missing; a part reads what its check read (which stores the run's
  // counterexamples only once every part is done).
  try {
    if (!outputs.corpus.empty()) corpus_ = part ? read_corpus(outputs.corpus) : open_corpus(outputs.corpus);
  } catch (const CorpusError &e) {
    throw usage("corpus", e.what());
  }
}

CheckOptions Check::options(std::size_t n, Dtype dt) {
  CheckOptions opt = run_options(request_.plan, dt, contracts_[n], states_[n], cancel_);
  if (corpus_) opt.corpus = corpus_cases(*corpus_, kernels_.list[n]->name, dt);
  if (const std::optional<ShardRequest> &s = request_.shard) {
    // This shard's properties of the run, under the run's whole guard (a guard, not a share).
    const std::size_t run =
        n * dtypes_.size() + static_cast<std::size_t>(std::find(dtypes_.begin(), dtypes_.end(), dt) - dtypes_.begin());
    const reporting::Shard shard{s->index, s->count, {}};
    opt.properties.clear();
    for (std::size_t p = 0; p < shard_ids_.size(); ++p)
      if (shard.owns(run * shard_ids_.size() + p)) opt.properties.push_back(shard_ids_[p]);
  }
  return opt;
}

std::vector<reporting::Run> Check::run_items(const Hooks &hooks) {
  const bool sharded = request_.shard.has_value();
  const std::string profile(request_.plan.profile->name);
  auto options_for = [&](std::size_t n, Dtype dt) {
    CheckOptions opt = options(n, dt);
    if (hooks.adjust) hooks.adjust(opt, n, dt);
    return opt;
  };
  if (!hooks.items)
    return check_serially(kernels_.list, dtypes_, options_for, kernels_.source, profile, request_.quiet,
                          request_.strict, sharded);

  // Items elsewhere: one per property of each run, the runs' guards ending one after another as in a serial check.
  struct Planned {
    std::size_t kernel;
    CheckOptions opt;
    std::vector<std::string> ids;  // the properties it checks (a shard: those it owns)
  };
  std::vector<Planned> planned;
  std::vector<Item> items;
  auto end = std::chrono::steady_clock::now();
  for (std::size_t n = 0; n < kernels_.list.size(); ++n)
    for (Dtype dt : dtypes_) {
      CheckOptions opt = options_for(n, dt);
      std::vector<std::string> ids = opt.properties.empty() && !sharded ? shard_ids_ : opt.properties;
      end += opt.time_budget;
      for (const std::string &id : ids) items.push_back({n, dt, id, end});
      planned.push_back({n, std::move(opt), std::move(ids)});
    }
  const std::vector<std::optional<PropertyReport>> lines =
      items.empty() ? std::vector<std::optional<PropertyReport>>{} : hooks.items(items);
  std::vector<reporting::Run> runs;
  std::size_t i = 0;
  for (const Planned &p : planned) {
    std::vector<PropertyReport> properties;
    for (const std::string &id : p.ids) {  // an item's line comes with the evidence it gathered
      properties.push_back(lines[i] ? *lines[i] : not_started(id, p.opt));
      ++i;
    }
    RunReport r = assemble_run(run_header(*kernels_.list[p.kernel], p.opt), std::move(properties));
    if (!request_.quiet) fmt::print(stderr, "{}\n", reporting::run_line(r, request_.strict));
    runs.push_back({kernels_.source, profile, std::move(r)});
  }
  return runs;
}

CheckResult Check::run(const Hooks &hooks) {
  CheckResult result;
  reporting::Document &doc = result.doc;
  doc.tool_version = ATTNCHECK_VERSION;
  doc.strict = request_.strict;
  if (const std::optional<ShardRequest> &s = request_.shard) {
    doc.shard = reporting::Shard{s->index, s->count, shard_ids_};
    if (!request_.quiet)
      fmt::print(stderr, "shard {}/{} (from {}): every {}th of the {} (kernel, dtype, property) items\n", s->index,
                 s->count, s->source, s->count, kernels_.list.size() * dtypes_.size() * shard_ids_.size());
  }
  if (hooks.start) hooks.start();
  try {
    doc.runs = run_items(hooks);
  } catch (const std::runtime_error &e) {
    throw RunError(kExitInternal, "", e.what());
  }
  if (hooks.finish) hooks.finish(doc);
  try {
    if (!outputs_.report_dir.empty()) reporting::write_reports(doc, outputs_.report_dir);
    if (!outputs_.junit.empty()) reporting::write_file(outputs_.junit, reporting::to_junit(doc));
    if (corpus_) {  // every counterexample and warning of the run, for the next runs to replay first
      result.corpus_added = store_corpus(doc, outputs_.corpus);
      result.corpus_held = corpus_->entries.size();
    }
  } catch (const CorpusError &e) {
    throw usage("corpus", e.what());
  } catch (const std::runtime_error &e) {
    throw usage("", e.what());
  }
  const bool cancelled = cancel_ && cancel_->load();
  const bool nothing_owned =
      request_.shard && std::all_of(doc.runs.begin(), doc.runs.end(),
                                    [](const reporting::Run &r) { return r.report.properties.empty(); });
  result.exit_code = nothing_owned ? kExitPass : exit_code(doc, request_.strict, cancelled);
  return result;
}

CheckResult run(const CheckRequest &request, const Kernels &kernels, const Outputs &outputs,
                const std::atomic<bool> *cancel, const Hooks &hooks) {
  return Check(request, kernels, outputs, cancel).run(hooks);
}

}  // namespace attncheck::gate
