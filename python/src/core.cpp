// attncheck._core: the C++ gate behind the Python package (python/attncheck). The package's kernel object (a Python
// function wrapped by attncheck/_kernel.py) becomes an ABI kernel (BoundKernel): each call hands it q, k, v (and for
// backward out, lse, dout) as zero-copy NumPy views in the layouts the gate generates — strided, padded, bfloat16 as
// its uint16 bits — and stores what it returns into the gate's output tensors. An exec command (isolate=True) runs
// through ExecKernel instead. Everything else — generation, reference, error model, shrinking, reports — is the
// same code as `attncheck check`.
#include "attncheck/corpus.h"
#include "attncheck/gate.h"
#include "attncheck/infer.h"
#include "attncheck/judge.h"
#include "attncheck/replay.h"
#include "attncheck/run.h"
#include "attncheck/shapes.h"

#include "attncheck/bound_kernel.h"
#include "attncheck/check.h"
#include "attncheck/exec_kernel.h"
#include "attncheck/features.h"
#include "attncheck/npy.h"
#include "attncheck/report_io.h"
#include "crash.h"

#include <cxxabi.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <iterator>
#include <mutex>
#include <thread>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <unistd.h>
#include <utility>
#include <vector>

namespace nb = nanobind;
using namespace attncheck;
namespace crash = attncheck::python::crash;

namespace {

/// A kernel of the caller's: (name, kernel object, has backward, declared contract, module:qualname).
using PyKernelSpec = std::tuple<std::string, nb::object, bool, std::string, std::string>;

/// A NumPy view of `t` (None for null), zero-copy, in its strides; valid during the call only.
nb::object view_of(const DLTensor *t) {
  if (!t) return nb::none();
  std::vector<std::size_t> shape(static_cast<std::size_t>(t->ndim));
  std::vector<std::int64_t> strides(static_cast<std::size_t>(t->ndim));
  std::int64_t compact = 1;
  for (int d = t->ndim - 1; d >= 0; --d) {
    shape[static_cast<std::size_t>(d)] = static_cast<std::size_t>(t->shape[d]);
    strides[static_cast<std::size_t>(d)] = t->strides ? t->strides[d] : compact;
    compact *= t->shape[d];
  }
  nb::dlpack::dtype dt{static_cast<std::uint8_t>(t->dtype.code), t->dtype.bits, t->dtype.lanes};
  // NumPy has no bfloat16: its bits travel as uint16, as in the exec protocol's .npy files.
  if (t->dtype.code == kDLBfloat) dt = nb::dtype<std::uint16_t>();
  char *data = static_cast<char *>(t->data) + t->byte_offset;
  nb::ndarray<nb::numpy> a(data, shape.size(), shape.data(), nb::handle(), strides.data(), dt);
  return nb::cast(a, nb::rv_policy::reference);
}

/// Stores a returned array into `t` (its dtype and logical shape; bfloat16 as uint16 bits). Throws npy::NpyError.
void store(nb::handle result, DLTensor &t, const char *name) {
  const auto a = nb::cast<nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>>(result);  // JAX's are read-only
  npy::Array arr;
  DLDataType dt{static_cast<std::uint8_t>(a.dtype().code), a.dtype().bits, a.dtype().lanes};
  if (dt.code == kDLUInt && dt.bits == 16) dt.code = kDLBfloat;  // bfloat16 bits, as view_of hands them out
  arr.descr = std::string(npy::descr_of(dt));
  if (arr.descr.empty()) arr.descr = "dtype code " + std::to_string(dt.code) + " bits " + std::to_string(dt.bits);
  for (std::size_t d = 0; d < a.ndim(); ++d) arr.shape.push_back(static_cast<std::int64_t>(a.shape(d)));
  arr.data.resize(a.nbytes());
  std::memcpy(arr.data.data(), a.data(), a.nbytes());
  npy::copy_into(arr, t, name);
}

/// The keyword arguments of a call's features (spec/SPEC.md §2.7) for the function: window=(left, right),
/// softcap=c, alibi_slopes, sinks ([Hq] float32) and attn_mask (uint8 boolean or float32 additive) as views. Python
/// functions declare only these (attncheck/_api.py): the others change the tensors' layouts.
nb::dict feature_arguments(const attncheck_params &p) {
  nb::dict kw;
  if (p.features == 0 || !p.args) return kw;
  const attncheck_args &a = *p.args;
  if (p.features & ATTNCHECK_FEATURE_WINDOW) kw["window"] = nb::make_tuple(a.window_left, a.window_right);
  if (p.features & ATTNCHECK_FEATURE_SOFTCAP) kw["softcap"] = static_cast<double>(a.softcap);
  if (p.features & ATTNCHECK_FEATURE_ALIBI) kw["alibi_slopes"] = view_of(a.alibi_slopes);
  if (p.features & ATTNCHECK_FEATURE_SINKS) kw["sinks"] = view_of(a.sinks);
  if (p.features & ATTNCHECK_FEATURE_MASK) kw["attn_mask"] = view_of(a.attn_mask);
  return kw;
}

/// Set when the caller pressed Ctrl-C during a call: the check stops and reports what it decided.
std::atomic<bool> g_cancel{false};

/// Set when the caller pressed Ctrl-C (KeyboardInterrupt): the check stops, and check() raises once it reported.
std::atomic<bool> g_interrupted{false};

/// The arguments of `kernel.call(backward, scale, causal, ins, outs, features)` for call `c`: views of its tensors,
/// or (`copies`) arrays of their own, which a call left running past the check may go on reading. Needs the GIL.
nb::tuple call_arguments(const KernelCall &c, bool copies) {
  const auto arg = [copies](nb::object view) { return copies && nb::hasattr(view, "copy") ? view.attr("copy")() : view; };
  nb::list ins, outs;
  for (const DLTensor *t : c.in) ins.append(arg(view_of(t)));
  for (const DLTensor *t : c.out) outs.append(arg(view_of(t)));  // their dtypes and shapes; None for an unwanted LSE
  nb::dict features;
  for (auto [key, value] : feature_arguments(c.params)) features[key] = arg(nb::borrow(value));
  return nb::make_tuple(c.backward, c.params.scale, c.params.mask == ATTNCHECK_MASK_CAUSAL, nb::tuple(ins),
                        nb::tuple(outs), features);
}

/// What `kernel.call` returned — (status, payload): for ATTNCHECK_OK a tuple of arrays (out, lse | None) or (dq,
/// dk, dv), else the message (a traceback for an exception) — stored into `c`'s outputs. Needs the GIL.
KernelAnswer store_answer(const nb::object &returned, const KernelCall &c) {
  try {
    const nb::tuple answer = nb::cast<nb::tuple>(returned);
    const int status = nb::cast<int>(answer[0]);
    if (status != ATTNCHECK_OK) return {status, nb::cast<std::string>(answer[1])};
    const nb::tuple arrays = nb::cast<nb::tuple>(answer[1]);
    for (std::size_t i = 0; i < c.out.size(); ++i) {
      if (!c.out[i]) continue;
      if (i >= arrays.size() || arrays[i].is_none())
        return {ATTNCHECK_ERROR, std::string("returned no ") + c.out_names[i] +
                                     " (a function without LSE declares contract={'lse': 'none'})"};
      store(arrays[i], *c.out[i], c.out_names[i]);
    }
    return {ATTNCHECK_OK, ""};
  } catch (nb::python_error &e) {
    return {ATTNCHECK_ERROR, e.what()};
  } catch (const nb::cast_error &) {
    return {ATTNCHECK_ERROR, "returned something that is not an array (expected out, or (out, lse))"};
  } catch (const std::exception &e) {
    return {ATTNCHECK_ERROR, e.what()};
  }
}

/// One call of a Python kernel on this thread (replay: no budget to guard).
KernelAnswer call_python(const nb::object &kernel, const KernelCall &c) {
  nb::gil_scoped_acquire gil;
  try {
    return store_answer(kernel.attr("call")(*call_arguments(c, false)), c);
  } catch (nb::python_error &e) {
    if (e.matches(PyExc_KeyboardInterrupt)) {
      g_cancel.store(true);
      g_interrupted.store(true);
      return {ATTNCHECK_ERROR, "interrupted (Ctrl-C)"};
    }
    return {ATTNCHECK_ERROR, e.what()};
  } catch (const std::exception &e) {
    return {ATTNCHECK_ERROR, e.what()};
  }
}

/// The in-process guard: the time budget holds for a Python function too. Each call runs on the guard's thread
/// while the check's thread waits until the check's end (its budget plus kGrace), looking for Ctrl-C every kPoll.
/// A call still running then is abandoned — the check stops starting calls (the case is not counted), the report
/// names the call (running()) — and left to finish on its own: its inputs are copies, its results dropped. Ctrl-C
/// while a call runs abandons it the same way, and the report keeps what was decided.
class Guard {
 public:
  static constexpr std::chrono::milliseconds kGrace{500}, kPoll{100};

  explicit Guard(std::chrono::steady_clock::time_point end) : end_(end), worker_(std::make_shared<Worker>()) {
    std::thread([w = worker_] { w->serve(); }).detach();  // ends once stop() sees it idle, or after the call it runs
  }
  ~Guard() { worker_->stop(); }
  Guard(const Guard &) = delete;
  Guard &operator=(const Guard &) = delete;

  /// Calls `kernel` (a Python object, whose reference the caller's GIL-holding code keeps alive) for `c`.
  KernelAnswer call(const nb::object &kernel, const KernelCall &c) {
    if (!running_.empty()) return {ATTNCHECK_ERROR, "not run: " + running_};
    auto job = std::make_shared<Job>();
    {
      nb::gil_scoped_acquire gil;
      try {
        job->kernel = kernel;
        job->arguments = call_arguments(c, true);
      } catch (const std::exception &e) {
        job->kernel.reset();  // with the GIL
        return {ATTNCHECK_ERROR, e.what()};
      }
    }
    ++calls_;
    const auto started = std::chrono::steady_clock::now();
    const auto end = std::max(end_, started + kGrace);  // a call started at or past the end still gets the grace
    worker_->post(job);
    std::unique_lock lock(job->m);
    while (!job->done) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= end) return abandon(*job, lock, c, started, "the time budget ran out while it was still running");
      job->cv.wait_for(lock, std::min<std::chrono::steady_clock::duration>(kPoll, end - now));
      if (job->done) break;
      lock.unlock();
      const bool ctrl_c = [] {  // Python's signal handlers run on the main thread only: this one, waiting
        nb::gil_scoped_acquire gil;
        if (PyErr_CheckSignals() == 0) return false;
        const bool interrupt = PyErr_ExceptionMatches(PyExc_KeyboardInterrupt) != 0;
        if (!interrupt) PyErr_WriteUnraisable(nullptr);
        PyErr_Clear();
        return interrupt;
      }();
      lock.lock();
      if (ctrl_c && !job->done) {
        g_interrupted.store(true);
        return abandon(*job, lock, c, started, "interrupted (Ctrl-C) while it was still running");
      }
    }
    lock.unlock();
    nb::gil_scoped_acquire gil;
    // The function got copies: what it wrote into them reaches the gate's inputs, as a write into a view would
    // (input_integrity).
    try {
      const nb::tuple ins = nb::cast<nb::tuple>(job->arguments[3]);
      const nb::object copyto = nb::module_::import_("numpy").attr("copyto");
      for (std::size_t i = 0; i < c.in.size(); ++i)
        if (c.in[i]) copyto(view_of(c.in[i]), ins[i]);
    } catch (const std::exception &) {
      // the inputs as they were: nothing to copy back
    }
    job->arguments.reset();
    KernelAnswer answer = job->error ? KernelAnswer{ATTNCHECK_ERROR, *job->error} : store_answer(job->returned, c);
    job->returned.reset();
    return answer;
  }

  /// The call abandoned ("forward call 5 on B=1 … (running for 2.1 s): the time budget ran out …"), or "".
  const std::string &running() const { return running_; }

 private:
  struct Job {
    std::mutex m;
    std::condition_variable cv;
    bool done = false, abandoned = false;
    nb::object kernel, returned;  // set and reset with the GIL held
    nb::tuple arguments;
    std::optional<std::string> error;
  };
  /// The thread the calls run on; it outlives the Guard while it runs an abandoned call.
  struct Worker {
    std::mutex m;
    std::condition_variable cv;
    std::shared_ptr<Job> next;
    bool stopping = false;

    void post(std::shared_ptr<Job> job) {
      const std::lock_guard lock(m);
      next = std::move(job);
      cv.notify_one();
    }
    void stop() {
      const std::lock_guard lock(m);
      stopping = true;
      cv.notify_one();
    }
    void serve() {
      for (;;) {
        std::shared_ptr<Job> job;
        {
          std::unique_lock lock(m);
          cv.wait(lock, [&] { return next || stopping; });
          if (!next) return;
          job = std::move(next);
        }
        // The GIL by hand, not RAII: when the interpreter exits while an abandoned call still runs Python code,
        // Python ends this thread on its next GIL request by a forced unwind (pthread_exit). Releasing the GIL or a
        // reference on that unwind aborts the process ("PyGILState_Release: … must be current"), so it touches
        // neither: the job's Python objects are left to the ending process.
        const PyGILState_STATE gil = PyGILState_Ensure();
        nb::object returned;
        std::optional<std::string> error;
        try {
          returned = job->kernel.attr("call")(*job->arguments);
        } catch (abi::__forced_unwind &) {
          (void)new std::shared_ptr<Job>(std::move(job));  // never freed: the interpreter is gone
          throw;
        } catch (nb::python_error &e) {
          error = e.what();
        } catch (const std::exception &e) {
          error = e.what();
        }
        {
          const std::lock_guard lock(job->m);
          if (!job->abandoned) job->returned = std::move(returned), job->error = std::move(error);
          returned.reset();
          job->kernel.reset();
          if (job->abandoned) job->arguments.reset();  // else the caller copies the inputs back first
          job->done = true;
          job->cv.notify_one();
        }
        job.reset();  // the last reference may be this one: its Python objects go with the GIL held
        PyGILState_Release(gil);
      }
    }
  };

  KernelAnswer abandon(Job &job, std::unique_lock<std::mutex> &lock, const KernelCall &c,
                       std::chrono::steady_clock::time_point started, const std::string &why) {
    job.abandoned = true;
    lock.unlock();
    g_cancel.store(true);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const DLTensor &q = *c.in[0], &k = *c.in[1], &v = *c.in[2];
    const Shape s{.B = q.shape[0], .Hq = q.shape[1], .Hkv = k.shape[1], .Lq = q.shape[2], .Lk = k.shape[2],
                  .D = q.shape[3], .Dv = v.shape[3]};
    char took[32];
    std::snprintf(took, sizeof took, "%.1f", seconds);
    running_ = std::string(c.backward ? "backward" : "forward") + " (call " + std::to_string(calls_) + ")" +
               " on " + s.describe() + " (running for " + took + " s): " + why;
    return {ATTNCHECK_ERROR, "abandoned: " + running_};
  }

  std::chrono::steady_clock::time_point end_;
  std::shared_ptr<Worker> worker_;
  std::string running_;
  int calls_ = 0;  // the calls made, the abandoned one included
};

/// The kernels of one check: the caller's Python kernels, or an exec command's.
struct Kernels {
  std::vector<std::unique_ptr<BoundKernel>> bound;
  std::unique_ptr<ExecKernel> exec;
  std::vector<const attncheck_kernel *> list;
  std::vector<std::string> declared;  // each one's declared contract
  reporting::KernelSource source;

  /// `guard`: the in-process calls run under it (nullptr: on the calling thread).
  Kernels(const std::vector<PyKernelSpec> &specs, const std::string &exec_command, double timeout,
          double first_call_timeout, std::uint64_t memory_limit_mib, Guard *guard = nullptr) {
    if (!exec_command.empty()) {
      ExecOptions eo;
      eo.call_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(timeout * 1000));
      eo.first_call_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(first_call_timeout * 1000));
      eo.memory_limit_mib = memory_limit_mib;
      eo.on_stderr = [](std::string_view line) {  // the function's own prints and warnings, as they come
        nb::gil_scoped_acquire gil;
        nb::module_::import_("sys").attr("stderr").attr("write")(std::string(line) + "\n");
      };
      exec = std::make_unique<ExecKernel>(exec_command, eo);
      for (std::size_t i = 0; i < exec->kernels().size(); ++i) {
        list.push_back(&exec->kernels()[i]);
        declared.push_back(exec->contract(i));
      }
      source = {reporting::KernelSource::Kind::exec, exec_command};
      return;
    }
    for (const auto &[name, kernel, has_backward, contract, location] : specs) {
      nb::object k = kernel;
      bound.push_back(std::make_unique<BoundKernel>(
          name,
          [k, guard, name](const KernelCall &c) {
            crash::before_call(name, c.backward);
            return guard ? guard->call(k, c) : call_python(k, c);
          },
          has_backward));
      list.push_back(&bound.back()->kernel());
      declared.push_back(contract);
      source = {reporting::KernelSource::Kind::python, location};
    }
  }
  /// As the gate takes them.
  gate::Kernels of_check() const { return {list, declared, source}; }
  ~Kernels() {
    bound.clear();  // with the GIL: the bodies hold Python references
    nb::gil_scoped_release release;
    exec.reset();
  }
};

/// The gate's error as Python's: ValueError for what the caller gave ("corpus: …"), RuntimeError for attncheck's own.
[[noreturn]] void raise(const gate::RunError &e) {
  const std::string what = (e.input.empty() ? "" : e.input + ": ") + e.what();
  if (e.exit_code == gate::kExitUsage) throw nb::value_error(what.c_str());
  throw std::runtime_error(what);
}

/// gate::contract_of, its error a ValueError ("contract: …").
KernelContract contract_of(const std::string &declared, const std::string &overrides) {
  try {
    return gate::contract_of(declared, overrides);
  } catch (const gate::RunError &e) {
    raise(e);
  }
}

/// A check's arguments (the kernel's contract comes with it: PyKernelSpec).
struct CheckRequest {
  std::vector<std::string> dtypes, properties;
  std::string profile = "default";
  std::optional<int> cases;
  std::uint64_t seed = 1;
  std::optional<double> time_budget;
  bool strict = false;
  std::string report_dir, junit;
  bool quiet = false;
  double timeout = 10, first_call_timeout = 60;
  std::uint64_t memory_limit_mib = 4096;
  std::string shape_pool = "auto";
  std::string corpus;  ///< a counterexample corpus directory (gate/include/attncheck/corpus.h); empty: none
  std::string shapes;  ///< declared shapes as gate::declared_shapes reads them (a preset, a file, JSON); empty: none
};

/// The report names the call the guard abandoned: on the first property it cut short (else the last one run); the
/// later ones say why they stopped.
void name_the_call_left_running(reporting::Document &doc, const std::string &running) {
  PropertyReport *at = nullptr;
  for (reporting::Run &run : doc.runs)
    for (PropertyReport &p : run.report.properties) {
      if (!p.interrupted) continue;
      if (at) p.note += (p.note.empty() ? "" : "; ") + std::string("the check stopped: a call was left running");
      else at = &p;
    }
  if (!at && !doc.runs.empty() && !doc.runs.back().report.properties.empty())
    at = &doc.runs.back().report.properties.back();
  if (at) at->note += (at->note.empty() ? "" : "; ") + std::string("a call was left running: ") + running;
}

/// The gate's request of `rq`, and its dtypes; ValueError for an unknown property, profile or dtype.
std::pair<gate::CheckRequest, std::vector<Dtype>> request_of(const CheckRequest &rq) {
  gate::CheckRequest request;
  gate::Request &plan = request.plan;
  plan.profile = gate::find_profile(rq.profile);
  if (!plan.profile) throw nb::value_error(("unknown profile '" + rq.profile + "': quick, default or thorough").c_str());
  plan.properties = rq.properties;
  plan.cases = rq.cases;
  plan.seed = rq.seed;
  plan.time_budget = rq.time_budget;
  plan.shape_pool = rq.shape_pool;
  plan.memory_limit_mib = rq.memory_limit_mib;
  plan.evidence = true;  // the reports and the summary's captions show it (the hints it verified)
  request.dtypes = rq.dtypes;
  request.strict = rq.strict;
  request.quiet = rq.quiet;
  try {
    if (!rq.shapes.empty()) plan.shapes = gate::declared_shapes(rq.shapes);
    gate::check_property_ids(plan.properties);
    return {std::move(request), gate::dtypes_of(rq.dtypes)};
  } catch (const gate::RunError &e) {
    raise(e);
  }
}

/// Loads the kernels of `specs` (or of the exec command) into `kernels`; an in-process function is guarded by `runs`
/// of the plan's budget, one after another (`guard`); an exec command's calls have their own timeouts. ValueError
/// when they do not load.
void load_kernels(const std::vector<PyKernelSpec> &specs, const std::string &exec_command, const CheckRequest &rq,
                  const gate::Request &request, double runs, std::optional<Guard> &guard,
                  std::optional<Kernels> &kernels) {
  if (exec_command.empty()) {
    const double per_run = request.time_budget.value_or(static_cast<double>(request.profile->budget.count()));
    const auto total = std::chrono::duration<double>(per_run * runs);
    guard.emplace(std::chrono::steady_clock::now() +
                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(total) + Guard::kGrace);
  }
  try {
    kernels.emplace(specs, exec_command, rq.timeout, rq.first_call_timeout, rq.memory_limit_mib,
                    guard ? &*guard : nullptr);
  } catch (const std::runtime_error &e) {
    throw nb::value_error(e.what());
  }
}

/// Runs the check; returns (report.json text, exit code, interrupted). Raises ValueError for a bad request.
std::tuple<std::string, int, bool> run_check(const std::vector<PyKernelSpec> &specs, const std::string &exec_command,
                                             const CheckRequest &rq) {
  const auto [request, dtypes] = request_of(rq);
  std::optional<Guard> guard;
  std::optional<Kernels> kernels;
  load_kernels(specs, exec_command, rq, request.plan, static_cast<double>(dtypes.size() * specs.size()), guard,
               kernels);
  std::optional<crash::Previous> died;  // what the previous check with this report directory died in
  std::optional<crash::Trace> trace;
  gate::Hooks hooks;
  hooks.start = [&] {
    died = crash::previous(rq.report_dir);
    if (exec_command.empty()) trace.emplace(rq.report_dir);  // in process: a native crash ends this process
  };
  hooks.adjust = [&](CheckOptions &opt, std::size_t n, Dtype dt) {
    if (died) crash::leave_out(opt, *died, kernels->list[n]->name, dt);
  };
  hooks.finish = [&](reporting::Document &doc) {
    trace.reset();
    if (died) crash::report(doc, *died);
    if (guard && !guard->running().empty()) name_the_call_left_running(doc, guard->running());
  };
  g_cancel.store(false);
  g_interrupted.store(false);
  try {
    const gate::CheckResult r = [&] {
      nb::gil_scoped_release release;
      return gate::run(request, kernels->of_check(), {rq.report_dir, rq.junit, rq.corpus}, &g_cancel, hooks);
    }();
    return {reporting::to_json(r.doc), r.exit_code, g_interrupted.load()};
  } catch (const gate::RunError &e) {
    raise(e);
  }
}

/// infer (gate/include/attncheck/infer.h) on the one kernel of `specs` (or of the exec command): the caller's
/// contract= is what it knows, the search's start. Returns (infer's JSON, its text, exit code, interrupted). Raises
/// ValueError for a bad request.
std::tuple<std::string, std::string, int, bool> run_infer(const std::vector<PyKernelSpec> &specs,
                                                          const std::string &exec_command, const CheckRequest &rq,
                                                          const std::string &start_reason) {
  gate::InferRequest ir;
  gate::CheckRequest request;
  std::tie(request, ir.dtypes) = request_of(rq);
  ir.check = request.plan;
  ir.check.evidence = false;  // infer reads verdicts and explanations, as the CLI's does
  // infer runs at most kMaxRounds checks, each of every dtype.
  std::optional<Guard> guard;
  std::optional<Kernels> kernels;
  load_kernels(specs, exec_command, rq, ir.check, static_cast<double>(ir.dtypes.size()) * gate::kMaxRounds, guard,
               kernels);
  if (kernels->list.size() != 1)
    throw nb::value_error(("infer takes one kernel; this source has " + std::to_string(kernels->list.size())).c_str());
  ir.declared = contract_of(kernels->declared.front(), "");
  ir.start = ir.declared;
  ir.start_reason = start_reason;
  ir.quiet = rq.quiet;
  g_cancel.store(false);
  g_interrupted.store(false);
  ir.cancel = &g_cancel;
  std::optional<gate::InferResult> r;
  {
    nb::gil_scoped_release release;
    r = gate::infer(*kernels->list.front(), ir, kernels->source);
  }
  return {gate::infer_json(*r), gate::infer_text(*r), r->exit_code, g_interrupted.load()};
}

/// An array judge() was given, as the Python side hands it over: its storage dtype ("f32", "f16", "bf16"), and its
/// values (float64, C order, logical [B, H, L, D] or [B, H, L] shape) exactly as stored.
using Given = std::pair<std::string, nb::ndarray<const double, nb::c_contig, nb::device::cpu>>;

std::optional<Tensor> tensor_of(const std::optional<Given> &a) {
  if (!a) return std::nullopt;
  const auto &[dtype, values] = *a;
  std::vector<std::int64_t> shape(values.ndim());
  for (std::size_t d = 0; d < values.ndim(); ++d) shape[d] = static_cast<std::int64_t>(values.shape(d));
  Tensor t = Tensor::contiguous(parse_dtype(dtype), shape);
  t.assign(std::span<const double>(values.data(), values.size()));
  return t;
}

/// judge()'s features as Python hands them over: window (left, right), softcap, ALiBi slopes, sinks, the mask
/// (boolean or additive, its float64 values [B|1, Hq|1, Lq, Lk]), and a varlen batch's sequence lengths (rows, keys).
using JudgeFeatures =
    std::tuple<std::optional<std::pair<std::int64_t, std::int64_t>>, std::optional<double>,
               std::optional<std::vector<double>>, std::optional<std::vector<double>>,
               std::optional<std::pair<bool, nb::ndarray<const double, nb::c_contig, nb::device::cpu>>>,
               std::optional<std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>>>>;

/// One tensor's judgment: (tensor, shape, elements, exceeding, undecided, worst index, got, exact, bound, ratio).
using TensorLine = std::tuple<std::string, std::vector<std::int64_t>, std::int64_t, std::int64_t, std::int64_t,
                              std::vector<std::int64_t>, double, double, double, double>;

/// gate::judge on the arrays; returns (verdict, exit code, text, tensors, [(declaration, meaning)], contract judged
/// under, [hint], the Judgment itself for Judgment.save). ValueError for what does not fit.
std::tuple<std::string, int, std::string, std::vector<TensorLine>, std::vector<std::pair<std::string, std::string>>,
           std::string, std::vector<std::string>, Judgment>
run_judge(const Given &q, const Given &k, const Given &v, const Given &out, const std::optional<Given> &lse,
          const std::optional<Given> &dout, const std::optional<Given> &dq, const std::optional<Given> &dk,
          const std::optional<Given> &dv, std::optional<double> scale, bool causal, const std::string &contract,
          bool strict, bool explain, const JudgeFeatures &features, bool progress) {
  gate::JudgeRequest rq;
  rq.q = *tensor_of(q), rq.k = *tensor_of(k), rq.v = *tensor_of(v), rq.dout = tensor_of(dout);
  rq.given = {tensor_of(out), tensor_of(lse), tensor_of(dq), tensor_of(dk), tensor_of(dv)};
  rq.scale = scale, rq.causal = causal, rq.contract = contract, rq.explain = explain, rq.progress = progress;
  const auto &[window, softcap, alibi, sinks, mask, seqlens] = features;
  if (seqlens) {
    rq.features.storage = KvStorage::varlen;
    std::tie(rq.features.seqlens_q, rq.features.seqlens_k) = *seqlens;
  }
  if (window) std::tie(rq.features.window_left, rq.features.window_right) = *window;
  rq.features.softcap = softcap.value_or(0);
  rq.features.alibi_slopes = alibi.value_or(std::vector<double>{});
  rq.features.sinks = sinks.value_or(std::vector<double>{});
  if (mask) {
    const auto &[boolean, values] = *mask;
    rq.features.mask_kind = boolean ? MaskKind::boolean : MaskKind::additive;
    if (values.ndim() != 4) throw nb::value_error("attn_mask: is [B or 1, Hq or 1, Lq, Lk]: 4 dimensions");
    rq.features.mask_B = static_cast<std::int64_t>(values.shape(0));
    rq.features.mask_H = static_cast<std::int64_t>(values.shape(1));
    rq.features.mask.assign(values.data(), values.data() + values.size());
  }
  std::optional<Judgment> j;
  try {
    nb::gil_scoped_release release;
    j = gate::judge(rq);
  } catch (const gate::RunError &e) {
    raise(e);
  }
  std::vector<TensorLine> tensors;
  for (const TensorJudgment &t : j->tensors)
    tensors.emplace_back(t.tensor, t.shape, t.elements, t.exceeding, t.undecided, t.worst_index, t.got, t.exact,
                         t.bound, t.ratio);
  std::vector<std::pair<std::string, std::string>> explained;
  for (const Explanation &e : j->explained_by) explained.emplace_back(e.declaration, e.meaning);
  std::vector<std::string> hints;
  for (const Hint &h : j->hints) hints.push_back(h.text);
  return {std::string(verdict_id(j->verdict())), gate::judge_exit_code(*j, strict), reporting::judgment_text(*j),
          tensors, explained, j->contract.describe_changes(), hints, std::move(*j)};
}

reporting::Document parse(const std::string &json) {
  try {
    return reporting::from_json(json);
  } catch (const reporting::ReportError &e) {
    throw nb::value_error(e.what());
  }
}

/// Counterexample `failure` of `doc` for replay; raises IndexError when there is none such, ValueError for a property
/// this attncheck lacks.
gate::ReplayTarget replay_target(const reporting::Document &doc, std::size_t failure) {
  try {
    return gate::replay_target(doc, failure);
  } catch (const gate::ReplayError &e) {
    if (e.out_of_range) throw nb::index_error(e.what());
    throw nb::value_error(e.what());
  }
}

/// A counterexample's inputs exactly as the kernel got them: (name, logical shape, values) of q, k, v and, for a
/// gradient property, dout — each [B, H, L, D] of its spec's shape — with the scale and whether the mask is causal.
using Inputs = std::tuple<std::vector<std::tuple<std::string, std::vector<std::int64_t>, std::vector<double>>>,
                          double, bool>;
Inputs counterexample_inputs(const reporting::Document &doc, std::size_t failure) {
  const Case &c = replay_target(doc, failure).counterexample().minimal;
  const Shape &s = c.spec.shape;
  Inputs out{{}, c.spec.scale(), c.spec.mask == Mask::causal || c.spec.mask == Mask::causal_top_left};
  auto add = [&](const char *name, std::int64_t heads, std::int64_t rows, std::int64_t dim,
                 const std::vector<double> &values) {
    if (!values.empty()) std::get<0>(out).emplace_back(name, std::vector{s.B, heads, rows, dim}, values);
  };
  add("q", s.Hq, s.Lq, s.D, c.q);
  add("k", s.Hkv, s.Lk, s.D, c.k);
  add("v", s.Hkv, s.Lk, s.Dv, c.v);
  add("dout", s.Hq, s.Lq, s.Dv, c.dout);
  return out;
}

/// A contract given to replay (declared text, read as check() reads a declaration; none: the report's own).
std::optional<KernelContract> judged_under(const std::optional<std::string> &contract) {
  if (!contract) return std::nullopt;
  return contract_of(*contract, "");
}

/// Why a replay of counterexample `failure` under `contract` runs nothing — the contract turns its property off —
/// or none when it runs: asked before the kernel is made (replay_plan), so that nothing is loaded for it.
std::optional<std::string> replay_off(const reporting::Document &doc, std::size_t failure,
                                      const std::optional<std::string> &contract) {
  const gate::ReplayResult plan = gate::replay_plan(replay_target(doc, failure), judged_under(contract));
  if (plan.tier != Tier::off) return std::nullopt;
  return plan.outcome.detail;
}

/// Replays counterexample `failure` on the given kernel, judged under `contract` (declared text, read as check()
/// reads a declaration; none: the report's own); returns (verdict, step id or "", detail). The verdict is as the
/// report spells a tier's: "warn" for a fail of a property the contract makes advisory, "off" for one it turns off
/// (then no kernel is made: an exec command is not started).
std::tuple<std::string, std::string, std::string> replay(const reporting::Document &doc, std::size_t failure,
                                                         const std::vector<PyKernelSpec> &specs,
                                                         const std::string &exec_command, double timeout,
                                                         const std::optional<std::string> &contract) {
  const gate::ReplayTarget target = replay_target(doc, failure);
  const std::optional<KernelContract> judged = judged_under(contract);
  gate::ReplayResult r = gate::replay_plan(target, judged);
  if (r.tier == Tier::off) return {"off", "", r.outcome.detail};
  std::optional<Kernels> kernels;
  try {
    kernels.emplace(specs, exec_command, timeout, timeout, 4096);
  } catch (const std::runtime_error &e) {
    throw nb::value_error(e.what());
  }
  // The kernel of the recorded name, else the one given (a fixed function may have another name).
  const attncheck_kernel *k = kernels->list.empty() ? nullptr : kernels->list.front();
  for (const attncheck_kernel *c : kernels->list)
    if (target.run->report.kernel == c->name) k = c;
  if (!k) throw nb::value_error("no kernel to replay on");
  {
    nb::gil_scoped_release release;
    r = gate::replay(target, *k, judged);
  }
  const Outcome &o = r.outcome;
  return {std::string(verdict_id(r.verdict())), o.step ? std::string(step_id(*o.step)) : "", o.detail};
}

/// The corpus at `dir`, or ValueError with the one-line reason.
gate::Corpus read_corpus(const std::string &dir) {
  try {
    return gate::read_corpus(dir);
  } catch (const gate::CorpusError &e) {
    throw nb::value_error((std::string("corpus: ") + e.what()).c_str());
  }
}

/// The corpus's lines, as `attncheck corpus DIR` lists them.
std::vector<std::string> corpus_list(const std::string &dir) {
  std::vector<std::string> lines;
  for (const reporting::CorpusEntry &e : read_corpus(dir).entries) lines.push_back(gate::corpus_line(e));
  return lines;
}

/// `attncheck corpus DIR --prune` on the given kernels: (line, dropped) per entry of `kernel` (empty: of every kernel
/// given), entries of a name no kernel has kept.
std::vector<std::pair<std::string, bool>> corpus_prune(const std::string &dir, const std::vector<PyKernelSpec> &specs,
                                                       const std::string &exec_command, double timeout,
                                                       const std::string &kernel) {
  const gate::Corpus corpus = read_corpus(dir);
  std::optional<Kernels> kernels;
  try {
    kernels.emplace(specs, exec_command, timeout, timeout, 4096);
  } catch (const std::runtime_error &e) {
    throw nb::value_error(e.what());
  }
  std::vector<gate::Pruned> pruned;
  try {
    nb::gil_scoped_release release;
    pruned = gate::prune_corpus(
        corpus,
        [&](const std::string &name) -> const attncheck_kernel * {
          for (const attncheck_kernel *k : kernels->list)
            if (name == k->name) return k;
          return nullptr;
        },
        kernel);
  } catch (const gate::CorpusError &e) {
    throw nb::value_error((std::string("corpus: ") + e.what()).c_str());
  }
  std::vector<std::pair<std::string, bool>> out;
  for (const gate::Pruned &p : pruned) out.emplace_back(gate::pruned_line(p), p.dropped);
  return out;
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "attncheck's C++ gate (the Python API is the attncheck package)";
  m.attr("__version__") = ATTNCHECK_VERSION;
  m.attr("AUTO_SHAPE_POOL") = CheckOptions::kAutoShapePool;
  m.attr("OK") = int{ATTNCHECK_OK};
  m.attr("UNSUPPORTED") = int{ATTNCHECK_UNSUPPORTED};
  m.attr("ERROR") = int{ATTNCHECK_ERROR};

  nb::class_<CheckRequest>(m, "CheckRequest")
      .def(nb::init<>())
      .def_rw("dtypes", &CheckRequest::dtypes)
      .def_rw("properties", &CheckRequest::properties)
      .def_rw("profile", &CheckRequest::profile)
      .def_rw("cases", &CheckRequest::cases)
      .def_rw("seed", &CheckRequest::seed)
      .def_rw("time_budget", &CheckRequest::time_budget)
      .def_rw("strict", &CheckRequest::strict)
      .def_rw("report_dir", &CheckRequest::report_dir)
      .def_rw("junit", &CheckRequest::junit)
      .def_rw("quiet", &CheckRequest::quiet)
      .def_rw("timeout", &CheckRequest::timeout)
      .def_rw("first_call_timeout", &CheckRequest::first_call_timeout)
      .def_rw("memory_limit_mib", &CheckRequest::memory_limit_mib)
      .def_rw("shape_pool", &CheckRequest::shape_pool)
      .def_rw("shapes", &CheckRequest::shapes)
      .def_rw("corpus", &CheckRequest::corpus);

  m.def("check", &run_check, nb::arg("kernels"), nb::arg("exec_command"), nb::arg("request"),
        "Runs the gate; returns (report.json text, exit code, interrupted).");
  m.def("infer", &run_infer, nb::arg("kernels"), nb::arg("exec_command"), nb::arg("request"), nb::arg("start_reason"),
        "The contract the kernel satisfies (gate infer); returns (JSON text, human text, exit code, interrupted).");
  // report.json read once (reporting::from_json): what a Report renders, replays and reads inputs from.
  nb::class_<Judgment>(m, "JudgmentData");  // opaque: what Judgment.save writes
  nb::class_<reporting::Document>(m, "Document")
      .def("failures", &reporting::Document::failures)
      // The terminal text (reporting::to_text): the gate's table, or with these options Report.summary().
      .def(
          "text",
          [](const reporting::Document &doc, bool run_lines, bool declined, bool totals, bool inputs) {
            return reporting::to_text(doc, {.run_lines = run_lines, .declined = declined, .totals = totals,
                                            .inputs = inputs});
          },
          nb::arg("run_lines") = false, nb::arg("declined") = false, nb::arg("totals") = false,
          nb::arg("inputs") = false)
      // Counterexample N as the terminal text shows it (reporting::counterexample_text); IndexError out of range.
      .def(
          "describe",
          [](const reporting::Document &doc, std::size_t failure, bool inputs) {
            return reporting::counterexample_text(doc, failure, {.inputs = inputs});
          },
          nb::arg("failure"), nb::arg("inputs") = false)
      .def("markdown", [](const reporting::Document &doc) { return reporting::to_markdown(doc); })
      .def("junit", [](const reporting::Document &doc) { return reporting::to_junit(doc); })
      // The gate's exit code of a report read back (a check that finished: not cancelled).
      .def("exit_code", [](const reporting::Document &doc) { return gate::exit_code(doc, doc.strict, false); })
      .def("write", [](const reporting::Document &doc, const std::string &dir) {
        try {
          reporting::write_reports(doc, dir);
        } catch (const reporting::ReportError &) {
          throw;
        } catch (const std::runtime_error &e) {
          throw nb::value_error(e.what());
        }
      }, nb::arg("dir"))
      .def("inputs", &counterexample_inputs, nb::arg("failure"),
           "Counterexample N's inputs: ([(name, shape, values)], scale, causal).")
      .def("replay_off", &replay_off, nb::arg("failure"), nb::arg("contract").none(),
           "Why a replay under the contract runs nothing (it turns the property off), else None: no kernel needed.");
  // report.json text → Document; ValueError with the CLI's one-line message when it is not a report.
  m.def("parse", &parse, nb::arg("report_json"));
  m.def("replay", &replay, nb::arg("document"), nb::arg("failure"), nb::arg("kernels"), nb::arg("exec_command"),
        nb::arg("timeout"), nb::arg("contract").none());
  m.def("judge", &run_judge, nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("out"), nb::arg("lse").none(),
        nb::arg("dout").none(), nb::arg("dq").none(), nb::arg("dk").none(), nb::arg("dv").none(),
        nb::arg("scale").none(), nb::arg("causal"), nb::arg("contract"), nb::arg("strict"), nb::arg("explain"),
        nb::arg("features"), nb::arg("progress"),
        "Judges given tensors (gate::judge): (verdict, exit code, text, tensors, explained_by, contract, hints, "
        "JudgmentData).");
  // A judgment's documents (reporting::write_judgment) in `dir`, its inputs kept at `inputs` there; ValueError
  // when the directory cannot be written.
  m.def(
      "write_judgment",
      [](const Judgment &j, const std::string &dir, const std::string &inputs) {
        try {
          reporting::write_judgment(j, {inputs, gate::judge_replay(j, inputs)}, dir);
        } catch (const std::runtime_error &e) {
          throw nb::value_error(e.what());
        }
      },
      nb::arg("judgment"), nb::arg("dir"), nb::arg("inputs"));
  m.def("corpus_list", &corpus_list, nb::arg("dir"));
  m.def("corpus_prune", &corpus_prune, nb::arg("dir"), nb::arg("kernels"), nb::arg("exec_command"), nb::arg("timeout"),
        nb::arg("kernel"));
  m.def("content", [](const std::string &json) { return reporting::content_of(json); });
  // A contract text as the core reads it (commas or spaces, any key order), resolved: (its canonical form — only
  // the keys that differ from the defaults, space-separated, "" for the defaults; the LSE output, "f32", "storage"
  // or "none"; the features it declares, by name). The facts every Python module reads: none parses a contract.
  m.def("resolve_contract", [](const std::string &text) {
    const KernelContract c = contract_of(text, "");
    static constexpr const char *kLse[] = {"f32", "storage", "none"};
    std::vector<std::string> features;
    for (std::uint32_t bit : kAllFeatures)
      if (c.features & bit) features.emplace_back(feature_name(bit));
    return std::make_tuple(c == KernelContract{} ? std::string() : c.describe_changes(),
                           std::string(kLse[static_cast<int>(c.lse)]), features);
  });
  m.def("properties", [] {
    std::vector<std::tuple<std::string, std::string, std::string>> out;
    for (const PropertyInfo &p : property_catalog())
      out.emplace_back(std::string(p.id), std::string(p.formula), std::string(p.summary));
    return out;
  });
  m.def("stderr_is_terminal", [] { return isatty(STDERR_FILENO) != 0; });
}
