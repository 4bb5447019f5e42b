// The gate judges a kernel against the contract it declares — through its plugin (attncheck_contracts), its exec
// hello, or --contract — and tells warnings (behaviour beyond the contract) from failures: exit 0 unless --strict.
#include "cli_support.h"

#include <fstream>
#include <string>

using namespace cli_test;

namespace {
constexpr int kExitPass = 0, kExitCounterexample = 1;
constexpr const char *kQuick = " --dtype f32 --profile quick --quiet";
/// A time budget no correct kernel reaches on a loaded machine: the verdict asserted depends on the kernel alone.
constexpr const char *kNeverBinds = " --time-budget 600";

std::string bug_check(const std::string &kernel, const std::string &properties, const std::string &extra = "") {
  return attncheck("check --plugin " BUG_PLUGIN " --kernel " + kernel + " --properties " + properties + kQuick +
                   extra);
}

std::string numpy_check(const std::string &kernel_args, const std::string &extra = "") {
  return attncheck("check --exec \"" NUMPY_PYTHON " " NUMPY_KERNEL " " + kernel_args + "\"" + kQuick + extra);
}
}  // namespace

TEST_CASE("a contract given with --contract is what the kernel is judged by: a top-left causal kernel passes when declared") {
  const Run undeclared = run(bug_check("bug:causal_top_left", "causal,accuracy"));
  INFO(undeclared.out << undeclared.err);
  CHECK(undeclared.status == kExitCounterexample);
  const Run declared = run(bug_check("bug:causal_top_left", "causal,accuracy", " --contract causal=top-left"));
  INFO(declared.out << declared.err);
  CHECK(declared.status == kExitPass);
  CHECK(declared.out.find("contract of bug:causal_top_left: causal=top-left") != std::string::npos);
}

TEST_CASE("a bad --contract is one line naming the token, exit 2") {
  require_usage_error(run(bug_check("bug:causal_top_left", "causal", " --contract causal=sideways")),
                      "--contract: contract: 'causal=sideways': causal is one of bottom-right|top-left");
  require_usage_error(run(bug_check("bug:causal_top_left", "causal", " --contract speed=fast")),
                      "unknown key 'speed'");
}

TEST_CASE("a warning exits 0 with its counterexample printed, and --strict makes it exit 1") {
  // A row reading a hidden key leaks a poisoned key's NaN: beyond the default contract (hidden-keys=finite).
  const Run warned = run(bug_check("bug:causal_off_by_one", "masked_nonfinite"));
  INFO(warned.out << warned.err);
  CHECK(warned.status == kExitPass);
  CHECK(warned.out.find("WARN") != std::string::npos);
  CHECK(warned.out.find("masked_nonfinite") != std::string::npos);
  const Run strict = run(bug_check("bug:causal_off_by_one", "masked_nonfinite", " --strict"));
  INFO(strict.out << strict.err);
  CHECK(strict.status == kExitCounterexample);
  // Declared as a promise, the same leak is a failure without --strict.
  const Run promised = run(bug_check("bug:causal_off_by_one", "masked_nonfinite", " --contract hidden-keys=any"));
  CHECK(promised.status == kExitCounterexample);
}

TEST_CASE("the bundled kernels declare bitwise determinism and isolation through attncheck_contracts, and the gate prints coverage") {
  const Run r = run(attncheck("check --plugin builtin --kernel flash --properties bitwise_determinism,masked_nonfinite" +
                              std::string(kQuick)));
  INFO(r.out << r.err);
  CHECK(r.status == kExitPass);
  CHECK(r.out.find("contract of flash: hidden-keys=any backward-determinism=bitwise grad-sum=exact") !=
        std::string::npos);
  CHECK(r.out.find("bitwise_determinism        off") != std::string::npos);
  // What the cases reached, counted and named (SPEC.md §7, Coverage).
  CHECK(r.out.find("coverage of flash f32: corners reached ") != std::string::npos);
  CHECK(r.out.find("not reached: ") != std::string::npos);  // 15 cases of one property reach few corners
  CHECK(r.out.find("masked_nonfinite           required") != std::string::npos);
}

TEST_CASE("an SDPA-style exec kernel (top-left causal, no LSE) passes every property by declaring its contract") {
  if (std::string(NUMPY_PYTHON).empty()) {
    WARN("no python3 with NumPy (ATTNCHECK_NUMPY_PYTHON): not run");
    return;
  }
  const Run r = run(numpy_check("--contract 'causal=top-left lse=none'", kNeverBinds));
  INFO(r.out << r.err);
  CHECK(r.status == kExitPass);
  CHECK(r.out.find("causal=top-left lse=none") != std::string::npos);
  // The same kernel without the declaration is a top-left bug under the default contract.
  const Run undeclared = run(numpy_check("--bug causal_top_left", " --properties causal"));
  CHECK(undeclared.status == kExitCounterexample);
}

TEST_CASE("each kind of warning exits 0 and fails the gate under --strict, on plugin kernels declaring their contract") {
  struct Warning {
    const char *kernel, *property;
  };
  // Kernels of the bug plugin that declare their contract through attncheck_contracts (ABI 1.1).
  for (const Warning w : {Warning{"online_b16_exp2_roundp_f32acc_densePV", "masked_nonfinite"},
                          Warning{"online_b16_exp2_roundp_f32acc_nondetBwd", "bitwise_determinism"},
                          Warning{"online_b16_exp2_roundp_f32acc_qkf16acc", "nonfinite_output"}}) {
    const Run r = run(bug_check(w.kernel, w.property));
    INFO(w.kernel << ": " << r.out << r.err);
    CHECK(r.status == kExitPass);
    CHECK(r.out.find(std::string("warning (beyond the declared contract)")) != std::string::npos);
    const Run strict = run(bug_check(w.kernel, w.property, " --strict"));
    CHECK(strict.status == kExitCounterexample);
  }
}

TEST_CASE("a plugin kernel's declared contract is what it is checked against, and --contract overrides it") {
  // The top-left variant declares causal=top-left: it passes causal as it is, and fails when overridden.
  const std::string kernel = "online_b16_exp2_roundp_f32acc_topleft";
  const Run declared = run(bug_check(kernel, "causal,accuracy"));
  INFO(declared.out << declared.err);
  CHECK(declared.status == kExitPass);
  CHECK(declared.out.find("contract of " + kernel + ": causal=top-left") != std::string::npos);
  CHECK(run(bug_check(kernel, "causal,accuracy", " --contract causal=bottom-right")).status == kExitCounterexample);
  CHECK(run(bug_check(kernel, "causal,accuracy", " --contract defaults")).status == kExitCounterexample);
}

TEST_CASE("replay --contract judges a recorded failure under another contract: a promise broken fails, the defaults warn") {
  const TempDir dir;
  const Run check = run(bug_check("bug:causal_off_by_one", "masked_nonfinite",
                                  " --contract hidden-keys=any --report-dir " + dir.path.string()));
  REQUIRE(check.status == kExitCounterexample);
  const std::string report = dir / "report.json";
  const Run failed = run(attncheck("replay " + report));
  INFO(failed.out << failed.err);
  CHECK(failed.status == kExitCounterexample);
  // Under the defaults (hidden-keys=finite) the same leak is beyond the contract: a warning, exit 0.
  const Run warned = run(attncheck("replay " + report + " --contract defaults"));
  INFO(warned.out << warned.err);
  CHECK(warned.status == kExitPass);
  CHECK(warned.out.find("judged under contract defaults\n") != std::string::npos);
  CHECK(warned.out.find("replayed: FAIL at step") != std::string::npos);
  CHECK(warned.out.find("(a warning: behaviour beyond the kernel's contract)") != std::string::npos);
  require_usage_error(run(attncheck("replay " + report + " --contract hidden-keys=some")), "--contract: contract:");
}

TEST_CASE("replay under a contract that turns the property off loads no kernel: a plugin gone is no error then") {
  const TempDir dir;
  const Run check = run(bug_check("bug:nan_fully_masked_rows", "empty_rows", " --report-dir " + dir.path.string()));
  REQUIRE(check.status == kExitCounterexample);
  // The report names a plugin that is no longer there.
  std::string json = slurp(dir / "report.json");
  for (std::size_t at = json.find(BUG_PLUGIN); at != std::string::npos; at = json.find(BUG_PLUGIN))
    json.replace(at, std::string(BUG_PLUGIN).size(), dir / "gone.so");
  const std::string moved = dir / "moved.json";
  std::ofstream(moved, std::ios::binary) << json;
  // Top-left alignment leaves no row without a key: empty_rows has nothing to check, and nothing is loaded.
  const Run off = run(attncheck("replay " + moved + " --contract causal=top-left"));
  INFO(off.out << off.err);
  CHECK(off.status == kExitPass);
  CHECK(off.out.find("not run: the contract given leaves empty_rows nothing to check: causal=top-left\n") !=
        std::string::npos);
  require_usage_error(run(attncheck("replay " + moved)), "gone.so");  // where it runs, the kernel is loaded
}
