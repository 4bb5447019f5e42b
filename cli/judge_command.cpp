// attncheck judge: tensors a kernel already returned, saved by a user's test (numpy.savez: q, k, v, out, and lse,
// dout, dq, dk, dv where there are), held element by element against the exact values under the contract the kernel
// declares — the verdict, text and exit codes of Python's attncheck.judge, for users outside Python.
#include "commands.h"

#include "attncheck/judge.h"
#include "attncheck/report_io.h"
#include "npz.h"

#include <fmt/core.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>

namespace attncheck::cli {

namespace {

struct JudgeArgs {
  std::string inputs, contract, layout = "bhld", dtype, report_dir;
  std::optional<double> scale;
  bool causal = false, strict = false, quiet = false;
};

/// The arrays judge reads, and their rank.
constexpr std::pair<const char *, int> kArrays[] = {{"q", 4},  {"k", 4},  {"v", 4},  {"out", 4}, {"lse", 3},
                                                    {"dout", 4}, {"dq", 4}, {"dk", 4}, {"dv", 4}};

/// The storage dtype of an array's descr (npz.h reads float32, float16 and bfloat16 bits).
Dtype dtype_of(const npy::Array &a, const std::string &where) {
  for (Dtype dt : {Dtype::f32, Dtype::f16, Dtype::bf16})
    if (a.descr == npy::descr_of(dt)) return dt;
  throw npy::NpyError(where + " has dtype descr '" + a.descr + "': judge reads float32, float16 or bfloat16");
}

/// Array `name` as the judge's logical tensor: [B, H, L, D] (from [B, L, H, D] under layout blhd: a tensor of that
/// layout stores its elements in the file's order), in its own dtype or in `as` when its values are that dtype's
/// (float32 files holding bfloat16 values, as torch saves them).
Tensor tensor_of(const npy::Array &a, const std::string &where, int rank, bool blhd, std::optional<Dtype> as) {
  if (static_cast<int>(a.shape.size()) != rank)
    throw npy::NpyError(where + " has shape " + a.shape_text() + "; judge expects " + std::to_string(rank) +
                        " dimensions (" + (rank == 3 ? "[B, H, L]" : blhd ? "[B, L, H, D]" : "[B, H, L, D]") + ")");
  const Dtype dt = dtype_of(a, where);
  const bool moved = rank == 4 && blhd;
  const std::vector<std::int64_t> shape =
      moved ? std::vector<std::int64_t>{a.shape[0], a.shape[2], a.shape[1], a.shape[3]} : a.shape;
  Tensor t = moved ? Tensor::with_layout(dt, shape, Layout::blhd) : Tensor::contiguous(dt, shape);
  if (!a.data.empty()) std::memcpy(t.bytes().data(), a.data.data(), a.data.size());
  if (!as || *as == dt) return t;
  const std::vector<double> values = t.to_vector();
  for (std::size_t x = 0; x < values.size(); ++x)
    if (round_to(*as, values[x]) != values[x] && !std::isnan(values[x]))
      throw npy::NpyError(fmt::format("{} holds {} at element {}, which is not a {} value: --dtype names the dtype "
                                      "the kernel stored its tensors in",
                                      where, values[x], x, dtype_name(*as)));
  Tensor narrowed = Tensor::contiguous(*as, shape);
  narrowed.assign(values);
  return narrowed;
}

/// The narrower storage dtypes every value of the float32 `tensors` belongs to ("f16 or bf16", "bf16", …; "" for none):
/// a kernel's bfloat16 results saved through float32 (torch's .float().numpy()) judged as a float32 kernel's fail.
std::string narrower_dtypes(std::initializer_list<const Tensor *> tensors) {
  std::string fit;
  for (Dtype dt : {Dtype::f16, Dtype::bf16}) {
    bool all = true;
    for (const Tensor *t : tensors) {
      if (t->dtype() != Dtype::f32) return "";
      for (double x : t->to_vector())
        if (round_to(dt, x) != x && !std::isnan(x)) {
          all = false;
          break;
        }
      if (!all) break;
    }
    if (all) fit += (fit.empty() ? "" : " or ") + std::string(dtype_name(dt));
  }
  return fit;
}

int run_judge(const JudgeArgs &a) {
  gate::JudgeRequest rq;
  try {
    std::optional<Dtype> as;
    if (!a.dtype.empty()) {
      if (a.dtype != "f32" && a.dtype != "f16" && a.dtype != "bf16")
        return usage_error("--dtype " + a.dtype + ": f32, f16 or bf16");
      as = parse_dtype(a.dtype);
    }
    std::map<std::string, npy::Array> arrays = read_npz(a.inputs);
    std::map<std::string, Tensor> tensors;
    for (const auto &[name, rank] : kArrays) {
      const auto it = arrays.find(name);
      if (it == arrays.end()) continue;
      // The LSE may stay float32 whatever the storage dtype: only the 4-D tensors take --dtype.
      tensors.emplace(name, tensor_of(it->second, a.inputs + ":" + name, rank, a.layout == "blhd",
                                      rank == 4 ? as : std::nullopt));
      arrays.erase(it);
    }
    if (!arrays.empty())
      return usage_error(a.inputs + " holds '" + arrays.begin()->first +
                         "', which judge does not read: name the arrays q, k, v, out, lse, dout, dq, dk, dv");
    for (const char *needed : {"q", "k", "v", "out"})
      if (!tensors.contains(needed))
        return usage_error(a.inputs + " has no array '" + needed + "': save q, k, v and the kernel's out (numpy.savez)");
    const auto take = [&](const char *name) -> std::optional<Tensor> {
      const auto it = tensors.find(name);
      return it == tensors.end() ? std::nullopt : std::optional<Tensor>(std::move(it->second));
    };
    rq.q = *take("q"), rq.k = *take("k"), rq.v = *take("v"), rq.dout = take("dout");
    rq.given = {take("out"), take("lse"), take("dq"), take("dk"), take("dv")};
  } catch (const npy::NpyError &e) {
    return usage_error(e.what());
  }
  rq.scale = a.scale, rq.causal = a.causal, rq.contract = a.contract, rq.progress = !a.quiet;
  try {
    const Judgment j = gate::judge(rq);
    if (!a.quiet) fmt::print("{}", reporting::judgment_text(j));
    if (!a.report_dir.empty()) {
      const std::string inputs = std::filesystem::absolute(a.inputs).lexically_normal().string();
      try {
        reporting::write_judgment(j, {inputs, gate::judge_replay(j, inputs, a.layout)}, a.report_dir);
      } catch (const std::runtime_error &e) {
        return usage_error(std::string("--report-dir: ") + e.what());
      }
      if (!a.quiet) fmt::print(stderr, "reports written to {}/ (report.json, summary.md, report.html)\n", a.report_dir);
    }
    if (j.verdict() == Verdict::fail && a.dtype.empty())
      if (const std::string fit = narrower_dtypes({&rq.q, &rq.k, &rq.v, &*rq.given.out}); !fit.empty())
        fmt::print(stderr, "attncheck: every value of q, k, v and out is a {0} value: if the kernel stored {0}, give "
                           "--dtype {0}\n",
                   fit);
    return gate::judge_exit_code(j, a.strict);
  } catch (const gate::RunError &e) {
    return run_error(e);
  }
}

}  // namespace

void register_judge_command(CLI::App &app, Action &action) {
  auto args = std::make_shared<JudgeArgs>();
  CLI::App *cmd = app.add_subcommand(
      "judge",
      "Judge the tensors a kernel already returned, element by element, against the exact values within the bounds "
      "a correct kernel of their dtype meets under its contract (the ladders of accuracy and gradient_accuracy): "
      "each tensor's worst element and how many exceed their bound, and the declarations that would explain a "
      "failure.\nExit codes: 0 pass, 1 a tensor out of bound, 2 usage error, 3 the model could not decide.");
  cmd->add_option("--inputs", args->inputs,
                   "An .npz (numpy.savez) holding q, k, v, out and optionally lse, dout, dq, dk, dv: float32, float16 "
                   "or bfloat16 (ml_dtypes, or its uint16 bits)")
      ->required();
  cmd->add_option("--contract", args->contract, "What the kernel declares (spec/SPEC.md §3.1), e.g. causal=top-left");
  cmd->add_flag("--causal", args->causal, "The kernel was called with the causal mask (aligned as the contract says)");
  cmd->add_option("--scale", args->scale, "The kernel's scale (default 1/sqrt(D))");
  cmd->add_option("--layout", args->layout, "bhld: [B, H, L, D] (torch SDPA); blhd: [B, L, H, D] (FlashAttention)")
      ->check(CLI::IsMember({"bhld", "blhd"}));
  cmd->add_option("--dtype", args->dtype,
                  "The kernel's storage dtype when the file holds its values in a wider one (f32, f16, bf16)");
  cmd->add_option("--report-dir", args->report_dir,
                  "Write the judgment to report.json, summary.md and report.html there, with the command that judges "
                  "these inputs again");
  cmd->add_flag("--strict", args->strict, "A warning (an advisory gradient check) fails too");
  cmd->add_flag("--quiet", args->quiet, "Print nothing but errors");
  cmd->callback([args, &action] { action = [args] { return run_judge(*args); }; });
}

}  // namespace attncheck::cli
