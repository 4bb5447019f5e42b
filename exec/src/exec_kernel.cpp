#include "attncheck/exec_kernel.h"
#include "attncheck/bound_kernel.h"

#include "attncheck/containment.h"
#include "attncheck/contract.h"
#include "attncheck/kernel_call.h"
#include "attncheck/dtype.h"
#include "attncheck/features.h"
#include "attncheck/npy.h"
#include "child_process.h"
#include "protocol.h"

#include <stdlib.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

namespace attncheck {

namespace fs = std::filesystem;
using exec_detail::ChildProcess;
using exec_detail::Clock;
using namespace exec_detail;  // the protocol's parsers (protocol.h)

namespace {

/// The file an `error` answer may come with (EXEC_PROTOCOL.md §4): its details — a traceback — for the report.
constexpr const char *kErrorDetails = "error.txt";
constexpr std::size_t kMaxErrorDetails = 64 * 1024;

/// "\n" and the text of <dir>/error.txt (at most kMaxErrorDetails bytes, "…" past them), or "" when there is none.
std::string error_details(const std::string &dir) {
  std::FILE *f = std::fopen((dir + "/" + kErrorDetails).c_str(), "rb");
  if (!f) return "";
  std::string text(kMaxErrorDetails + 1, '\0');
  text.resize(std::fread(text.data(), 1, text.size(), f));
  std::fclose(f);
  if (text.size() > kMaxErrorDetails) text = text.substr(0, kMaxErrorDetails) + "…";
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text.empty() ? "" : "\n" + text;
}

/// Restarts after a call broke the child (timeout, garbled answer, exit) with no call answered in between: a kernel
/// that hangs or crashes on some shapes keeps being checked on the others, one that cannot serve at all is given up.
constexpr int kMaxRestarts = 8;
/// What runtimes say when an allocation fails (Python's MemoryError, C++'s std::bad_alloc, CUDA's and PyTorch's "out
/// of memory", XLA's RESOURCE_EXHAUSTED, strerror(ENOMEM)), lower case: such an `error` answer, or a child that died
/// with one as its last stderr line, hit the memory limit (spec/EXEC_PROTOCOL.md §6).
constexpr std::string_view kOutOfMemoryWords[] = {"memoryerror", "out of memory", "outofmemory", "resource_exhausted",
                                                  "bad_alloc", "cannot allocate memory"};
/// Between `quit` and SIGTERM.
constexpr auto kQuitGrace = std::chrono::milliseconds(2000);

bool says_out_of_memory(std::string_view text) {
  std::string lower(text);
  for (char &c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return std::any_of(std::begin(kOutOfMemoryWords), std::end(kOutOfMemoryWords),
                     [&](std::string_view w) { return lower.find(w) != std::string::npos; });
}

std::string seconds_text(std::chrono::milliseconds ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

std::string_view protocol_dtype(Dtype dt) {
  switch (dt) {
    case Dtype::f32: return "float32";
    case Dtype::f16: return "float16";
    case Dtype::bf16: return "bfloat16";
  }
  return "?";
}

/// A number as the protocol writes it: %.17g, which converts back to the exact double (a float's value included).
std::string number_text(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

/// The request's feature tokens (spec/EXEC_PROTOCOL.md §4.1) for a call with features, each after a space: the
/// features' names, then the scalar settings of the features in use. "" for a call without features.
std::string feature_tokens(std::uint32_t bits, const attncheck_args &a) {
  if (bits == 0) return "";
  std::string t = " features=" + feature_list(bits);
  if (bits & ATTNCHECK_FEATURE_WINDOW)
    t += " window=" + std::to_string(a.window_left) + "," + std::to_string(a.window_right);
  if (bits & ATTNCHECK_FEATURE_SOFTCAP) t += " softcap=" + number_text(a.softcap);
  if (bits & ATTNCHECK_FEATURE_VARLEN)
    t += " max_seqlen=" + std::to_string(a.max_seqlen_q) + "," + std::to_string(a.max_seqlen_k);
  if (bits & ATTNCHECK_FEATURE_PAGED) t += " page_size=" + std::to_string(a.page_size);
  if (bits & ATTNCHECK_FEATURE_DROPOUT)
    t += " dropout_p=" + number_text(a.dropout_p) + " dropout_seed=" + std::to_string(a.dropout_seed);
  if (bits & ATTNCHECK_FEATURE_FP8)
    t += std::string(" fp8=") + (a.fp8_format == 1 ? "e5m2" : "e4m3fn") + " descale=" + number_text(a.descale_q) +
         "," + number_text(a.descale_k) + "," + number_text(a.descale_v);
  return t;
}

/// The args tensors a call with `bits` sends, as (file stem, tensor): those of the features in use that the caller
/// passed; dropout_mask only to backward (forward writes it).
std::vector<std::pair<const char *, const DLTensor *>> feature_inputs(std::uint32_t bits, const attncheck_args &a,
                                                                      bool backward) {
  std::vector<std::pair<const char *, const DLTensor *>> in;
  auto add = [&](std::uint32_t bit, const char *name, const DLTensor *t) {
    if ((bits & bit) && t) in.emplace_back(name, t);
  };
  add(ATTNCHECK_FEATURE_ALIBI, "alibi_slopes", a.alibi_slopes);
  add(ATTNCHECK_FEATURE_SINKS, "sinks", a.sinks);
  add(ATTNCHECK_FEATURE_MASK, "attn_mask", a.attn_mask);
  add(ATTNCHECK_FEATURE_VARLEN, "cu_seqlens_q", a.cu_seqlens_q);
  add(ATTNCHECK_FEATURE_VARLEN, "cu_seqlens_k", a.cu_seqlens_k);
  add(ATTNCHECK_FEATURE_PAGED, "block_table", a.block_table);
  add(ATTNCHECK_FEATURE_PAGED, "seqused_k", a.seqused_k);
  if (backward) add(ATTNCHECK_FEATURE_DROPOUT, "dropout_mask", a.dropout_mask);
  return in;
}

/// The outcome of one call: status and, for a non-OK status, the message.
using Outcome = KernelAnswer;

}  // namespace

struct ExecKernel::State {
  struct Info {
    std::string name;
    bool backward = false;
    std::string contract;  ///< the hello's contract tokens (key=value), space-separated; "" when none
    std::uint32_t features = 0;  ///< the ATTNCHECK_FEATURE_* bits its contract declares (ABI 1.2)
  };

  std::string command;
  ExecOptions options;
  std::string dir;
  std::mutex mu;  // one request at a time
  std::unique_ptr<ChildProcess> child;
  int starts = 0;
  int unanswered_starts = 0;  // starts since a call was last answered
  std::string last_failure;  // why the child was last stopped (for the give-up message)
  std::vector<Info> infos;
  std::vector<std::unique_ptr<BoundKernel>> bound;  // infos[i]'s ABI kernel
  std::vector<attncheck_kernel> abi;                // copies of theirs, contiguous for kernels()
  std::set<std::string> seen_shapes;  // "verb kernel dtype mask q-shape k-shape v-shape": calls made before
  ExecKernel::CallTimes times;

  std::string who() const { return "exec command '" + clip(command) + "'"; }
  std::string stderr_note(const ChildProcess &c) const {
    const std::string l = c.last_stderr_line();
    return l.empty() ? "" : " (stderr: " + clip(l) + ")";
  }

  /// Starts the child and reads its hello; fills infos on the first start, compares on restarts. Throws ExecError.
  void start();
  Outcome call(std::size_t kernel, bool backward, const attncheck_params &p, const DLTensor *const in[],
               const char *const in_names[], std::size_t n_in, DLTensor *const out[], const char *const out_names[],
               std::size_t n_out);
  /// " hit the memory limit of N MiB (--memory-limit, peak resident M MiB)" when `text` (an error answer, a dying
  /// child's last stderr line) says that an allocation failed, counted in CallRecord::memory_faults; "" otherwise.
  std::string memory_note(std::string_view text, const ChildProcess &c) const {
    if (!says_out_of_memory(text)) return "";
    ++CallRecord::of_this_thread().memory_faults;
    const std::string peak = containment::peak_resident_note(c.pid());
    return options.memory_limit_mib > 0 ? " hit the memory limit of " + std::to_string(options.memory_limit_mib) +
                                              " MiB (--memory-limit" + peak + ")"
                                        : " ran out of memory" + (peak.empty() ? "" : " (" + peak.substr(2) + ")");
  }
  /// Stops a child that broke the protocol during a call and returns the call's error.
  Outcome broke(const std::string &message) {
    if (child) child->stop();
    child.reset();
    last_failure = message;
    return {ATTNCHECK_ERROR, message};
  }
  void shutdown() {
    if (!child) return;
    child->write_line("quit");
    child->finish(kQuitGrace);
    child.reset();
  }
};

/// ulimit -d counts KiB.
constexpr std::uint64_t kKiBPerMiB = 1024;
/// The child's $TMPDIR, a directory in the exchange directory.
constexpr std::string_view kPrivateTmp = "tmp";

// ---- start-up ----

void ExecKernel::State::start() {
  auto sink = options.on_stderr ? options.on_stderr : [](std::string_view l) { std::cerr << "[exec] " << l << '\n'; };
  try {
    // The limit is set by the shell itself before the command starts: no window in which the child runs unlimited.
    // Its $TMPDIR is private (inside the exchange directory): what the kernel leaves there goes with the ExecKernel.
    std::string limited = "export TMPDIR=" + shell_quote(dir + "/" + std::string(kPrivateTmp)) + "; ";
    if (options.memory_limit_mib != 0)
      limited += "ulimit -d " + std::to_string(options.memory_limit_mib * kKiBPerMiB) + " || exit 126; ";
    limited += command;
    child = std::make_unique<ChildProcess>(limited, sink);
  } catch (const std::system_error &e) {
    throw ExecError(who() + ": cannot start /bin/sh: " + e.what());
  }
  ++starts;
  ++unanswered_starts;
  ChildProcess &c = *child;
  const auto deadline = Clock::now() + options.start_timeout;
  auto fail = [&](const std::string &why) -> ExecError {
    c.stop();
    child.reset();
    return ExecError(who() + ": " + why);
  };

  std::vector<Info> seen;
  bool have_version = false;
  std::string line;
  while (true) {
    const auto r = c.read_line(line, deadline);
    if (r == ChildProcess::Read::timeout) {
      if (!have_version)
        throw fail("no hello line within " + seconds_text(options.start_timeout) +
                   stderr_note(c) + ": the command must print 'attncheck-exec 1' on stdout first and flush it (" +
                   std::string(kProtocolRef) + " §3)");
      throw fail("no 'ready' line within " + seconds_text(options.start_timeout) + " after 'attncheck-exec 1'" +
                 stderr_note(c) + ": end the hello with 'ready' and flush stdout (" + std::string(kProtocolRef) +
                 " §3)");
    }
    if (r == ChildProcess::Read::eof) {
      if (c.exited() && c.exit_status() == 127)
        throw fail("the shell could not find the command (exit status 127" +
                   (c.last_stderr_line().empty() ? std::string() : "; stderr: " + clip(c.last_stderr_line())) +
                   "): check COMMAND and PATH");
      if (c.exited() && c.exit_status() == 126)
        throw fail("the command is not executable (exit status 126" +
                   (c.last_stderr_line().empty() ? std::string() : "; stderr: " + clip(c.last_stderr_line())) +
                   "): check its permissions and interpreter line");
      const std::string what = c.exited() ? c.exit_description() : "closed its stdout";
      throw fail(what + (have_version ? " before its 'ready' line" : " before its hello line") + stderr_note(c) +
                 ": run COMMAND by hand to see why");
    }
    if (r == ChildProcess::Read::too_long)
      throw fail("wrote a stdout line longer than 64 KiB during the hello: stdout is for the protocol only, "
                 "print diagnostics to stderr");
    HelloLine h;
    try {
      h = parse_hello_line(line, have_version);
    } catch (const ProtocolError &e) {
      throw fail(e.what());
    }
    if (h.kind == HelloLine::Kind::version) {
      have_version = true;
      continue;
    }
    if (h.kind == HelloLine::Kind::ready) break;
    Info info{h.name, h.backward, h.contract, h.features};
    for (const Info &o : seen)
      if (o.name == info.name) throw fail("announces kernel '" + info.name + "' twice: names must be unique");
    seen.push_back(std::move(info));
  }
  if (seen.empty()) throw fail("announced no kernels: list at least one 'kernel <name> forward' line before 'ready'");

  if (infos.empty()) {
    infos = std::move(seen);
    return;
  }
  bool same = seen.size() == infos.size();
  for (std::size_t i = 0; same && i < seen.size(); ++i)
    same = seen[i].name == infos[i].name && seen[i].backward == infos[i].backward &&
           seen[i].contract == infos[i].contract;
  if (!same) throw fail("announced other kernels when restarted: a kernel's hello must not change");
}

// ---- calls ----

Outcome ExecKernel::State::call(std::size_t kernel, bool backward, const attncheck_params &p,
                                const DLTensor *const in[], const char *const in_names[], std::size_t n_in,
                                DLTensor *const out[], const char *const out_names[], std::size_t n_out) {
  std::lock_guard lock(mu);
  const Info &info = infos[kernel];
  const char *verb = backward ? "backward" : "forward";
  const std::string who_call = "exec kernel '" + info.name + "' (" + verb + ")";

  // ABI 1.2: a kernel gets only the features its hello declares (a child that declares none never sees them).
  if (const std::uint32_t extra = p.features & ~info.features)
    return {ATTNCHECK_UNSUPPORTED, "exec kernel '" + info.name + "' does not declare the feature(s) " +
                                       feature_list(extra) + " (its hello's contract token features=...)"};
  if (p.features != 0 && !p.args)
    return {ATTNCHECK_ERROR, who_call + ": params.features is set but params.args is NULL"};
  attncheck_args args{};  // the caller's, as far as its `size` reaches
  if (p.features != 0) std::memcpy(&args, p.args, std::min<std::size_t>(p.args->size, sizeof args));
  // <dtype> is the storage dtype of q, k, v and the rest, or under FP8 (q, k, v float8 bits) of the others.
  const bool fp8 = p.features & ATTNCHECK_FEATURE_FP8;
  const DLTensor *typed = fp8 ? (backward ? in[5] : out[0]) : in[0];
  Dtype dt;
  if (!typed || !from_dlpack(typed->dtype, &dt))
    return {ATTNCHECK_UNSUPPORTED, "the exec protocol carries float32, float16 and bfloat16 tensors only"};
  const char *mask = p.mask == ATTNCHECK_MASK_NONE ? "none" : p.mask == ATTNCHECK_MASK_CAUSAL ? "causal" : nullptr;
  if (!mask) return {ATTNCHECK_UNSUPPORTED, "mask " + std::to_string(p.mask) + " has no name in the exec protocol"};

  if (!child) {
    if (unanswered_starts > kMaxRestarts) {
      ++CallRecord::of_this_thread().unavailable;
      return {ATTNCHECK_ERROR, who_call + ": gave up after " + std::to_string(kMaxRestarts) +
                                   " restarts without an answer; last failure: " + last_failure};
    }
    try {
      start();
    } catch (const ExecError &e) {
      last_failure = e.what();
      return {ATTNCHECK_ERROR, who_call + ": restart failed: " + last_failure};
    }
  }
  ChildProcess &c = *child;
  if (c.has_unread_output())
    return broke(who_call + ": the child wrote to stdout between answers" + stderr_note(c) +
                 ": stdout is for the protocol only, print diagnostics to stderr; the child was stopped and restarts "
                 "on the next call");

  // Inputs: a clean directory, so that a stale output never passes for an answer.
  std::error_code ec;
  for (const auto &e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".npy" || e.path().filename() == kErrorDetails) fs::remove(e.path(), ec);
  try {
    for (std::size_t i = 0; i < n_in; ++i)
      if (in[i]) npy::write(dir + "/" + in_names[i] + ".npy", *in[i]);
    for (const auto &[name, t] : feature_inputs(p.features, args, backward))
      npy::write(dir + "/" + name + ".npy", *t);
  } catch (const npy::NpyError &e) {
    return {ATTNCHECK_ERROR, who_call + ": cannot write the inputs: " + clip(e.what())};
  }

  const std::string features = feature_tokens(p.features, args);
  const std::string request = std::string(verb) + " " + info.name + " " + std::string(protocol_dtype(dt)) + " " +
                              number_text(p.scale) + " " + mask + features + " " + dir;
  // The child went away: collect its exit status and the rest of its stderr for the message.
  const auto describe_exit = [&](const char *what) {
    std::string line;
    const auto grace = Clock::now() + kQuitGrace;
    while (c.read_line(line, grace) == ChildProcess::Read::line) {
    }
    c.wait_exit(grace);
    const std::string memory = memory_note(c.last_stderr_line(), c);
    return broke(who_call + ":" + (memory.empty() ? "" : memory + ":") + " the child " +
                 (c.exited() ? c.exit_description() : what) + " during the call" + stderr_note(c) +
                 "; it restarts on the next call");
  };
  if (!c.write_line(request)) return describe_exit("stopped reading its stdin");

  // The first call of a shape may compile: its own (longer) timeout, and its time counted apart.
  std::string shape_key = std::string(verb) + " " + info.name + " " + std::string(protocol_dtype(dt)) + " " + mask +
                          (p.features ? " " + feature_list(p.features) : "");
  for (std::size_t i = 0; i < 3 && i < n_in; ++i)
    for (int d = 0; d < in[i]->ndim; ++d) shape_key += (d ? "," : " ") + std::to_string(in[i]->shape[d]);
  const bool first = !seen_shapes.count(shape_key);
  const std::chrono::milliseconds limit =
      CallTimeout::current(first ? std::max(options.first_call_timeout, options.call_timeout) : options.call_timeout);
  const auto started = Clock::now();
  std::string answer;
  switch (c.read_line(answer, started + limit)) {
    case ChildProcess::Read::line: {
      const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
      (first ? times.first_seconds : times.other_seconds) += seconds;
      ++(first ? times.first_calls : times.other_calls);
      seen_shapes.insert(shape_key);
      unanswered_starts = 0;
      CallRecord &record = CallRecord::of_this_thread();
      record.longest_ok = std::max(record.longest_ok,
                                   std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started));
      break;
    }
    case ChildProcess::Read::timeout:
      CallRecord::of_this_thread().note_timeout(limit);
      return broke(who_call + ": no answer within " + seconds_text(limit) + stderr_note(c) +
                   ": the child was stopped and restarts on the next call; raise the exec timeout if the kernel is "
                   "just slow");
    case ChildProcess::Read::eof: return describe_exit("closed its stdout");
    case ChildProcess::Read::too_long:
      return broke(who_call + ": garbled answer: a stdout line longer than 64 KiB; the child was stopped");
  }

  Answer ans;
  try {
    ans = parse_answer(answer);
  } catch (const ProtocolError &e) {
    return broke(who_call + ": " + e.what() + ": the child was stopped and restarts on the next call");
  }
  if (ans.kind == Answer::Kind::unsupported) return {ATTNCHECK_UNSUPPORTED, ans.message};
  if (ans.kind == Answer::Kind::error) {
    const std::string memory = memory_note(ans.message, c);
    return {ATTNCHECK_ERROR, who_call + (memory.empty() ? "" : memory + ":") + " reported an error: " + ans.message +
                                 error_details(dir)};
  }

  std::vector<std::pair<std::string, DLTensor *>> outputs;
  for (std::size_t i = 0; i < n_out; ++i)
    if (out[i]) outputs.emplace_back(out_names[i], out[i]);  // lse may not be asked for
  if (!backward && (p.features & ATTNCHECK_FEATURE_DROPOUT) && args.dropout_mask)
    outputs.emplace_back("dropout_mask", args.dropout_mask);  // the mask forward applied
  for (const auto &[stem, tensor] : outputs) {
    const std::string name = stem + ".npy";
    const std::string path = dir + "/" + name;
    if (!fs::exists(path, ec))
      return {ATTNCHECK_ERROR, who_call + ": answered ok but did not write " + name + " (" +
                                   std::string(kProtocolRef) + " §4 lists the files each request writes)"};
    try {
      npy::copy_into(npy::read(path), *tensor, name);
    } catch (const npy::NpyError &e) {
      std::string msg = e.what();
      const std::string prefix = dir + "/";  // the directory is noise in the message
      if (msg.rfind(prefix, 0) == 0) msg.erase(0, prefix.size());
      return {ATTNCHECK_ERROR, who_call + ": " + clip(msg) + ": write each output in the shape and descr of " +
                                   std::string(kProtocolRef) + " §4-5"};
    }
  }
  return {ATTNCHECK_OK, ""};
}

// ---- ExecKernel ----

ExecKernel::ExecKernel(std::string command, ExecOptions options) : state_(std::make_shared<State>()) {
  State &st = *state_;
  st.command = std::move(command);
  st.options = std::move(options);
  std::string root = st.options.temp_root;
  if (root.empty()) {
    const char *t = std::getenv("TMPDIR");
    root = t && *t ? t : "/tmp";
  }
  if (root.find_first_of("\r\n") != std::string::npos)
    throw ExecError(st.who() + ": the temp directory '" + clip(root) + "' contains a line break; choose another");
  std::string templ = root + "/attncheck-exec-XXXXXX";
  if (!::mkdtemp(templ.data()))
    throw ExecError(st.who() + ": cannot create a temp directory in '" + clip(root) + "': " + std::strerror(errno) +
                    " (set TMPDIR to a writable directory)");
  st.dir = fs::absolute(templ).string();
  std::error_code tmp_ec;
  fs::create_directory(fs::path(st.dir) / kPrivateTmp, tmp_ec);  // a failure shows as the kernel's own
  try {
    st.start();
    for (std::size_t i = 0; i < st.infos.size(); ++i) {
      std::weak_ptr<State> weak = state_;
      st.bound.push_back(std::make_unique<BoundKernel>(
          st.infos[i].name,
          [weak, i](const KernelCall &c) -> KernelAnswer {
            const std::shared_ptr<State> s = weak.lock();
            if (!s) return {ATTNCHECK_ERROR, "exec kernel was closed (its ExecKernel no longer exists)"};
            try {
              return s->call(i, c.backward, c.params, c.in.data(), c.in_names.data(), c.in.size(), c.out.data(),
                             c.out_names.data(), c.out.size());
            } catch (const std::exception &e) {
              return {ATTNCHECK_ERROR, "exec kernel: " + clip(e.what())};
            }
          },
          st.infos[i].backward));
      st.abi.push_back(st.bound.back()->kernel());
    }
  } catch (const std::runtime_error &e) {
    st.bound.clear();
    st.shutdown();
    fs::remove_all(st.dir);
    if (dynamic_cast<const ExecError *>(&e)) throw;
    throw ExecError(st.who() + ": " + e.what());
  }
}

ExecKernel::~ExecKernel() {
  state_->bound.clear();  // waits for calls in flight; stale copies of the structs then fail cleanly
  std::lock_guard lock(state_->mu);  // waits for a call in flight on another thread
  state_->shutdown();
  std::error_code ec;
  fs::remove_all(state_->dir, ec);
}

std::span<const attncheck_kernel> ExecKernel::kernels() const { return state_->abi; }

ExecKernel::CallTimes ExecKernel::call_times() const {
  std::lock_guard lock(state_->mu);
  return state_->times;
}

const std::string &ExecKernel::contract(std::size_t index) const { return state_->infos.at(index).contract; }

const attncheck_kernel &ExecKernel::find(std::string_view name) const {
  std::string names;
  for (const attncheck_kernel &k : state_->abi) {
    if (name == k.name) return k;
    names += (names.empty() ? "" : ", ") + std::string(k.name);
  }
  throw ExecError(state_->who() + " has no kernel named '" + clip(name) + "'; it offers: " + names);
}

const std::string &ExecKernel::command() const { return state_->command; }

int ExecKernel::starts() const {
  std::lock_guard lock(state_->mu);
  return state_->starts;
}

long ExecKernel::pid() const {
  std::lock_guard lock(state_->mu);
  return state_->child ? static_cast<long>(state_->child->pid()) : -1;
}

}  // namespace attncheck
