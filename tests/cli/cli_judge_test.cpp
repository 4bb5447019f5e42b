// attncheck judge end to end: a kernel's saved tensors (an .npz, stored or compressed, in either layout) judged with
// the exit codes of the gate — the bundled flash kernel passes in every dtype, a planted bug fails naming its worst
// element — and every input it cannot take is one line and exit 2.
#include "cli_support.h"

#include "attncheck/kernel_abi.h"
#include "attncheck/kernel_call.h"
#include "attncheck/npy.h"
#include "random_problems.h"
#include "variant_kernels.h"

#include <zip.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <string>

using namespace cli_test;

namespace attncheck {
namespace {

constexpr int kExitPass = 0, kExitCounterexample = 1;

/// The bundled kernel `name`, as libattncheck_builtin exports it.
const attncheck_kernel &builtin(std::string_view name) {
  std::int32_t n = 0;
  const attncheck_kernel *ks = attncheck_kernels(&n);
  const auto *k = std::find_if(ks, ks + n, [&](const attncheck_kernel &x) { return x.name == name; });
  REQUIRE(k != ks + n);
  return *k;
}

/// `t`'s logical elements as an .npy array of its dtype (bfloat16 as its bits), in [B, L, H, D] under `blhd`.
npy::Array array_of(const Tensor &t, bool blhd = false) {
  npy::Array a;
  a.descr = std::string(npy::descr_of(t.dtype()));
  a.shape = t.shape();
  std::vector<double> values = t.to_vector();
  if (blhd && a.shape.size() == 4) {
    const auto s = a.shape;
    std::vector<double> moved(values.size());
    for (std::int64_t b = 0; b < s[0]; ++b)
      for (std::int64_t h = 0; h < s[1]; ++h)
        for (std::int64_t l = 0; l < s[2]; ++l)
          for (std::int64_t d = 0; d < s[3]; ++d)
            moved[static_cast<std::size_t>(((b * s[2] + l) * s[1] + h) * s[3] + d)] =
                values[static_cast<std::size_t>(((b * s[1] + h) * s[2] + l) * s[3] + d)];
    values = std::move(moved);
    a.shape = {s[0], s[2], s[1], s[3]};
  }
  Tensor packed = Tensor::contiguous(t.dtype(), a.shape);
  packed.assign(values);
  const auto bytes = packed.bytes();
  a.data.assign(bytes.begin(), bytes.end());
  return a;
}

/// An .npz of `arrays` at `path` (deflated when `compress`, as numpy.savez_compressed writes it).
void write_npz(const std::string &path, const std::map<std::string, npy::Array> &arrays, bool compress = false) {
  int error = 0;
  zip_t *z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &error);
  REQUIRE(z != nullptr);
  std::vector<std::string> keep;  // libzip reads the buffers at zip_close
  keep.reserve(arrays.size());
  for (const auto &[name, a] : arrays) {
    keep.push_back(npy::serialize(a));
    zip_source_t *src = zip_source_buffer(z, keep.back().data(), keep.back().size(), 0);
    REQUIRE(src != nullptr);
    const zip_int64_t at = zip_file_add(z, (name + ".npy").c_str(), src, ZIP_FL_OVERWRITE);
    REQUIRE(at >= 0);
    if (!compress) REQUIRE(zip_set_file_compression(z, static_cast<zip_uint64_t>(at), ZIP_CM_STORE, 0) == 0);
  }
  REQUIRE(zip_close(z) == 0);
}

/// `kernel`'s forward and backward on a causal GQA problem of `dt`, as a test saves them.
std::map<std::string, npy::Array> saved(const attncheck_kernel &kernel, Dtype dt, bool blhd = false) {
  std::mt19937_64 rng(21);
  const Problem p = make_problem(rng, {2, 4, 2, 19, 33, 16, 8}, dt, Values::normal, Mask::causal);
  Tensor out = make_out(p.shape, dt), lse = make_lse(p.shape);
  REQUIRE(call_forward(kernel, p, out, &lse).ok());
  Tensor dq = Tensor::contiguous(dt, p.q.shape()), dk = Tensor::contiguous(dt, p.k.shape()),
         dv = Tensor::contiguous(dt, p.v.shape());
  REQUIRE(call_backward(kernel, p, out, &lse, dq, dk, dv).ok());
  std::map<std::string, npy::Array> a;
  for (const auto &[name, t] : {std::pair<const char *, const Tensor *>{"q", &p.q}, {"k", &p.k}, {"v", &p.v},
                                {"out", &out}, {"dout", &*p.dout}, {"dq", &dq}, {"dk", &dk}, {"dv", &dv}})
    a.emplace(name, array_of(*t, blhd));
  a.emplace("lse", array_of(lse));
  return a;
}

TEST_CASE("attncheck judge passes the bundled flash kernel's saved outputs and gradients in every dtype") {
  const TempDir dir;
  for (Dtype dt : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    const std::string path = dir / (std::string(dtype_name(dt)) + ".npz");
    write_npz(path, saved(builtin("flash"), dt), dt == Dtype::f16);
    const Run r = run(cli_test::attncheck("judge --inputs " + path + " --causal"));
    INFO(r.out << r.err);
    CHECK(r.status == kExitPass);
    CHECK(r.out.find("attncheck judge: pass") != std::string::npos);
    CHECK(r.out.find("dV   worst") != std::string::npos);
  }
}

TEST_CASE("attncheck judge reads FlashAttention's [B, L, H, D] layout with --layout blhd") {
  const TempDir dir;
  write_npz(dir / "blhd.npz", saved(builtin("flash"), Dtype::bf16, /*blhd=*/true));
  const Run r = run(cli_test::attncheck("judge --inputs " + dir.path.string() + "/blhd.npz --causal --layout blhd"));
  INFO(r.out << r.err);
  CHECK(r.status == kExitPass);
  // Read as [B, H, L, D], the same file is another problem, whose shapes do not fit together.
  CHECK(run(cli_test::attncheck("judge --inputs " + dir.path.string() + "/blhd.npz --causal")).status == 2);
}

TEST_CASE("attncheck judge fails a planted bug's saved outputs, naming the worst element and the count") {
  const TempDir dir;
  write_npz(dir / "bug.npz",
            saved(support::variant_kernel(support::bug_variant(support::Bug::ds_without_d_term)), Dtype::f32));
  const Run r = run(cli_test::attncheck("judge --inputs " + dir.path.string() + "/bug.npz --causal"));
  INFO(r.out << r.err);
  CHECK(r.status == kExitCounterexample);
  CHECK(r.out.find("attncheck judge: FAIL") != std::string::npos);
  CHECK(r.out.find("elements exceed their bound") != std::string::npos);
  CHECK(r.out.find("first failing check (dQ, dK, dV)") != std::string::npos);
}

TEST_CASE("attncheck judge --report-dir writes the judgment's report.json, summary.md and report.html, whose replay "
          "line judges the inputs again") {
  const TempDir dir;
  write_npz(dir / "bug.npz", saved(support::variant_kernel(support::bug_variant(support::Bug::missing_scale)),
                                   Dtype::f16, /*blhd=*/true));
  const Run r = run(cli_test::attncheck("judge --inputs " + dir / "bug.npz" + " --causal --layout blhd --report-dir " +
                                        dir / "out"));
  INFO(r.out << r.err);
  REQUIRE(r.status == kExitCounterexample);
  const std::string json = slurp(dir / "out/report.json");
  CHECK(json.find("\"format\": \"attncheck-judgment\"") != std::string::npos);
  CHECK(json.find("\"kind\": \"scale\"") != std::string::npos);  // the hint
  const std::string md = slurp(dir / "out/summary.md");
  CHECK(md.find("## attncheck judge: FAIL") != std::string::npos);
  CHECK(slurp(dir / "out/report.html").find("attncheck judge: FAIL") != std::string::npos);
  const std::string key = "\"replay\": \"attncheck judge --inputs '";
  const std::size_t at = json.find(key);
  REQUIRE(at != std::string::npos);
  std::string replay = json.substr(at + key.size() - std::string("attncheck judge --inputs '").size());
  replay = replay.substr(0, replay.find("\"\n"));
  CHECK(replay.find(" --layout blhd --causal") != std::string::npos);
  const Run again = run(std::string(ATTNCHECK_EXE) + replay.substr(std::string("attncheck").size()));
  INFO(again.err);
  CHECK(again.status == kExitCounterexample);
  CHECK(again.out == r.out);
  // A report directory it cannot write is one line and exit 2, after the judgment.
  std::ofstream(dir / "file") << "";
  const Run blocked = run(cli_test::attncheck("judge --quiet --inputs " + dir / "bug.npz" +
                                              " --causal --layout blhd --report-dir " + dir / "file"));
  require_usage_error(blocked, "--report-dir: ");
}

TEST_CASE("bfloat16 results saved through float32 fail as a float32 kernel's, with a hint, and pass under --dtype bf16") {
  const TempDir dir;
  std::map<std::string, npy::Array> a = saved(builtin("flash"), Dtype::bf16);
  for (const char *name : {"q", "k", "v", "out", "dout", "dq", "dk", "dv"}) {  // as torch's .float().numpy() saves them
    npy::Array &x = a.at(name);
    Tensor wide = Tensor::contiguous(Dtype::f32, x.shape);
    std::vector<double> values(static_cast<std::size_t>(x.numel()));
    for (std::size_t i = 0; i < values.size(); ++i) {
      std::uint16_t bits;
      std::memcpy(&bits, x.data.data() + 2 * i, 2);
      values[i] = bf16_bits_to_float(bits);
    }
    wide.assign(values);
    x = array_of(wide);
  }
  write_npz(dir / "wide.npz", a);
  const Run wide = run(cli_test::attncheck("judge --inputs " + dir / "wide.npz" + " --causal"));
  INFO(wide.out << wide.err);
  CHECK(wide.status == kExitCounterexample);
  CHECK(wide.err.find("every value of q, k, v and out is a f16 or bf16 value: if the kernel stored f16 or bf16, give "
                      "--dtype f16 or bf16") != std::string::npos);
  CHECK(run(cli_test::attncheck("judge --inputs " + dir / "wide.npz" + " --causal --dtype bf16")).status == kExitPass);
}

TEST_CASE("what attncheck judge cannot take is one line and exit 2") {
  const TempDir dir;
  std::map<std::string, npy::Array> a = saved(builtin("flash"), Dtype::f32);
  const auto judged = [&](const std::map<std::string, npy::Array> &arrays, const std::string &extra = "") {
    write_npz(dir / "case.npz", arrays);
    return run(cli_test::attncheck("judge --inputs " + dir / "case.npz" + extra));
  };
  auto without = [&](const char *name) {
    auto b = a;
    b.erase(name);
    return b;
  };
  require_usage_error(judged(without("out")), "has no array 'out'");
  require_usage_error(judged(without("dout")), "dq, dk, dv need dout");
  auto renamed = without("out");
  renamed.emplace("o", a.at("out"));
  require_usage_error(judged(renamed), "holds 'o', which judge does not read");
  auto wrong = a;
  wrong.at("lse").shape = {4, 2, 19};
  require_usage_error(judged(wrong), "lse has shape [4, 2, 19]; this problem's lse is [2, 4, 19]");
  auto flat = a;
  flat.at("q").shape = {2 * 4 * 19 * 16};
  require_usage_error(judged(flat), "judge expects 4 dimensions");
  require_usage_error(judged(a, " --contract causal=sideways"), "--contract: contract: 'causal=sideways'");
  require_usage_error(judged(a, " --dtype f8"), "--dtype f8: f32, f16 or bf16");
  require_usage_error(judged(a, " --dtype f16"), "which is not a f16 value");
  require_usage_error(run(cli_test::attncheck("judge --inputs " + dir / "missing.npz")), "cannot read");
  std::ofstream(dir / "text.npz") << "not a zip archive";
  require_usage_error(run(cli_test::attncheck("judge --inputs " + dir / "text.npz")), "as an .npz archive");
}

}  // namespace
}  // namespace attncheck
