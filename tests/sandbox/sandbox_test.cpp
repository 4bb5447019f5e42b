// The sandbox: misbehaving kernels (misbehaving_plugin.c) become failing calls with clear messages and never take
// the test process down; a well-behaved kernel gives the same bits as in-process, whatever the layout.
#include "attncheck/contract.h"
#include "attncheck/kernel_call.h"
#include "attncheck/sandbox.h"
#include "feature_problems.h"

#include <catch2/catch.hpp>
#include <dlfcn.h>

#include <array>
#include <chrono>
#include <csignal>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>

using namespace attncheck;
using namespace attncheck::sandbox;

namespace {

constexpr auto kTestTimeout = std::chrono::milliseconds(1000);
constexpr std::uint64_t kTestMemoryMiB = 128;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
/// What the caller's padding holds; the sandbox must leave it alone.
constexpr double kCallerPadding = 7.0;
constexpr std::int64_t kPad = 3;
constexpr Layout kLayouts[] = {Layout::bhld, Layout::blhd, Layout::transposed, Layout::padded};

SandboxOptions test_options() {
  SandboxOptions o;
  o.timeout = kTestTimeout;
  o.memory_limit_mib = kTestMemoryMiB;
  return o;
}

SandboxedPlugin &plugin() {
  static SandboxedPlugin p = SandboxedPlugin::load(MISBEHAVING_PLUGIN, test_options());
  return p;
}
const attncheck_kernel &sandboxed(const std::string &name) { return plugin().find(name); }

/// The same plugin dlopen()ed into the test process.
const attncheck_kernel &in_process(const char *path, const std::string &name) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) throw std::runtime_error(dlerror());
  auto fn = reinterpret_cast<attncheck_kernels_fn>(dlsym(h, ATTNCHECK_KERNELS_SYMBOL));
  std::int32_t n = 0;
  const attncheck_kernel *ks = fn(&n);
  for (std::int32_t i = 0; i < n; ++i)
    if (name == ks[i].name) return ks[i];
  throw std::runtime_error("no kernel " + name);
}

Tensor tensor(std::mt19937_64 &rng, Dtype dt, std::vector<std::int64_t> shape, Layout l, bool random) {
  Tensor t = Tensor::with_layout(dt, std::move(shape), l, kPad);
  t.fill_storage(kCallerPadding);
  std::normal_distribution<double> nd;
  std::vector<double> v(static_cast<std::size_t>(t.numel()), kNaN);
  if (random)
    for (double &x : v) x = nd(rng);
  t.assign(v);
  return t;
}

Problem problem(std::mt19937_64 &rng, Layout l, Mask mask = Mask::none, Dtype dt = Dtype::f32) {
  const Shape s{1, 4, 2, 5, 7, 4, 3};
  Problem p;
  p.shape = s;
  p.params = Params{default_scale(s.D), mask};
  p.q = tensor(rng, dt, {s.B, s.Hq, s.Lq, s.D}, l, true);
  p.k = tensor(rng, dt, {s.B, s.Hkv, s.Lk, s.D}, l, true);
  p.v = tensor(rng, dt, {s.B, s.Hkv, s.Lk, s.Dv}, l, true);
  p.dout = tensor(rng, dt, {s.B, s.Hq, s.Lq, s.Dv}, l, true);
  return p;
}

/// Outputs prefilled with NaN elements and kCallerPadding padding.
struct Outputs {
  Tensor out, lse;
  Outputs(std::mt19937_64 &rng, const Problem &p, Layout l) {
    const Shape &s = p.shape;
    out = tensor(rng, p.dtype(), {s.B, s.Hq, s.Lq, s.Dv}, l, false);
    lse = make_lse(s);
    lse.fill_storage(kNaN);
  }
};

CallResult forward(const attncheck_kernel &k, const Problem &p, Outputs &o) { return call_forward(k, p, o.out, &o.lse); }

bool same_bytes(const Tensor &a, const Tensor &b) {
  return a.bytes().size() == b.bytes().size() && std::memcmp(a.bytes().data(), b.bytes().data(), a.bytes().size()) == 0;
}

bool all_nan(const Tensor &t) {
  for (double x : t.to_vector())
    if (!std::isnan(x)) return false;
  return true;
}

/// Runs a kernel that must fault; returns the fault after checking that the call failed with its message.
CallFault faulting(const std::string &name) {
  std::mt19937_64 rng(1);
  const Problem p = problem(rng, Layout::bhld);
  Outputs o(rng, p, Layout::bhld);
  const CallResult r = forward(sandboxed(name), p, o);
  const CallFault *f = last_fault(sandboxed(name));
  REQUIRE(f);
  INFO(name << ": " << r.message);
  CHECK(r.status == ATTNCHECK_ERROR);
  CHECK(r.message == f->message);
  CHECK(all_nan(o.out));  // nothing copied back from a faulting call
  return *f;
}

/// After a fault, the well-behaved kernel still works (in a fresh server when the fault killed the last one).
void next_call_works() {
  std::mt19937_64 rng(2);
  const Problem p = problem(rng, Layout::bhld);
  Outputs o(rng, p, Layout::bhld);
  REQUIRE(forward(sandboxed("naive"), p, o).ok());
  CHECK(!all_nan(o.out));
}

}  // namespace

TEST_CASE("a sandboxed plugin presents its kernels as ordinary ABI kernels", "[sandbox]") {
  const auto ks = plugin().kernels();
  REQUIRE(ks.size() == 26);
  for (const attncheck_kernel &k : ks) {
    INFO(k.name);
    CHECK(k.abi_version == ATTNCHECK_ABI_VERSION);
    CHECK(k.forward != nullptr);
    CHECK(k.last_error != nullptr);
    const std::string name = k.name;
    CHECK((k.backward != nullptr) == (name == "naive" || name == "write_input" || name == "hang_above_100_keys"));
    REQUIRE(last_fault(k) != nullptr);
  }
  CHECK(std::string(ks[0].name) == "naive");
  CHECK(last_fault(in_process(MISBEHAVING_PLUGIN, "naive")) == nullptr);
  CHECK_THROWS_WITH(plugin().find("nope"), Catch::Contains("it has: naive, fails, segfault"));
}

TEST_CASE("the well-behaved kernel's forward is bit-identical to an in-process call, in every layout", "[sandbox]") {
  for (Layout l : kLayouts)
    for (Mask mask : {Mask::none, Mask::causal}) {
      INFO(layout_name(l) << " " << mask_name(mask));
      std::mt19937_64 rng(static_cast<unsigned>(l) * 2 + static_cast<unsigned>(mask));
      const Problem p = problem(rng, l, mask);
      Outputs direct(rng, p, l), boxed(rng, p, l);
      REQUIRE(forward(in_process(MISBEHAVING_PLUGIN, "naive"), p, direct).ok());
      REQUIRE(forward(sandboxed("naive"), p, boxed).ok());
      CHECK(!all_nan(boxed.out));
      CHECK(same_bytes(direct.out, boxed.out));  // elements equal, the caller's padding untouched
      CHECK(same_bytes(direct.lse, boxed.lse));
      CHECK(!last_fault(sandboxed("naive"))->operator bool());
    }
}

TEST_CASE("the well-behaved kernel's backward is bit-identical to an in-process call, in every layout", "[sandbox]") {
  for (Layout l : kLayouts) {
    INFO(layout_name(l));
    std::mt19937_64 rng(10 + static_cast<unsigned>(l));
    const Problem p = problem(rng, l, Mask::causal);
    Outputs fw(rng, p, l);
    REQUIRE(forward(in_process(MISBEHAVING_PLUGIN, "naive"), p, fw).ok());
    const Shape &s = p.shape;
    auto grads = [&] {
      return std::array<Tensor, 3>{tensor(rng, Dtype::f32, {s.B, s.Hq, s.Lq, s.D}, l, false),
                                   tensor(rng, Dtype::f32, {s.B, s.Hkv, s.Lk, s.D}, l, false),
                                   tensor(rng, Dtype::f32, {s.B, s.Hkv, s.Lk, s.Dv}, l, false)};
    };
    auto direct = grads(), boxed = grads();
    REQUIRE(call_backward(in_process(MISBEHAVING_PLUGIN, "naive"), p, fw.out, &fw.lse, direct[0], direct[1],
                          direct[2]).ok());
    REQUIRE(call_backward(sandboxed("naive"), p, fw.out, &fw.lse, boxed[0], boxed[1], boxed[2]).ok());
    for (int i = 0; i < 3; ++i) {
      CHECK(!all_nan(boxed[static_cast<std::size_t>(i)]));
      CHECK(same_bytes(direct[static_cast<std::size_t>(i)], boxed[static_cast<std::size_t>(i)]));
    }
  }
}

TEST_CASE("a kernel's own error keeps its message and unsupported stays unsupported", "[sandbox]") {
  std::mt19937_64 rng(3);
  const Problem p = problem(rng, Layout::bhld);
  Outputs o(rng, p, Layout::bhld);
  const CallResult r = forward(sandboxed("fails"), p, o);
  CHECK(r.status == ATTNCHECK_ERROR);
  CHECK(r.message == "fails: this kernel always fails");
  CHECK(last_fault(sandboxed("fails"))->kind == CallFault::none);

  const Problem h = problem(rng, Layout::bhld, Mask::none, Dtype::f16);
  Outputs oh(rng, h, Layout::bhld);
  const CallResult u = forward(sandboxed("naive"), h, oh);
  CHECK(u.status == ATTNCHECK_UNSUPPORTED);
  CHECK(u.message == "naive: float32 only");
  CHECK(call_backward(sandboxed("fails"), p, o.out, &o.lse, o.out, o.out, o.out).status == ATTNCHECK_UNSUPPORTED);
}

TEST_CASE("a segfaulting kernel is a failing call naming SIGSEGV, and the next call runs in a fresh server",
          "[sandbox]") {
  const int starts = plugin().server_starts();
  const CallFault f = faulting("segfault");
  CHECK(f.kind == CallFault::signal);
  CHECK(f.signal_number == SIGSEGV);
  CHECK_THAT(f.message, Catch::StartsWith("crashed with SIGSEGV (segmentation fault) at address 0x0"));
  next_call_works();
  CHECK(plugin().server_starts() == starts + 1);
}

TEST_CASE("an aborting kernel is a failing call naming SIGABRT", "[sandbox]") {
  const CallFault f = faulting("abort");
  CHECK(f.kind == CallFault::signal);
  CHECK(f.message == "crashed with SIGABRT (aborted)");
  next_call_works();
}

TEST_CASE("a hanging kernel is killed after the timeout", "[sandbox]") {
  const auto t0 = std::chrono::steady_clock::now();
  const CallFault f = faulting("hang");
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(f.kind == CallFault::timeout);
  CHECK(f.message == "did not return within 1000 ms (a hang?); the sandbox killed it");
  CHECK(took >= kTestTimeout);
  CHECK(took < 3 * kTestTimeout);
  next_call_works();
}

TEST_CASE("a kernel that exits the process is a failing call", "[sandbox]") {
  const CallFault f = faulting("exit");
  CHECK(f.kind == CallFault::protocol);
  CHECK(f.message == "the kernel ended the sandbox process (exit status 3)");
  next_call_works();
}

TEST_CASE("a write one element past the end of out hits the guard page and is attributed to out", "[sandbox]") {
  const CallFault f = faulting("write_past_end");
  CHECK(f.kind == CallFault::signal);
  CHECK(f.tensor == "out");
  CHECK_THAT(f.message, Catch::Matches("read or wrote outside a tensor \\(SIGSEGV at address 0x[0-9a-f]+ = "
                                       "0 bytes past the end of out\\)"));
  next_call_works();
}

TEST_CASE("a read three elements past the end of v is attributed to v", "[sandbox]") {
  const CallFault f = faulting("read_past_end");
  CHECK(f.kind == CallFault::signal);
  CHECK_THAT(f.message, Catch::EndsWith("= 8 bytes past the end of v)"));
}

TEST_CASE("writes before out's first element are reported with their count and first offset", "[sandbox]") {
  const CallFault f = faulting("write_before_start");
  CHECK(f.kind == CallFault::wrote_outside);
  CHECK(f.message == "wrote 2 elements outside out, first at element -2 (before the first)");
  CHECK(f.tensor == "out");
  CHECK(f.element == -2);
}

TEST_CASE("a write to an input is reported naming the input and the element", "[sandbox]") {
  const CallFault f = faulting("write_input");
  CHECK(f.kind == CallFault::wrote_input);
  CHECK(f.message == "wrote input k at element 17");

  std::mt19937_64 rng(4);
  const Problem p = problem(rng, Layout::bhld);
  Outputs o(rng, p, Layout::bhld);
  REQUIRE(forward(sandboxed("naive"), p, o).ok());
  Tensor dq = Tensor::with_layout(Dtype::f32, {1, 4, 5, 4}, Layout::bhld), dk = p.k, dv = p.v;
  const CallResult r = call_backward(sandboxed("write_input"), p, o.out, &o.lse, dq, dk, dv);
  CHECK(r.status == ATTNCHECK_ERROR);
  CHECK(r.message == "wrote input dout at element 1");
}

TEST_CASE("a kernel that returns OK without writing leaves out's NaN prefill for the property engine to catch",
          "[sandbox]") {
  std::mt19937_64 rng(5);
  const Problem p = problem(rng, Layout::padded);
  Outputs o(rng, p, Layout::padded);
  const Tensor before = o.out;
  REQUIRE(forward(sandboxed("no_write"), p, o).ok());
  CHECK(all_nan(o.out));
  CHECK(same_bytes(before, o.out));
}

TEST_CASE("nondeterministic results are passed through call by call, never hidden", "[sandbox]") {
  std::mt19937_64 rng(6);
  const Problem p = problem(rng, Layout::bhld);
  Outputs a(rng, p, Layout::bhld), b(rng, p, Layout::bhld);
  REQUIRE(forward(sandboxed("nondeterministic"), p, a).ok());
  REQUIRE(forward(sandboxed("nondeterministic"), p, b).ok());
  CHECK(a.out.get({0, 0, 0, 0}) != b.out.get({0, 0, 0, 0}));
  CHECK(a.out.get({0, 0, 0, 1}) == b.out.get({0, 0, 0, 1}));
}

TEST_CASE("NaN results are passed through", "[sandbox]") {
  std::mt19937_64 rng(7);
  const Problem p = problem(rng, Layout::blhd);
  Outputs o(rng, p, Layout::blhd);
  o.out.assign(std::vector<double>(static_cast<std::size_t>(o.out.numel()), 0.0));
  REQUIRE(forward(sandboxed("nan"), p, o).ok());
  CHECK(all_nan(o.out));
  CHECK(!all_nan(o.lse));
}

TEST_CASE("a 64 GiB allocation is reported as exceeding the memory limit", "[sandbox]") {
  const CallFault f = faulting("huge_alloc");
  CHECK(f.kind == CallFault::memory);
  CHECK_THAT(f.message, Catch::Matches("exceeded the memory limit of 128 MiB, peak resident [0-9]+ MiB \\(an allocation "
                                       "failed, then SIGSEGV \\(segmentation fault\\)\\)"));
  next_call_works();
}

TEST_CASE("a loop of allocations is reported as exceeding the memory limit, with the kernel's message",
          "[sandbox]") {
  const CallFault f = faulting("alloc_loop");
  CHECK(f.kind == CallFault::memory);
  CHECK_THAT(f.message, Catch::Matches("exceeded the memory limit of 128 MiB, peak resident [0-9]+ MiB \\(an allocation "
                                       "failed; the kernel returned ATTNCHECK_ERROR: alloc_loop: out of memory\\)"));
  next_call_works();
}

TEST_CASE("the memory limit counts what a kernel writes, not the address space it reserves", "[sandbox]") {
  std::mt19937_64 rng(1);
  const Problem p = problem(rng, Layout::bhld);
  Outputs o(rng, p, Layout::bhld);
  const CallResult r = forward(sandboxed("reserve_address_space"), p, o);  // 64 GiB reserved under 128 MiB
  INFO(r.message);
  CHECK(r.ok());
  const CallFault *f = last_fault(sandboxed("reserve_address_space"));
  CHECK((f == nullptr || f->kind == CallFault::none));
  CHECK_FALSE(all_nan(o.out));
}

TEST_CASE("a tensor the sandbox cannot carry is a failing call, not a crash", "[sandbox]") {
  std::mt19937_64 rng(8);
  const Problem p = problem(rng, Layout::bhld);
  Outputs o(rng, p, Layout::bhld);
  const attncheck_params params = p.params.to_abi();
  DLTensor q = p.q.dl(), k = p.k.dl(), v = p.v.dl(), out = o.out.dl();
  q.device.device_type = kDLCUDA;
  CHECK(sandboxed("naive").forward(&params, &q, &k, &v, &out, nullptr) == ATTNCHECK_ERROR);
  CHECK(std::string(sandboxed("naive").last_error()) == "sandbox: tensor q is not on kDLCPU");
  CHECK(last_fault(sandboxed("naive"))->kind == CallFault::protocol);
}

TEST_CASE("a plugin that cannot be loaded is a SandboxError saying why", "[sandbox]") {
  CHECK_THROWS_WITH(SandboxedPlugin::load("/nonexistent/plugin.so", test_options()),
                    Catch::Contains("cannot load plugin '/nonexistent/plugin.so'"));
  CHECK_THROWS_AS(SandboxedPlugin::load("/proc/self/status", test_options()), SandboxError);
  SandboxOptions no_server = test_options();
  no_server.server_executable = "/nonexistent/attncheck-sandbox-server";
  CHECK_THROWS_WITH(SandboxedPlugin::load(MISBEHAVING_PLUGIN, no_server),
                    "sandbox: cannot run the server '/nonexistent/attncheck-sandbox-server' (set "
                    "ATTNCHECK_SANDBOX_SERVER to the path of attncheck-sandbox-server)");
}

TEST_CASE("the bundled flash kernel runs in the sandbox after the parent process used OpenMP", "[sandbox]") {
  std::mt19937_64 rng(9);
  const Problem p = problem(rng, Layout::blhd, Mask::causal);
  Outputs direct(rng, p, Layout::blhd), boxed(rng, p, Layout::blhd);
  const attncheck_kernel &flash = in_process(BUILTIN_PLUGIN, "flash");
  REQUIRE(forward(flash, p, direct).ok());  // starts the parent's OpenMP threads before the fork
  SandboxedPlugin builtin = SandboxedPlugin::load(BUILTIN_PLUGIN);  // default limits: flash's threads need room
  const CallResult r = forward(builtin.find("flash"), p, boxed);
  INFO(r.message);
  REQUIRE(r.ok());
  CHECK(same_bytes(direct.out, boxed.out));
  CHECK(same_bytes(direct.lse, boxed.lse));
}

TEST_CASE("the kernel that hangs above 100 keys is correct below and a timeout above", "[sandbox]") {
  SandboxOptions o;
  o.timeout = std::chrono::milliseconds(500);
  SandboxedPlugin p = SandboxedPlugin::load(MISBEHAVING_PLUGIN, o);
  const attncheck_kernel &k = p.find("hang_above_100_keys");
  for (const std::int64_t Lk : {100, 101}) {
    std::mt19937_64 rng(5);
    Problem pr;
    pr.shape = Shape{1, 1, 1, 2, Lk, 4, 4};
    pr.params = Params{.scale = 0.5, .mask = Mask::none};
    pr.q = tensor(rng, Dtype::f32, {1, 1, 2, 4}, Layout::bhld, true);
    pr.k = tensor(rng, Dtype::f32, {1, 1, Lk, 4}, Layout::bhld, true);
    pr.v = tensor(rng, Dtype::f32, {1, 1, Lk, 4}, Layout::bhld, true);
    Tensor out = make_out(pr.shape, Dtype::f32);
    const CallResult r = call_forward(k, pr, out, nullptr);
    INFO("Lk = " << Lk << ": " << r.message);
    CHECK(r.ok() == (Lk <= 100));
    if (Lk > 100) CHECK(p.last_fault(static_cast<std::size_t>(&k - p.kernels().data())).kind == CallFault::timeout);
  }
}

// ---- ABI 1.2: feature calls ----

namespace {

SandboxedPlugin &feature_plugin() {
  static SandboxedPlugin p = SandboxedPlugin::load(FEATURE_PLUGIN, test_options());
  return p;
}

constexpr std::uint32_t kDenseFeatures = ATTNCHECK_FEATURE_WINDOW | ATTNCHECK_FEATURE_SOFTCAP |
                                         ATTNCHECK_FEATURE_ALIBI | ATTNCHECK_FEATURE_SINKS | ATTNCHECK_FEATURE_MASK |
                                         ATTNCHECK_FEATURE_DROPOUT;
/// The feature sets the transport tests send: everything dense, and each of the two other storages with a mask.
constexpr std::uint32_t kFeatureSets[] = {
    kDenseFeatures, ATTNCHECK_FEATURE_VARLEN | ATTNCHECK_FEATURE_MASK | ATTNCHECK_FEATURE_DROPOUT,
    ATTNCHECK_FEATURE_PAGED | ATTNCHECK_FEATURE_SINKS | ATTNCHECK_FEATURE_WINDOW};
/// Dv = 24: a dense row of out holds the echo kernel's whole digest (feature_plugin.c).
constexpr Shape kFeatureShape{3, 4, 2, 5, 7, 4, 24};

/// Logical outputs NaN-prefilled, gradients too.
struct FeatureOutputs {
  Tensor out, lse, dq, dk, dv;
  std::vector<std::uint8_t> keep;
  explicit FeatureOutputs(const Shape &s) {
    out = make_out(s, Dtype::f32);
    lse = make_lse(s);
    dq = Tensor::contiguous(Dtype::f32, {s.B, s.Hq, s.Lq, s.D});
    dk = Tensor::contiguous(Dtype::f32, {s.B, s.Hkv, s.Lk, s.D});
    dv = Tensor::contiguous(Dtype::f32, {s.B, s.Hkv, s.Lk, s.Dv});
    for (Tensor *t : {&out, &lse, &dq, &dk, &dv}) t->fill_storage(kNaN);
  }
};

double sum_of(const std::vector<double> &xs) {
  double s = 0;
  for (double x : xs) s += std::isfinite(x) ? x : 1000;  // the echo kernel's convention for −∞
  return s;
}

}  // namespace

TEST_CASE("a feature call reaches a sandboxed kernel with every scalar and args tensor", "[sandbox][features]") {
  std::mt19937_64 rng(20);
  const Problem p = featuret::feature_problem(rng, Dtype::f32, kFeatureShape, Mask::causal, kDenseFeatures);
  const Features &f = p.features;
  FeatureOutputs o(p.shape);
  const CallResult r = call_forward(feature_plugin().find("echo"), p, o.out, &o.lse, &o.keep);
  INFO(r.message);
  REQUIRE(r.ok());
  auto echo = [&](std::int64_t n) { return o.out.get({0, 0, 0, n}); };
  auto f32 = [](double x) { return static_cast<double>(static_cast<float>(x)); };
  CHECK(echo(0) == static_cast<double>(kDenseFeatures));
  CHECK(echo(1) == static_cast<double>(f.window_left));
  CHECK(echo(2) == static_cast<double>(f.window_right));
  CHECK(echo(3) == 1.5);
  CHECK(echo(4) == f32(sum_of(f.alibi_slopes)));
  CHECK(echo(5) == f32(sum_of(f.sinks)));
  CHECK(echo(6) == f32(sum_of(f.mask)));
  CHECK(echo(7) == -1);  // no cu_seqlens: the pointers arrive NULL
  CHECK(echo(11) == -1);
  CHECK(echo(14) == 0.25);
  CHECK(echo(15) == static_cast<double>(f.dropout_seed % 1000003u));
  CHECK(echo(16) == 1);  // descale_q
  CHECK(echo(20) == static_cast<double>(sizeof(attncheck_args)));
  CHECK(echo(21) == (f.mask_kind == MaskKind::boolean ? kDLUInt * 100 + 8 : kDLFloat * 100 + 32));
  CHECK(echo(23) == f32(p.params.scale));
  CHECK(!last_fault(feature_plugin().find("echo"))->operator bool());
}

TEST_CASE("feature calls through the sandbox give the same bits as in-process in every storage",
          "[sandbox][features]") {
  for (const std::uint32_t bits : kFeatureSets) {
    INFO(feature_list(bits));
    std::mt19937_64 rng(21 + bits);
    Problem p = featuret::feature_problem(rng, Dtype::f32, kFeatureShape, Mask::causal, bits);
    FeatureOutputs direct(p.shape), boxed(p.shape);
    REQUIRE(call_forward(in_process(FEATURE_PLUGIN, "echo"), p, direct.out, &direct.lse, &direct.keep).ok());
    REQUIRE(call_forward(feature_plugin().find("echo"), p, boxed.out, &boxed.lse, &boxed.keep).ok());
    CHECK(!all_nan(boxed.out));
    CHECK(same_bytes(direct.out, boxed.out));
    CHECK(same_bytes(direct.lse, boxed.lse));
    CHECK(direct.keep == boxed.keep);
    if (bits & ATTNCHECK_FEATURE_PAGED) continue;  // no backward in the ABI
    p.features.dropout_keep = direct.keep;
    REQUIRE(call_backward(in_process(FEATURE_PLUGIN, "echo"), p, direct.out, &direct.lse, direct.dq, direct.dk,
                          direct.dv).ok());
    REQUIRE(call_backward(feature_plugin().find("echo"), p, boxed.out, &boxed.lse, boxed.dq, boxed.dk, boxed.dv).ok());
    CHECK(same_bytes(direct.dq, boxed.dq));
    CHECK(same_bytes(direct.dk, boxed.dk));
    CHECK(same_bytes(direct.dv, boxed.dv));
  }
}

TEST_CASE("the dropout mask a sandboxed forward writes comes back and its backward reads it", "[sandbox][features]") {
  std::mt19937_64 rng(22);
  Problem p = featuret::feature_problem(rng, Dtype::f32, kFeatureShape, Mask::none, ATTNCHECK_FEATURE_DROPOUT);
  FeatureOutputs o(p.shape);
  REQUIRE(call_forward(feature_plugin().find("echo"), p, o.out, &o.lse, &o.keep).ok());
  const Shape &s = p.shape;
  REQUIRE(o.keep.size() == static_cast<std::size_t>(s.B * s.Hq * s.Lq * s.Lk));
  std::size_t kept = 0;
  for (std::uint8_t x : o.keep) {
    CHECK(x <= 1);  // every element written (none left kDropoutUnwritten)
    kept += x;
  }
  CHECK(kept > 0);
  CHECK(kept < o.keep.size());
  p.features.dropout_keep = o.keep;
  REQUIRE(call_backward(feature_plugin().find("echo"), p, o.out, &o.lse, o.dq, o.dk, o.dv).ok());
  // dq row-major element 22 is the digest's slot 22: the sum of the mask the backward was given.
  const std::vector<double> dq = o.dq.to_vector();
  CHECK(dq[22] == static_cast<double>(kept));
}

TEST_CASE("a kernel that writes an args input is reported naming the args tensor", "[sandbox][features]") {
  std::mt19937_64 rng(23);
  const Problem p = featuret::feature_problem(rng, Dtype::f32, kFeatureShape, Mask::none, kDenseFeatures);
  FeatureOutputs o(p.shape);
  const attncheck_kernel &ws = feature_plugin().find("write_sinks");
  const CallResult r = call_forward(ws, p, o.out, &o.lse, &o.keep);
  CHECK(r.status == ATTNCHECK_ERROR);
  const CallFault *f = last_fault(ws);
  REQUIRE(f);
  CHECK(f->kind == CallFault::wrote_input);
  CHECK(f->tensor == "sinks");
  CHECK(f->element == 1);
  CHECK(r.message == "wrote input sinks at element 1");
  CHECK(all_nan(o.out));

  Problem b = p;
  b.features.dropout_keep.assign(static_cast<std::size_t>(p.shape.B * p.shape.Hq * p.shape.Lq * p.shape.Lk), 1);
  const attncheck_kernel &wd = feature_plugin().find("write_dropout");
  const CallResult rb = call_backward(wd, b, o.out, &o.lse, o.dq, o.dk, o.dv);
  CHECK(rb.status == ATTNCHECK_ERROR);
  CHECK(rb.message == "wrote input dropout_mask at element 0");
  CHECK(last_fault(wd)->tensor == "dropout_mask");
}

TEST_CASE("a read past the end of an args tensor hits its guard page and names it", "[sandbox][features]") {
  std::mt19937_64 rng(24);
  const Problem p = featuret::feature_problem(rng, Dtype::f32, kFeatureShape, Mask::none, ATTNCHECK_FEATURE_ALIBI);
  FeatureOutputs o(p.shape);
  const attncheck_kernel &k = feature_plugin().find("read_alibi");
  const CallResult r = call_forward(k, p, o.out, &o.lse);
  CHECK(r.status == ATTNCHECK_ERROR);
  const CallFault *f = last_fault(k);
  REQUIRE(f);
  CHECK(f->kind == CallFault::signal);
  CHECK(f->tensor == "alibi_slopes");
  CHECK_THAT(r.message, Catch::EndsWith("= 8 bytes past the end of alibi_slopes)"));
  // The server restarts and serves the next feature call.
  REQUIRE(call_forward(feature_plugin().find("echo"), p, o.out, &o.lse).ok());
}

TEST_CASE("a call without features reaches a sandboxed kernel with no args as before ABI 1.2",
          "[sandbox][features]") {
  std::mt19937_64 rng(25);
  Problem p = featuret::feature_problem(rng, Dtype::f32, kFeatureShape, Mask::none, 0);
  FeatureOutputs o(p.shape);
  REQUIRE(call_forward(feature_plugin().find("echo"), p, o.out, &o.lse).ok());
  CHECK(o.out.get({0, 0, 0, 0}) == 0);   // params.features
  CHECK(o.out.get({0, 0, 0, 1}) == -7);  // params.args == NULL in the child
}

TEST_CASE("the bundled naive kernel gives the same bits in the sandbox as in-process on feature calls",
          "[sandbox][features]") {
  SandboxedPlugin builtin = SandboxedPlugin::load(BUILTIN_PLUGIN);
  const attncheck_kernel &boxed_naive = builtin.find("naive");
  const std::uint32_t declared =
      parse_contract(builtin.contract(static_cast<std::size_t>(&boxed_naive - builtin.kernels().data()))).features;
  if (declared == 0) {
    WARN("the bundled naive kernel declares no features yet: nothing to compare");
    return;
  }
  for (const std::uint32_t bits : kFeatureSets) {
    const std::uint32_t sent = bits & declared;
    if (sent == 0 || ((bits & (ATTNCHECK_FEATURE_VARLEN | ATTNCHECK_FEATURE_PAGED)) &&
                      !(sent & (ATTNCHECK_FEATURE_VARLEN | ATTNCHECK_FEATURE_PAGED))))
      continue;
    INFO(feature_list(sent));
    std::mt19937_64 rng(26 + bits);
    Problem p = featuret::feature_problem(rng, Dtype::f32, kFeatureShape, Mask::causal, sent);
    FeatureOutputs direct(p.shape), boxed(p.shape);
    const CallResult a = call_forward(in_process(BUILTIN_PLUGIN, "naive"), p, direct.out, &direct.lse, &direct.keep);
    const CallResult b = call_forward(boxed_naive, p, boxed.out, &boxed.lse, &boxed.keep);
    INFO(a.message << " / " << b.message);
    CHECK(a.ok());  // it declared these features
    CHECK(a.status == b.status);
    CHECK(!all_nan(boxed.out));
    CHECK(same_bytes(direct.out, boxed.out));
    CHECK(same_bytes(direct.lse, boxed.lse));
    CHECK(direct.keep == boxed.keep);
    if (!a.ok() || (sent & ATTNCHECK_FEATURE_PAGED) || !boxed_naive.backward) continue;
    p.features.dropout_keep = direct.keep;  // backward applies the forward's mask
    const CallResult ga = call_backward(in_process(BUILTIN_PLUGIN, "naive"), p, direct.out, &direct.lse, direct.dq,
                                        direct.dk, direct.dv);
    const CallResult gb = call_backward(boxed_naive, p, boxed.out, &boxed.lse, boxed.dq, boxed.dk, boxed.dv);
    INFO(ga.message << " / " << gb.message);
    CHECK(ga.status == gb.status);
    CHECK(same_bytes(direct.dq, boxed.dq));
    CHECK(same_bytes(direct.dk, boxed.dk));
    CHECK(same_bytes(direct.dv, boxed.dv));
  }
}
