// attncheck infer end to end on the bug plugin: a correct kernel of each declarable convention gets a contract that
// holds its declaration, and `attncheck check` under that very line passes with no warning but advisory ones; planted
// real bugs get "no contract value fits", with the property and the counterexample (exit 1); bad input is one line
// (exit 2). The plugin's convention kernels declare their contracts: infer starts from the defaults (--from
// defaults) and must find them.
#include "cli_support.h"

#include <algorithm>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using cli_test::run;

namespace {

const std::string kExe = ATTNCHECK_EXE;
const std::string kPlugin = BUG_PLUGIN;

/// Every property but long_rows (seconds per case on these scalar kernels, and no convention of its own),
/// overflow_robustness (its logits put float16 LSEs and q·k past any bound: undecided under lse=storage and
/// accumulate-qk=f16 whatever the contract) and the feature properties (off: these kernels declare none).
const std::string kProperties =
    "accuracy,lse,scale_parameter,sum_to_one,convex_hull,shift_invariance,permutation_equivariance,nonfinite_output,"
    "variance_normalization,gradient_accuracy,gradient_nonvanishing,gradient_identities,causal,masked_nonfinite,"
    "empty_rows,empty_sequences,slice_independence,padding_isolation,determinism,bitwise_determinism,"
    "input_integrity,call_history,batch_invariance";

/// The whitespace-separated tokens of `line`.
std::set<std::string> tokens(const std::string &line) {
  std::set<std::string> out;
  std::istringstream in(line);
  for (std::string t; in >> t;) out.insert(t);
  return out;
}

/// The text after `prefix` on the line of `text` that starts with it; "" when there is none.
std::string line_after(const std::string &text, const std::string &prefix) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
  return "";
}

struct Convention {
  std::string kernel;       ///< the bug plugin's kernel
  std::string dtype;        ///< where the convention differs from the defaults
  std::string declaration;  ///< what infer must find (the kernel's own declaration, or what the defaults allow)
  std::string plan;         ///< the plan's options
};

/// infer on `c`, then check under the line it printed (the same plan and seed). Returns infer's output.
std::string infer_and_check(const Convention &c) {
  const std::string common = " --plugin " + kPlugin + " --kernel " + c.kernel + " --dtype " + c.dtype + " " + c.plan +
                             " --quiet";
  const cli_test::Run inferred = run(kExe + " infer" + common);
  INFO("attncheck infer" << common << "\n" << inferred.out << inferred.err);
  REQUIRE(inferred.status == 0);
  const std::string line = line_after(inferred.out, "contract: ");
  REQUIRE(!line.empty());
  const std::set<std::string> found = tokens(line);
  for (const std::string &t : tokens(c.declaration)) CHECK(found.count(t) == 1);

  // The kernel under the printed contract: a pass, or warnings of advisory properties only.
  const cli_test::Run checked = run(kExe + " check" + common + " --jobs 1 --contract '" + line + "'");
  INFO("attncheck check --contract '" << line << "'\n" << checked.out << checked.err);
  CHECK(checked.status == 0);
  std::istringstream table(checked.out);
  int warnings = 0;
  for (std::string row; std::getline(table, row);) {
    if (row.rfind(c.kernel + " ", 0) != 0) continue;  // the table's lines start with the kernel
    CHECK(row.find("FAIL") == std::string::npos);
    CHECK(row.find("undecided ") == std::string::npos);
    if (row.find("WARN") != std::string::npos) {
      ++warnings;
      CHECK(row.find("advisory") != std::string::npos);
    }
  }
  // infer lists exactly the properties that warn.
  const std::string listed = line_after(inferred.out, "advisory warnings: ");
  CHECK((warnings == 0) == (listed == "none"));
  return inferred.out;
}

/// The quick plan, under a guard no check here reaches even on a loaded machine (verdicts must not depend on the load).
const std::string kQuick = "--profile quick --time-budget 600 --properties " + kProperties;

}  // namespace

TEST_CASE("infer finds the declaration of each convention kernel, and check passes under the line it prints") {
  const std::string base = "online_b16_exp2_roundp_f32acc_";
  const Convention conventions[] = {
      {base + "rowsumP", "f16", "rowsum=rounded-p", kQuick},
      {base + "topleft", "f32", "causal=top-left", kQuick},
      {base + "lseS", "f16", "lse=storage", kQuick},
      {base + "emptyMean", "f32", "empty-rows=unspecified", kQuick},
      // Its logits in float16 leave some LSE past any bound: 25 cases decide lse on ten.
      {base + "qkf16acc", "f32", "accumulate-qk=f16", kQuick + " --cases 25"},
  };
  for (const Convention &c : conventions) {
    const std::string out = infer_and_check(c);
    // Found by a failure the declaration explains, not taken from the kernel's own declaration.
    CHECK(out.find("explained by " + c.declaration) != std::string::npos);
  }
}

TEST_CASE("infer tells per-head GQA gradients from exact ones, which only the stronger probe can") {
  // grad-sum=auto allows per-head parts for float16: infer probes grad-sum=exact, whose failure (found after some
  // twenty GQA cases: the default plan) grad-sum=per-head explains.
  const std::string out = infer_and_check({"online_b16_exp2_roundp_f32acc_gradPerHead", "f16", "grad-sum=per-head",
                                           "--profile default --time-budget 600 --properties gradient_accuracy,gradient_identities"});
  CHECK(out.find("not confirmed: grad-sum=exact") != std::string::npos);
  // A kernel that sums before it stores is given grad-sum=exact by the same probe.
  const std::string exact = infer_and_check({"online_b16_exp2_roundp_f32acc_topleft", "f16", "grad-sum=exact",
                                             "--profile default --time-budget 600 --properties gradient_accuracy,gradient_identities"});
  CHECK(exact.find("stronger: grad-sum=exact") != std::string::npos);
}

TEST_CASE("infer promises bitwise determinism and hidden keys only where the advisory properties pass") {
  // An atomic-like dQ (its bits change from call to call): backward-determinism stays within-bound, and
  // bitwise_determinism is its advisory warning.
  const std::string nondet = infer_and_check({"online_b16_exp2_roundp_f32acc_nondetBwd", "f16", "", kQuick});
  CHECK(tokens(line_after(nondet, "contract: ")).count("backward-determinism=bitwise") == 0);
  CHECK(line_after(nondet, "advisory warnings: ").find("bitwise_determinism") != std::string::npos);
  // A dense P·V (NaN in masked keys leaks): hidden-keys stays finite, masked_nonfinite warns.
  const std::string dense = infer_and_check({"online_b16_exp2_roundp_f32acc_densePV", "f32", "", kQuick});
  CHECK(tokens(line_after(dense, "contract: ")).count("hidden-keys=any") == 0);
  CHECK(line_after(dense, "advisory warnings: ").find("masked_nonfinite") != std::string::npos);
  // A deterministic kernel that skips masked keys gets both promises.
  infer_and_check({"online_b16_exp2_roundp_f32acc_topleft", "f32",
                   "causal=top-left backward-determinism=bitwise hidden-keys=any", kQuick});
}

TEST_CASE("infer says no contract value fits a planted bug, naming the property and the counterexample") {
  const std::pair<const char *, const char *> bugs[] = {
      {"bug:no_rescale", "f32"},
      {"bug:drop_last_partial_block", "f32"},
      {"bug:causal_off_by_one", "f32"},
      {"bug:missing_scale", "f16"},
  };
  for (const auto &[kernel, dtype] : bugs) {
    const cli_test::Run r = run(kExe + " infer --plugin " + kPlugin + " --kernel " + kernel + " --dtype " + dtype +
                                " --quiet " + kQuick);
    INFO(kernel << "\n" << r.out << r.err);
    CHECK(r.status == 1);
    const std::string why = line_after(r.out, "no contract value fits: ");
    REQUIRE(!why.empty());
    CHECK(why.find("that is a bug") != std::string::npos);
    // Named: a property of the run, and the counterexample's case and element.
    const std::string property = why.substr(0, why.find(' '));
    CHECK(kProperties.find(property) != std::string::npos);
    const std::string cx = line_after(r.out, "  counterexample: ");
    CHECK(cx.rfind(property + " — " + dtype + " B=", 0) == 0);
    CHECK(cx.find("got ") != std::string::npos);
    CHECK(!line_after(r.out, "contract (best found): ").empty());
  }
}

TEST_CASE("infer keeps no declaration that a bug's minimal case agreed with but the kernel does not follow") {
  // A window edge off by one: the feature kernel declares every feature; whatever explained a minimal case of its
  // failures (empty-rows=unspecified, as the diagnosis finds today), the best contract keeps only the features.
  const cli_test::Run r = run(kExe + " infer --plugin " + kPlugin + " --kernel features_window_right_off_by_one " +
                              "--dtype f32 --quiet --profile quick --time-budget 600 " +
                              "--properties accuracy,window,softcap,alibi,sinks,attn_mask");
  INFO(r.out << r.err);
  CHECK(r.status == 1);
  CHECK(line_after(r.out, "no contract value fits: ").rfind("window (f32)", 0) == 0);
  CHECK(line_after(r.out, "contract (best found): ") == "features=window+softcap+alibi+sinks+mask+varlen+paged+dropout+fp8");
}

TEST_CASE("infer on an SDPA-style exec kernel: no LSE output (kept from its hello), top-left causal (found)") {
  if (std::string(NUMPY_PYTHON).empty()) {
    WARN("no python3 with NumPy (ATTNCHECK_NUMPY_PYTHON): not run");
    return;
  }
  const std::string exec = std::string("--exec \"") + NUMPY_PYTHON + " " + NUMPY_KERNEL +
                           " --contract 'causal=top-left lse=none'\" --kernel numpy --dtype f32 --quiet " +
                           "--profile quick --time-budget 600 --properties accuracy,lse,sum_to_one,causal,"
                           "masked_nonfinite,bitwise_determinism,gradient_accuracy";
  const cli_test::Run inferred = run(kExe + " infer " + exec);
  INFO(inferred.out << inferred.err);
  REQUIRE(inferred.status == 0);
  const std::string line = line_after(inferred.out, "contract: ");
  const std::set<std::string> found = tokens(line);
  CHECK(found.count("lse=none") == 1);
  CHECK(found.count("causal=top-left") == 1);
  CHECK(inferred.out.find("explained by causal=top-left") != std::string::npos);
  // Its dense softmax lets NaN in masked keys through: hidden-keys stays finite, masked_nonfinite warns.
  CHECK(found.count("hidden-keys=any") == 0);
  const cli_test::Run checked = run(kExe + " check --jobs 1 " + exec + " --contract '" + line + "'");
  INFO(checked.out << checked.err);
  CHECK(checked.status == 0);
  CHECK(checked.out.find("FAIL") == std::string::npos);
}

TEST_CASE("infer is deterministic for a seed, and --json carries the same contract") {
  const std::string args = " infer --plugin " + kPlugin + " --kernel online_b16_exp2_roundp_f32acc_topleft " +
                           "--dtype f32 --quiet --profile quick --properties accuracy,causal,bitwise_determinism";
  auto without_times = [](std::string s) {  // each check's wall time, "[1.2 s]"
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '[') {
        const std::size_t end = s.find(" s]", i);
        if (end != std::string::npos) { i = end + 2; continue; }
      }
      out += s[i];
    }
    return out;
  };
  const cli_test::Run a = run(kExe + args), b = run(kExe + args);
  REQUIRE(a.status == 0);
  CHECK(without_times(a.out) == without_times(b.out));
  const cli_test::Run j = run(kExe + args + " --json");
  INFO(j.out << j.err);
  REQUIRE(j.status == 0);
  CHECK(j.out.find("\"outcome\": \"found\"") != std::string::npos);
  CHECK(j.out.find("\"contract\": \"" + line_after(a.out, "contract: ") + "\"") != std::string::npos);
}

TEST_CASE("infer leaves out a dtype whose every case the kernel declined, with the evidence, and check then skips it") {
  // naive implements float32 only; told it takes every dtype, it declines each float16 case.
  const std::string common = " --plugin builtin --kernel naive --dtype f32 --dtype f16 --profile quick "
                             "--properties accuracy,causal --quiet";
  const cli_test::Run r = run(kExe + " infer" + common + " --contract dtypes=f32+f16+bf16 --json");
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("\"declaration\": \"dtypes=f32+bf16\"") != std::string::npos);
  CHECK(r.out.find("\"evidence\": \"the kernel declined all ") != std::string::npos);
  CHECK(r.out.find("cases of f16\"") != std::string::npos);
  const cli_test::Run text = run(kExe + " infer" + common + " --contract dtypes=f32+f16+bf16");
  const std::string line = line_after(text.out, "contract: ");
  CHECK(tokens(line).count("dtypes=f32+bf16") == 1);
  CHECK_THAT(text.out, Catch::Contains("  declined: dtypes=f32+bf16 (the kernel declined all "));
  const cli_test::Run checked = run(kExe + " check" + common + " --contract '" + line + "'");
  INFO(checked.out << checked.err);
  CHECK(checked.status == 0);
  CHECK_THAT(checked.out, Catch::Contains("off: the kernel's contract declares dtypes=f32+bf16, nothing was called"));
  // A kernel that declines every dtype it is given is undecided, not narrowed to nothing.
  const cli_test::Run none = run(kExe + " infer --plugin builtin --kernel naive --dtype f16 --profile quick "
                                 "--properties accuracy --quiet --contract dtypes=f32+f16+bf16 --json");
  CHECK(none.status == 3);
  CHECK(none.out.find("\"declined_dtypes\": null") != std::string::npos);
}

TEST_CASE("infer: bad input is one line and exit 2") {
  const std::string plugin = " --plugin " + kPlugin;
  const std::string cases[] = {
      kExe + " infer" + plugin + " --kernel no_such_kernel",
      kExe + " infer" + plugin,  // no --kernel
      kExe + " infer" + plugin + " --kernel bug:no_rescale --profile fast",
      kExe + " infer" + plugin + " --kernel bug:no_rescale --properties no_such_property",
      kExe + " infer" + plugin + " --kernel bug:no_rescale --contract causal=sideways",
      kExe + " infer" + plugin + " --kernel bug:no_rescale --from nowhere",
      kExe + " infer --plugin /no/such/plugin.so --kernel k",
  };
  for (const std::string &cmd : cases) {
    const cli_test::Run r = run(cmd);
    INFO(cmd << "\n" << r.out << r.err);
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.err.rfind("attncheck: ", 0) == 0);
  }
}
