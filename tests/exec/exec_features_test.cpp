// ABI 1.2 feature calls through the exec protocol (spec/EXEC_PROTOCOL.md §4.1): the request's feature tokens and
// argument files as documented (a logging peer), the dropout mask both ways, a kernel that declares no feature never
// sent one, and the NumPy example kernel's features against a float64 evaluation of SPEC.md §2.7.
#include "attncheck/contract.h"
#include "exec_support.h"
#include "feature_problems.h"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace attncheck;
using namespace exect;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

constexpr std::uint32_t kDense = ATTNCHECK_FEATURE_WINDOW | ATTNCHECK_FEATURE_SOFTCAP | ATTNCHECK_FEATURE_ALIBI |
                                 ATTNCHECK_FEATURE_SINKS | ATTNCHECK_FEATURE_MASK;

/// A log file for the features peer, removed at the end of the test.
struct Log {
  std::string path;
  Log() {
    std::string t = (fs::temp_directory_path() / "attncheck-exec-features-XXXXXX").string();
    const int fd = ::mkstemp(t.data());
    REQUIRE(fd >= 0);
    ::close(fd);
    path = t;
  }
  ~Log() { fs::remove(path); }
  std::string text() const {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
};

/// Logical outputs, NaN-prefilled.
struct Results {
  Tensor out, lse, dq, dk, dv;
  std::vector<std::uint8_t> keep;
  explicit Results(const Shape &s, Dtype dt) {
    out = make_out(s, dt);
    lse = make_lse(s);
    dq = Tensor::contiguous(dt, {s.B, s.Hq, s.Lq, s.D});
    dk = Tensor::contiguous(dt, {s.B, s.Hkv, s.Lk, s.D});
    dv = Tensor::contiguous(dt, {s.B, s.Hkv, s.Lk, s.Dv});
    for (Tensor *t : {&out, &lse, &dq, &dk, &dv}) t->fill_storage(kNaN);
  }
};

std::string number(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

}  // namespace

TEST_CASE("a feature call sends its feature tokens and argument files as the protocol documents") {
  Quiet q;
  Log log;
  ExecKernel exec(peer("features", log.path), q.options());
  const std::uint32_t declared = parse_contract(exec.contract(0)).features;
  CHECK(declared == (kDense | ATTNCHECK_FEATURE_VARLEN | ATTNCHECK_FEATURE_PAGED | ATTNCHECK_FEATURE_DROPOUT |
                     ATTNCHECK_FEATURE_FP8));
  std::mt19937_64 rng(31);
  // D = Dv: the peer answers forward with out = q.
  Problem p = featuret::feature_problem(rng, Dtype::f32, Shape{2, 2, 1, 3, 5, 4, 4}, Mask::causal,
                                        kDense | ATTNCHECK_FEATURE_DROPOUT);
  const Features &f = p.features;
  Results r(p.shape, Dtype::f32);
  const CallResult fw = call_forward(exec.find("peer"), p, r.out, nullptr, &r.keep);
  INFO(fw.message);
  REQUIRE(fw.ok());
  const std::string mask_descr = f.mask_kind == MaskKind::boolean ? "|u1" : "<f4";
  const std::string request =
      "forward peer float32 " + number(p.params.scale) + " causal features=window+softcap+alibi+sinks+mask+dropout" +
      " window=" + std::to_string(f.window_left) + "," + std::to_string(f.window_right) + " softcap=1.5" +
      " dropout_p=0.25 dropout_seed=" + std::to_string(f.dropout_seed) + " DIR\n";
  const std::string files = "alibi_slopes.npy <f4 (2,)\n"
                            "attn_mask.npy " + mask_descr + " (" + std::to_string(f.mask_B) + ", " +
                            std::to_string(f.mask_H) + ", 3, 5)\n"
                            "k.npy <f4 (2, 1, 5, 4)\n"
                            "q.npy <f4 (2, 2, 3, 4)\n"
                            "sinks.npy <f4 (2,)\n"
                            "v.npy <f4 (2, 1, 5, 4)\n";
  CHECK(log.text() == request + files);
  // The mask the peer wrote came back: element n is n % 3 == 0.
  REQUIRE(r.keep.size() == 2 * 2 * 3 * 5);
  for (std::size_t n = 0; n < r.keep.size(); ++n) CHECK(r.keep[n] == (n % 3 == 0 ? 1 : 0));

  // Backward gets it as an input file.
  fs::remove(log.path);
  p.features.dropout_keep = r.keep;
  REQUIRE(call_backward(exec.find("peer"), p, r.out, nullptr, r.dq, r.dk, r.dv).ok());
  const std::string text = log.text();
  CHECK_THAT(text, Catch::StartsWith("backward peer float32 "));
  CHECK_THAT(text, Contains("\ndropout_mask.npy |u1 (2, 2, 3, 5)\n"));
  CHECK_THAT(text, Contains("\ndout.npy <f4 (2, 2, 3, 4)\n"));
}

TEST_CASE("varlen and paged calls send packed tensors and int32 offsets and tables") {
  Quiet q;
  Log log;
  ExecKernel exec(peer("features", log.path), q.options());
  std::mt19937_64 rng(32);
  {
    const Problem p = featuret::feature_problem(rng, Dtype::f32, Shape{3, 2, 2, 4, 6, 4, 4}, Mask::none,
                                                ATTNCHECK_FEATURE_VARLEN);
    Results r(p.shape, Dtype::f32);
    REQUIRE(call_forward(exec.find("peer"), p, r.out, nullptr).ok());
    std::int64_t tq = 0, tk = 0;
    for (auto n : p.features.seqlens_q) tq += n;
    for (auto n : p.features.seqlens_k) tk += n;
    const std::string text = log.text();
    CHECK_THAT(text, Contains(" none features=varlen max_seqlen=4,6 DIR\n"));
    CHECK_THAT(text, Contains("\ncu_seqlens_k.npy <i4 (4,)\ncu_seqlens_q.npy <i4 (4,)\n"));
    CHECK_THAT(text, Contains("\nq.npy <f4 (1, 2, " + std::to_string(tq) + ", 4)\n"));
    CHECK_THAT(text, Contains("\nk.npy <f4 (1, 2, " + std::to_string(tk) + ", 4)\n"));
  }
  fs::remove(log.path);
  {
    const Problem p = featuret::feature_problem(rng, Dtype::f32, Shape{2, 2, 1, 3, 5, 4, 4}, Mask::causal,
                                                ATTNCHECK_FEATURE_PAGED);
    Results r(p.shape, Dtype::f32);
    REQUIRE(call_forward(exec.find("peer"), p, r.out, nullptr).ok());
    const std::string text = log.text();
    CHECK_THAT(text, Contains(" causal features=paged page_size=2 DIR\n"));
    CHECK_THAT(text, Contains("\nblock_table.npy <i4 (2, 3)\n"));
    CHECK_THAT(text, Contains("\nseqused_k.npy <i4 (2,)\n"));
    CHECK_THAT(text, Contains("\nk.npy <f4 (8, 1, 2, 4)\n"));  // 2·3 pages in use and 2 unused
  }
}

TEST_CASE("an FP8 call sends q k and v as uint8 float8 bits with the format and descales as tokens") {
  Quiet q;
  Log log;
  ExecKernel exec(peer("features", log.path), q.options());
  std::mt19937_64 rng(33);
  Problem p = featuret::feature_problem(rng, Dtype::bf16, Shape{1, 2, 1, 3, 5, 4, 4}, Mask::none, 0);
  p.features.fp8 = Fp8::e5m2;
  p.features.descale_q = 0.125;
  p.features.descale_k = 3;
  p.features.descale_v = 0.5;
  Results r(p.shape, Dtype::bf16);
  // The peer answers forward with out = q, here float8 bits: its reply is refused (out must be bfloat16), which is
  // not what this test is about; the request and files it logged are.
  const CallResult fw = call_forward(exec.find("peer"), p, r.out, nullptr);
  INFO(fw.message);
  CHECK_THAT(fw.message, Contains("out.npy has descr '|u1', expected '<u2'"));
  const std::string text = log.text();
  CHECK_THAT(text, Contains(" none features=fp8 fp8=e5m2 descale=0.125,3,0.5 DIR\n"));
  CHECK_THAT(text, Catch::StartsWith("forward peer bfloat16 "));
  CHECK_THAT(text, Contains("\nq.npy |u1 (1, 2, 3, 4)\n"));
  CHECK_THAT(text, Contains("\nk.npy |u1 (1, 1, 5, 4)\n"));
  CHECK_THAT(text, Contains("\nv.npy |u1 (1, 1, 5, 4)\n"));
}

TEST_CASE("a call without features sends the request line of protocol version 1 unchanged") {
  Quiet q;
  Log log;
  ExecKernel exec(peer("features", log.path), q.options());
  std::mt19937_64 rng(33);
  const Problem p = featuret::feature_problem(rng, Dtype::f32, Shape{1, 2, 1, 3, 5, 4, 4}, Mask::none, 0);
  Results r(p.shape, Dtype::f32);
  REQUIRE(call_forward(exec.find("peer"), p, r.out, nullptr).ok());
  CHECK(log.text() == "forward peer float32 " + number(p.params.scale) + " none DIR\n" +
                          "k.npy <f4 (1, 1, 5, 4)\nq.npy <f4 (1, 2, 3, 4)\nv.npy <f4 (1, 1, 5, 4)\n");
}

#if ATTNCHECK_HAVE_NUMPY

TEST_CASE("a feature the exec kernel does not declare never reaches its child") {
  Quiet q;
  ExecKernel exec(numpy_kernel("--features window"), q.options());
  CHECK(exec.contract(0) == "features=window");
  std::mt19937_64 rng(34);
  const Problem p = featuret::feature_problem(rng, Dtype::f32, Shape{1, 2, 1, 3, 5, 4, 4}, Mask::none,
                                              ATTNCHECK_FEATURE_WINDOW | ATTNCHECK_FEATURE_SINKS);
  Results r(p.shape, Dtype::f32);
  const CallResult c = call_forward(exec.find("numpy"), p, r.out, &r.lse);
  CHECK(c.status == ATTNCHECK_UNSUPPORTED);
  CHECK_THAT(c.message, Contains("does not declare the feature(s) sinks"));
  const ExecKernel::CallTimes t = exec.call_times();
  CHECK(t.first_calls + t.other_calls == 0);
}

TEST_CASE("the NumPy kernel declares the features it implements in its hello") {
  Quiet q;
  ExecKernel exec(numpy_kernel("--contract 'causal=top-left lse=none'"), q.options());
  CHECK(exec.contract(0) == "causal=top-left lse=none features=window+softcap+alibi+sinks+mask+varlen+paged");
  CHECK(parse_contract(exec.contract(0)).features ==
        (kDense | ATTNCHECK_FEATURE_VARLEN | ATTNCHECK_FEATURE_PAGED));
}

TEST_CASE("the NumPy kernel's features through the exec protocol agree with a float64 evaluation") {
  Quiet q;
  ExecKernel exec(numpy_kernel(), q.options());
  const attncheck_kernel &k = exec.find("numpy");
  struct Case {
    std::uint32_t bits;
    Dtype dt;
    double tolerance;  // relative to |exact| + 1: one rounding to the storage dtype, and some
  };
  const Case cases[] = {
      {kDense, Dtype::f32, 1e-6},
      {ATTNCHECK_FEATURE_WINDOW | ATTNCHECK_FEATURE_SOFTCAP, Dtype::f32, 1e-6},
      {ATTNCHECK_FEATURE_ALIBI | ATTNCHECK_FEATURE_SINKS, Dtype::f32, 1e-6},
      {ATTNCHECK_FEATURE_MASK, Dtype::f32, 1e-6},
      {ATTNCHECK_FEATURE_VARLEN | ATTNCHECK_FEATURE_MASK | ATTNCHECK_FEATURE_WINDOW | ATTNCHECK_FEATURE_ALIBI,
       Dtype::f32, 1e-6},
      {ATTNCHECK_FEATURE_VARLEN | ATTNCHECK_FEATURE_SINKS | ATTNCHECK_FEATURE_SOFTCAP, Dtype::f16, 2e-3},
      {ATTNCHECK_FEATURE_PAGED | ATTNCHECK_FEATURE_SINKS | ATTNCHECK_FEATURE_SOFTCAP | ATTNCHECK_FEATURE_MASK,
       Dtype::f32, 1e-6},
      {ATTNCHECK_FEATURE_PAGED | ATTNCHECK_FEATURE_WINDOW | ATTNCHECK_FEATURE_ALIBI, Dtype::bf16, 1e-2},
  };
  std::mt19937_64 rng(35);
  for (const Case &c : cases)
    for (const Mask mask : {Mask::none, Mask::causal}) {
      for (int rep = 0; rep < 3; ++rep) {
        // Shape fields: B, Hq, Hkv, Lq, Lk, D, Dv; Lq > Lk and Lq < Lk in turn (rows that see no key, long windows).
        const Shape s = rep % 2 ? Shape{3, 4, 2, 7, 5, 8, 4} : Shape{3, 4, 2, 4, 9, 8, 4};
        Problem p = featuret::feature_problem(rng, c.dt, s, mask, c.bits);
        INFO(feature_list(c.bits) << " " << dtype_name(c.dt) << " " << mask_name(mask) << " "
                                  << p.features.describe());
        Results r(p.shape, c.dt);
        const CallResult fw = call_forward(k, p, r.out, &r.lse);
        INFO(fw.message);
        REQUIRE(fw.ok());
        const featuret::Exact e = featuret::exact(p);
        CHECK(featuret::max_rel_error(r.out, e.out) <= c.tolerance);
        CHECK(featuret::max_rel_error(r.lse, e.lse) <= 1e-6);  // float32 whatever the storage
        if (c.bits & ATTNCHECK_FEATURE_PAGED) {
          CHECK(call_backward(k, p, r.out, &r.lse, r.dq, r.dk, r.dv).status == ATTNCHECK_UNSUPPORTED);
          continue;
        }
        const CallResult bw = call_backward(k, p, r.out, &r.lse, r.dq, r.dk, r.dv);
        INFO(bw.message);
        REQUIRE(bw.ok());
        CHECK(featuret::max_rel_error(r.dq, e.dq) <= c.tolerance);
        CHECK(featuret::max_rel_error(r.dk, e.dk) <= c.tolerance);
        CHECK(featuret::max_rel_error(r.dv, e.dv) <= c.tolerance);
      }
    }
  CHECK(exec.starts() == 1);
}

#endif
