// ExecKernel: a child process speaking spec/EXEC_PROTOCOL.md as an ordinary ABI kernel. The NumPy example kernel
// agrees with the reference under the error model; one child serves every call; every protocol failure gives its
// clear one-line message.
#include "attncheck/containment.h"
#include "attncheck/error_model.h"
#include "attncheck/reference.h"
#include "exec_support.h"

#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <filesystem>
#include <regex>

using namespace attncheck;
using namespace exect;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

/// The ExecError message of starting `command`, or "(started)".
std::string start_error(const std::string &command, std::chrono::milliseconds timeout = kShortTimeout) {
  Quiet q;
  try {
    ExecKernel k(command, q.options(timeout, timeout));  // the start timeout binds on purpose
  } catch (const ExecError &e) {
    return e.what();
  }
  return "(started)";
}

/// A small float32 problem of shape [1,2,3,4] (D = Dv = 4).
Problem small_problem(std::uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  return make_problem(rng, Dtype::f32, Shape{1, 2, 2, 3, 5, 4, 4}, Mask::none);
}

/// forward of `kernel` on the small problem.
CallResult small_forward(const attncheck_kernel &kernel) {
  std::mt19937_64 rng(2);
  const Problem p = small_problem();
  Outputs o(rng, p);
  return call_forward(kernel, p, o.out, &o.lse);
}

bool one_line(const std::string &s) { return s.find('\n') == std::string::npos && !s.empty(); }

}  // namespace

#if ATTNCHECK_HAVE_NUMPY

namespace {

Ratios ratios(const Problem &p, const Outputs &o) { return testkit::ratios(o, Expected(p)); }

struct Case {
  const char *what;
  Dtype dt;
  Shape s;
  Mask mask;
};
// Shape fields: B, Hq, Hkv, Lq, Lk, D, Dv.
const Case kCases[] = {
    {"f32 plain", Dtype::f32, {2, 2, 2, 5, 7, 8, 4}, Mask::none},
    {"f32 GQA causal", Dtype::f32, {1, 4, 2, 6, 6, 8, 8}, Mask::causal},
    {"f32 MQA causal Lq > Lk (empty rows)", Dtype::f32, {1, 3, 1, 9, 4, 4, 5}, Mask::causal},
    {"f16 GQA causal Lq < Lk", Dtype::f16, {1, 4, 2, 3, 8, 8, 8}, Mask::causal},
    {"bf16 GQA causal Lq > Lk", Dtype::bf16, {2, 2, 1, 6, 3, 8, 4}, Mask::causal},
};

}  // namespace

TEST_CASE("the NumPy example kernel through ExecKernel agrees with the reference within the error model") {
  Quiet q;
  ExecKernel exec(numpy_kernel(), q.options());
  const attncheck_kernel &k = exec.find("numpy");
  std::mt19937_64 rng(11);
  for (const Case &c : kCases) {
    CAPTURE(c.what);
    const Problem p = make_problem(rng, c.dt, c.s, c.mask);
    Outputs o(rng, p);
    const CallResult r = run(k, p, o);
    INFO(r.message);
    REQUIRE(r.ok());
    const Ratios rt = ratios(p, o);
    CAPTURE(rt.out, rt.lse, rt.dq, rt.dk, rt.dv);
    CHECK(rt.max() <= 1.0);
    if (c.s.Lq > c.s.Lk && c.mask == Mask::causal) {  // the first Lq − Lk rows see no key: exactly 0 and −∞
      CHECK(o.lse.get({0, 0, 0}) == -std::numeric_limits<double>::infinity());
      CHECK(o.out.get({0, 0, 0, 0}) == 0.0);
    }
  }
  CHECK(exec.starts() == 1);
}

TEST_CASE("a planted bug in the NumPy kernel breaks the error model's bound") {
  std::mt19937_64 rng(5);
  for (const char *bug : {"missing_scale", "causal_top_left", "lse_log2", "gqa_no_sum"}) {
    CAPTURE(bug);
    Quiet q;
    ExecKernel exec(numpy_kernel(std::string("--bug ") + bug), q.options());
    const Problem p = make_problem(rng, Dtype::f32, Shape{1, 4, 2, 6, 5, 8, 4}, Mask::causal);
    Outputs o(rng, p);
    REQUIRE(run(exec.find("numpy"), p, o).ok());
    CHECK(ratios(p, o).max() > 1.0);
  }
}

TEST_CASE("one child process serves many calls") {
  Quiet q;
  ExecKernel exec(numpy_kernel(), q.options());
  const attncheck_kernel &k = exec.find("numpy");
  const long pid = exec.pid();
  REQUIRE(pid > 0);
  constexpr int kCalls = 30;
  std::mt19937_64 rng(9);
  for (int i = 0; i < kCalls; ++i) {
    const Problem p = make_problem(rng, i % 2 ? Dtype::f16 : Dtype::f32, Shape{1, 2, 1, 3, 4, 4, 4},
                                   i % 3 ? Mask::causal : Mask::none);
    Outputs o(rng, p);
    REQUIRE(run(k, p, o).ok());
  }
  CHECK(exec.starts() == 1);
  CHECK(exec.pid() == pid);
}

TEST_CASE("an exec kernel is an ordinary ABI kernel") {
  Quiet q;
  ExecKernel exec(numpy_kernel("--name np32 --forward-only --f32-only"), q.options());
  REQUIRE(exec.kernels().size() == 1);
  const attncheck_kernel &k = exec.kernels()[0];
  CHECK(k.abi_version == ATTNCHECK_ABI_VERSION);
  CHECK(std::string(k.name) == "np32");
  CHECK(k.forward != nullptr);
  CHECK(k.backward == nullptr);  // forward-only in the hello
  CHECK(k.last_error != nullptr);
  CHECK(&exec.find("np32") == &k);
  CHECK_THROWS_WITH(exec.find("numpy"), Contains("has no kernel named 'numpy'; it offers: np32"));

  std::mt19937_64 rng(4);
  const Problem p16 = make_problem(rng, Dtype::f16, Shape{1, 1, 1, 2, 2, 4, 4}, Mask::none);
  Outputs o16(rng, p16);
  const CallResult r = call_forward(k, p16, o16.out, &o16.lse);
  CHECK(r.status == ATTNCHECK_UNSUPPORTED);
  CHECK(r.message == "np32 handles float32 only");

  // lse may be NULL: the child still writes lse.npy, nobody reads it
  const Problem p = make_problem(rng, Dtype::f32, Shape{1, 1, 1, 2, 2, 4, 4}, Mask::none);
  Outputs o(rng, p);
  CHECK(call_forward(k, p, o.out, nullptr).ok());
  CHECK(!std::isnan(o.out.get({0, 0, 1, 3})));
}

TEST_CASE("two exec kernels at once keep their own children and state") {
  Quiet q;
  ExecKernel a(numpy_kernel("--name a"), q.options()), b(numpy_kernel("--name b --bug missing_scale"), q.options());
  CHECK(a.kernels()[0].forward != b.kernels()[0].forward);  // distinct trampolines
  std::mt19937_64 rng(8);
  const Problem p = make_problem(rng, Dtype::f32, Shape{1, 1, 1, 3, 3, 16, 4}, Mask::none);
  Outputs oa(rng, p), ob(rng, p);
  REQUIRE(call_forward(a.find("a"), p, oa.out, &oa.lse).ok());
  REQUIRE(call_forward(b.find("b"), p, ob.out, &ob.lse).ok());
  CHECK(oa.lse.to_vector() != ob.lse.to_vector());
}

TEST_CASE("the exchange directory may contain spaces") {
  const fs::path root = fs::temp_directory_path() / "attncheck exec test dir";
  fs::create_directories(root);
  Quiet q;
  ExecOptions opt = q.options();
  opt.temp_root = root.string();
  {
    ExecKernel exec(numpy_kernel(), opt);
    std::mt19937_64 rng(2);
    const Problem p = small_problem();
    Outputs o(rng, p);
    const CallResult r = run(exec.find("numpy"), p, o);
    INFO(r.message);
    CHECK(r.ok());
  }
  CHECK(fs::is_empty(root));  // the exchange directory is removed with the ExecKernel
  fs::remove_all(root);
}

#endif  // ATTNCHECK_HAVE_NUMPY

// ---- protocol failures at start-up: ExecError ----

TEST_CASE("start-up: a command that does not exist") {
  const std::string msg = start_error("attncheck-no-such-kernel --serve");
  CHECK(one_line(msg));
  CHECK_THAT(msg, Contains("exec command 'attncheck-no-such-kernel --serve': the shell could not find the command "
                           "(exit status 127; stderr:"));
  CHECK_THAT(msg, Contains("not found"));
  CHECK_THAT(msg, Contains("check COMMAND and PATH"));
}

TEST_CASE("start-up: a command that exits at once") {
  const std::string msg = start_error("echo 'kernel: CUDA not available' >&2; exit 3");
  CHECK(one_line(msg));
  CHECK_THAT(msg, Contains("exited with status 3 before its hello line (stderr: kernel: CUDA not available): run "
                           "COMMAND by hand to see why"));
}

TEST_CASE("start-up: no hello line within the timeout") {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string msg = start_error(peer("no_hello"));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  CHECK(one_line(msg));
  CHECK_THAT(msg, Contains("no hello line within 1 s (stderr: peer: thinking about it): the command must print "
                           "'attncheck-exec 1' on stdout first and flush it"));
}

TEST_CASE("start-up: something else than the hello on stdout") {
  const std::string msg = start_error("echo 'Loading model...'; sleep 5");
  CHECK(one_line(msg));
  CHECK_THAT(msg, Contains("no hello line: its first line on stdout was 'Loading model...'; the command must print "
                           "'attncheck-exec 1' first"));
}

TEST_CASE("start-up: a wrong protocol version") {
  const std::string msg = start_error(peer("wrong_version"));
  CHECK(one_line(msg));
  CHECK_THAT(msg, Contains("speaks exec protocol version 2, this attncheck speaks version 1"));
}

TEST_CASE("start-up: a hello without ready, a bad kernel line, no kernels") {
  CHECK_THAT(start_error(peer("no_ready")), Contains("no 'ready' line within 1 s after 'attncheck-exec 1'"));
  CHECK_THAT(start_error("printf 'attncheck-exec 1\\nkernel my/kernel forward\\nready\\n'; sleep 5"),
             Contains("bad hello line 'kernel my/kernel forward': expected 'kernel <name> forward [backward]'"));
  CHECK_THAT(start_error("printf 'attncheck-exec 1\\nkernel k backward\\nready\\n'; sleep 5"),
             Contains("kernel 'k' does not list the capability 'forward'"));
  CHECK_THAT(start_error("printf 'attncheck-exec 1\\nready\\n'; sleep 5"), Contains("announced no kernels"));
  CHECK_THAT(start_error("printf 'attncheck-exec 1\\nkernel k forward\\n'"),
             Contains("exited with status 0 before its 'ready' line"));
}

TEST_CASE("start-up: contract tokens on a kernel line are the kernel's contract, and a bad one is refused") {
  Quiet q;
  ExecKernel exec("printf 'attncheck-exec 1\\nkernel a forward causal=top-left lse=none\\nkernel b forward\\nready\\n'; "
                  "sleep 5",
                  q.options());
  CHECK(exec.contract(0) == "causal=top-left lse=none");
  CHECK(exec.contract(1).empty());
  const std::string msg = start_error("printf 'attncheck-exec 1\\nkernel k forward lse=maybe\\nready\\n'; sleep 5");
  CHECK(one_line(msg));
  CHECK_THAT(msg, Contains("kernel 'k' declares an invalid contract: 'lse=maybe': lse is one of f32|storage|none"));
}

TEST_CASE("the NumPy kernel declared SDPA-style (top-left causal, no LSE) agrees with the reference of that contract") {
  Quiet q;
  ExecKernel exec(numpy_kernel("--contract 'causal=top-left lse=none'"), q.options());
  REQUIRE_THAT(exec.contract(0), Catch::StartsWith("causal=top-left lse=none features="));
  std::mt19937_64 rng(7);
  Problem p = make_problem(rng, Dtype::f32, Shape{1, 2, 1, 5, 3, 4, 4}, Mask::causal_top_left);
  Tensor out = make_out(p.shape, Dtype::f32);
  REQUIRE(call_forward(exec.find("numpy"), p, out, nullptr).ok());  // no LSE asked, none written
  const ExactForward exact = reference_forward(p);
  const ForwardBounds bound = forward_bounds(p, exact, PrecisionProfile::for_storage(Dtype::f32));
  const std::vector<double> got = out.to_vector();
  for (std::size_t x = 0; x < got.size(); ++x) CHECK(error_ratio(got[x], exact.out[x], bound.out[x]) <= 1);
}

// ---- protocol failures during a call: ATTNCHECK_ERROR and last_error() ----

TEST_CASE("call: a garbled answer stops the child and the next call restarts it") {
  Quiet q;
  ExecKernel exec(peer("garbled"), q.options());
  const CallResult r = small_forward(exec.find("peer"));
  CHECK(r.status == ATTNCHECK_ERROR);
  CHECK(one_line(r.message));
  CHECK_THAT(r.message, Contains("exec kernel 'peer' (forward): garbled answer 'okay' (expected 'ok', "
                                 "'unsupported <message>' or 'error <message>'"));
  CHECK(exec.pid() == -1);
  CHECK(small_forward(exec.find("peer")).status == ATTNCHECK_ERROR);
  CHECK(exec.starts() == 2);
}

TEST_CASE("call: ok without out.npy") {
  Quiet q;
  ExecKernel exec(peer("missing_out"), q.options());
  const CallResult r = small_forward(exec.find("peer"));
  CHECK(r.status == ATTNCHECK_ERROR);
  CHECK(one_line(r.message));
  CHECK_THAT(r.message, Contains("exec kernel 'peer' (forward): answered ok but did not write out.npy"));
  CHECK(exec.pid() > 0);  // still in step with the protocol: no restart
}

TEST_CASE("call: out.npy of the wrong shape") {
  Quiet q;
  ExecKernel exec(peer("wrong_shape", "1,2,3,5"), q.options());
  const CallResult r = small_forward(exec.find("peer"));
  CHECK(r.status == ATTNCHECK_ERROR);
  CHECK(one_line(r.message));
  CHECK_THAT(r.message, Contains("exec kernel 'peer' (forward): out.npy has shape (1, 2, 3, 5), expected "
                                 "(1, 2, 3, 4): write each output in the shape and descr of"));
}

TEST_CASE("call: a call that hangs times out, and the child restarts on the next call") {
  Quiet q;
  ExecKernel exec(peer("hang"), q.options(kShortTimeout));
  const auto t0 = std::chrono::steady_clock::now();
  const CallResult r = small_forward(exec.find("peer"));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  CHECK(r.status == ATTNCHECK_ERROR);
  CHECK(one_line(r.message));
  CHECK_THAT(r.message, Contains("exec kernel 'peer' (forward): no answer within 1 s: the child was stopped and "
                                 "restarts on the next call; raise the exec timeout if the kernel is just slow"));
  CHECK(exec.pid() == -1);
  CHECK(exec.starts() == 1);
  CHECK(small_forward(exec.find("peer")).status == ATTNCHECK_ERROR);  // a fresh child, hanging again
  CHECK(exec.starts() == 2);
}

TEST_CASE("call: a child that dies during a call is reported with its stderr and restarted") {
  const fs::path marker = fs::temp_directory_path() / ("attncheck-exec-crash-" + std::to_string(::getpid()));
  fs::remove(marker);
  Quiet q;
  ExecKernel exec(peer("crash_once", marker.string()), q.options());
  const CallResult r = small_forward(exec.find("peer"));
  CHECK(r.status == ATTNCHECK_ERROR);
  CHECK(one_line(r.message));
  CHECK_THAT(r.message, Contains("exec kernel 'peer' (forward): the child exited with status 3 during the call "
                                 "(stderr: peer: segfault in my_kernel.cu:42); it restarts on the next call"));
  const CallResult again = small_forward(exec.find("peer"));
  CHECK(again.status == ATTNCHECK_UNSUPPORTED);
  CHECK(again.message == "again");
  CHECK(exec.starts() == 2);
  {
    std::lock_guard lock(*q.mu);
    CHECK(std::find(q.lines->begin(), q.lines->end(), "peer: segfault in my_kernel.cu:42") != q.lines->end());
  }
  fs::remove(marker);
}

TEST_CASE("call: the child runs under the memory limit, so a huge allocation fails inside it") {
  constexpr std::uint64_t kLimitMiB = 256, kHogMiB = 1024;
  Quiet q;
  ExecOptions limited = q.options();
  limited.memory_limit_mib = kLimitMiB;
  ExecKernel exec(peer("hog", std::to_string(kHogMiB)), limited);
  const CallResult r = small_forward(exec.find("peer"));
  CHECK(r.status == ATTNCHECK_ERROR);
  CHECK_THAT(r.message, Contains("hog: out of memory"));
  // Without the limit the same allocation succeeds: the limit, not the machine, stopped it.
  ExecKernel unlimited(peer("hog", std::to_string(kHogMiB)), q.options());
  CHECK_THAT(small_forward(unlimited.find("peer")).message, Contains("hog: allocated"));
}

TEST_CASE("call: the memory limit counts what the child writes, not the address space it reserves") {
  // 2 GiB of PROT_NONE reservations under a 256 MiB limit, as a CUDA build of torch maps on the CPU; the same
  // child still cannot allocate 1 GiB it would write.
  constexpr std::uint64_t kLimitMiB = 256, kReserveMiB = 1024;
  Quiet q;
  ExecOptions limited = q.options();
  limited.memory_limit_mib = kLimitMiB;
  ExecKernel exec(peer("reserve", std::to_string(kReserveMiB)), limited);
  CHECK(small_forward(exec.find("peer")).message == "reserved 1024 MiB");
  CHECK(small_forward(exec.find("peer")).message == "reserved 2048 MiB");
  ExecKernel hog(peer("hog", std::to_string(kReserveMiB)), limited);
  CHECK_THAT(small_forward(hog.find("peer")).message, Contains("hit the memory limit of 256 MiB"));
}

TEST_CASE("call: an allocation failure, answered or fatal, counts as the memory limit: other errors do not") {
  Quiet q;
  ExecOptions limited = q.options();
  limited.memory_limit_mib = 256;
  ExecKernel hog(peer("hog", "1024"), limited);
  CallRecord &record = CallRecord::of_this_thread();
  record.reset();
  const CallResult answered = small_forward(hog.find("peer"));
  CHECK(record.memory_faults == 1);
  CHECK_THAT(answered.message, Contains("hit the memory limit of 256 MiB (--memory-limit, peak resident "));
  // The peak is what the child touched: the 1 GiB it asked for was refused, so it stays below the limit.
  const std::regex peak("peak resident ([0-9]+) MiB");
  std::smatch m;
  REQUIRE(std::regex_search(answered.message, m, peak));
  CHECK(std::stoull(m[1]) > 0);
  CHECK(std::stoull(m[1]) < 256);
  ExecKernel dies(peer("oom_death"), limited);
  record.reset();
  const CallResult died = small_forward(dies.find("peer"));
  CHECK(record.memory_faults == 1);
  CHECK_THAT(died.message, Contains("hit the memory limit of 256 MiB") && Contains("MemoryError: Unable to allocate"));
  CHECK(std::regex_search(died.message, peak));  // read from the exited child before it is reaped
  ExecKernel other(peer("answers"), limited);
  record.reset();
  CHECK_THAT(small_forward(other.find("peer")).message, Contains("kernel exploded"));
  CHECK(record.memory_faults == 0);
}

TEST_CASE("call: only restarts with no call answered between them are capped") {
  Quiet q;
  const fs::path marker = fs::temp_directory_path() / ("attncheck-every-other-" + std::to_string(::getpid()));
  fs::remove(marker);
  ExecKernel exec(peer("crash_every_other", marker.string()), q.options());
  constexpr int kCalls = 24;  // 12 crashes: more than the cap, each followed by an answered call
  for (int n = 0; n < kCalls; ++n)
    CHECK_THAT(small_forward(exec.find("peer")).message, !Contains("gave up"));
  CHECK(exec.starts() == kCalls / 2 + 1);
  fs::remove(marker);
}

TEST_CASE("call: 'unsupported' and 'error' answers carry the child's message") {
  Quiet q;
  ExecKernel exec(peer("answers"), q.options());
  const attncheck_kernel &k = exec.find("peer");
  std::mt19937_64 rng(1);
  const Problem p16 = make_problem(rng, Dtype::f16, Shape{1, 1, 1, 2, 2, 4, 4}, Mask::none);
  Outputs o16(rng, p16);
  CHECK(k.forward != nullptr);
  const CallResult u = call_forward(k, p16, o16.out, &o16.lse);
  CHECK(u.status == ATTNCHECK_UNSUPPORTED);
  CHECK(u.message == "no float16 here");
  const CallResult e = small_forward(k);
  CHECK(e.status == ATTNCHECK_ERROR);
  CHECK(e.message == "exec kernel 'peer' (forward) reported an error: kernel exploded");
  CHECK(std::string(k.last_error()) == e.message);
  CHECK(exec.starts() == 1);
}

TEST_CASE("an exec kernel can neither open the gate's memory for writing nor signal it") {
  const std::shared_ptr<const containment::Domain> domain = containment::kernel_domain();
  if (!domain->available()) {
    WARN("not checked here: " << domain->description());
    return;
  }
  INFO(domain->description());
  Quiet q;
  ExecKernel exec(peer("poke_gate"), q.options());
  const CallResult r = small_forward(exec.find("peer"));
  REQUIRE(r.status == ATTNCHECK_UNSUPPORTED);
  CHECK_THAT(r.message, Contains("mem=denied"));
  if (domain->scopes_signals()) CHECK_THAT(r.message, Contains("signal=denied"));
}

TEST_CASE("closing an ExecKernel stops its child and its ABI structs then fail cleanly") {
  attncheck_kernel copy{};
  long pid = -1;
  {
    Quiet q;
    ExecKernel exec(peer("answers"), q.options());
    copy = exec.kernels()[0];
    pid = exec.pid();
  }
  REQUIRE(pid > 0);
  CHECK((::kill(static_cast<pid_t>(pid), 0) == -1 && errno == ESRCH));
  const CallResult r = small_forward(copy);
  CHECK(r.status == ATTNCHECK_ERROR);
  CHECK_THAT(r.message, Contains("kernel was closed"));
}

TEST_CASE("call: the first call of a shape has its own timeout, and its time is counted apart") {
  // The peer sleeps 1.5 s in every call: past a 1 s call timeout, within a 3 s first-call timeout.
  Quiet q;
  ExecOptions o = q.options(std::chrono::milliseconds(1000));
  o.first_call_timeout = std::chrono::milliseconds(3000);
  ExecKernel exec(peer("slow", "1.5"), o);
  const Problem p = small_problem();
  Tensor out = make_out(p.shape, Dtype::f32), lse = make_lse(p.shape);
  const CallResult first = call_forward(exec.find("peer"), p, out, &lse);
  INFO(first.message);
  CHECK(first.status == ATTNCHECK_UNSUPPORTED);  // it answered: within the first-call timeout
  const CallResult again = call_forward(exec.find("peer"), p, out, &lse);  // the same shape: the 1 s timeout
  CHECK_FALSE(again.ok());
  CHECK_THAT(again.message, Contains("no answer within 1 s"));
  const ExecKernel::CallTimes t = exec.call_times();
  CHECK(t.first_calls == 1);
  CHECK(t.first_seconds >= 1.5);
}

TEST_CASE("a kernel flooding stderr is cut at 64 KiB and its private TMPDIR goes with the ExecKernel") {
  Quiet q;
  std::string tmpdir;
  {
    ExecKernel exec(peer("chatty"), q.options());
    std::mt19937_64 rng(3);
    const Problem p = make_problem(rng, Dtype::f32, Shape{1, 1, 1, 2, 2, 2, 2}, Mask::none);
    for (int call = 0; call < 4; ++call) {  // 4 MiB of stderr in all
      Tensor out = make_out(p.shape, Dtype::f32);
      const CallResult r = call_forward(exec.find("peer"), p, out, nullptr);
      REQUIRE(r.status == ATTNCHECK_UNSUPPORTED);
      tmpdir = r.message.substr(r.message.find('=') + 1);
    }
    CHECK(tmpdir.find("attncheck-exec-") != std::string::npos);  // inside the exchange directory
    CHECK(std::filesystem::exists(tmpdir));
  }
  CHECK(!std::filesystem::exists(tmpdir));  // with the files the kernel left there
  std::size_t bytes = 0;
  for (const std::string &l : *q.lines) bytes += l.size() + 1;
  CHECK(bytes < 70 * 1024);
  REQUIRE(!q.lines->empty());
  CHECK_THAT(q.lines->back(), Contains("more bytes of stderr dropped"));
}
