// The counterexample corpus end to end: `check --corpus DIR` keeps every counterexample and replays it first in later
// runs, so that a bug one seed found is caught by a seed that misses it alone; once fixed, the corpus case passes and
// `corpus --prune` drops it. `corpus DIR` lists the entries; bad input is one clear line and exit 2; an empty corpus
// changes no report.
//
// The kernel is the corpus plugin's corpus_demo (corpus_plugin.cpp): the planted bug no_rescale, fixed under the same
// name when ATTNCHECK_CORPUS_DEMO=fixed.
#include "cli_support.h"

#include "attncheck/report_io.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace cli_test;

namespace {

constexpr int kExitPass = 0, kExitCounterexample = 1;
constexpr std::size_t kHashDigits = 32;

/// The attncheck command line with `args` (cli_test::attncheck: the bare name is the namespace's here too).
std::string cmd(const std::string &args) { return cli_test::attncheck(args); }

/// A plan of three accuracy cases in float32 under which seed 1 finds corpus_demo's bug and seed 2 misses it.
constexpr const char *kPlan = " --dtype f32 --properties accuracy --cases 3 --time-budget 600 --quiet --jobs 1";

std::string check_demo(int seed, const std::string &extra = "", bool fixed = false) {
  return std::string(fixed ? "ATTNCHECK_CORPUS_DEMO=fixed " : "") +
         cmd("check --plugin " CORPUS_PLUGIN " --kernel corpus_demo" + std::string(kPlan) + " --seed " +
                   std::to_string(seed) + extra);
}

/// The lines of `text`.
std::vector<std::string> lines(const std::string &text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

/// The entry files of a corpus directory.
std::vector<std::filesystem::path> entry_files(const std::string &dir) {
  std::vector<std::filesystem::path> out;
  for (const auto &e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".json") out.push_back(e.path());
  return out;
}

}  // namespace

TEST_CASE("a bug found with seed 1 is caught by seed 2 through the corpus, and once fixed it passes and prune drops it") {
  TempDir dir;
  const std::string corpus = dir / "corpus";
  // Seed 2 alone misses the bug under this plan, seed 1 finds it: the precondition of the whole story.
  const Run alone = run(check_demo(2));
  INFO(alone.out << alone.err);
  REQUIRE(alone.status == kExitPass);
  const Run found = run(check_demo(1, " --corpus " + corpus));
  INFO(found.out << found.err);
  REQUIRE(found.status == kExitCounterexample);
  REQUIRE(entry_files(corpus).size() == 1);

  // `corpus DIR` lists it: hash, kernel, dtype, property, verdict, shape.
  const Run listed = run(cmd("corpus " + corpus));
  REQUIRE(listed.status == kExitPass);
  const std::vector<std::string> entries = lines(listed.out);
  REQUIRE(entries.size() == 1);
  const std::string hash = entries[0].substr(0, kHashDigits);
  CHECK(entry_files(corpus)[0].filename().string() == hash + ".json");
  CHECK(entries[0].find("  corpus_demo  f32  accuracy  fail  B=") != std::string::npos);

  // Seed 2 with the corpus fails, with the recorded case, and every report says it came from the corpus.
  const std::string reports = dir / "reports";
  const Run caught = run(check_demo(2, " --corpus " + corpus + " --report-dir " + reports + " --junit " +
                                           dir / "junit.xml"));
  INFO(caught.out << caught.err);
  REQUIRE(caught.status == kExitCounterexample);
  CHECK(caught.out.find("from the corpus: entry " + hash) != std::string::npos);
  CHECK(caught.out.find("corpus of corpus_demo f32: 1 recorded case replayed first, 0 passed, 1 failed again") !=
        std::string::npos);
  const attncheck::reporting::Document doc = attncheck::reporting::read_report(reports + "/report.json", "");
  const attncheck::PropertyReport &accuracy = doc.runs.at(0).report.properties.at(0);
  REQUIRE(accuracy.counterexample);
  CHECK(accuracy.counterexample->corpus_entry == hash);
  CHECK(accuracy.corpus.replayed == 1);
  CHECK(accuracy.corpus.passed == 0);
  CHECK(slurp(reports + "/summary.md").find("from the corpus: entry `" + hash + "`") != std::string::npos);
  CHECK(slurp(reports + "/report.html").find("from the corpus: entry <code>" + hash) != std::string::npos);
  CHECK(slurp(dir / "junit.xml").find("message=\"from the corpus (entry " + hash + "): ") != std::string::npos);
  // The recorded case replays from the report too.
  CHECK(run(cmd("replay " + reports + "/report.json")).status == kExitCounterexample);
  REQUIRE(entry_files(corpus).size() == 1);  // the same case: the same file, nothing new

  // While the bug is there, prune keeps the entry.
  const Run kept = run(cmd("corpus " + corpus + " --prune --plugin " CORPUS_PLUGIN));
  INFO(kept.out << kept.err);
  REQUIRE(kept.status == kExitPass);
  CHECK(kept.out.find("kept     " + hash) != std::string::npos);
  CHECK(kept.out.find("1 dropped") == std::string::npos);
  REQUIRE(entry_files(corpus).size() == 1);

  // The fix: the same kernel name, now correct. The corpus case passes, and is counted as passed.
  const Run fixed = run(check_demo(2, " --corpus " + corpus + " --report-dir " + reports, /*fixed=*/true));
  INFO(fixed.out << fixed.err);
  REQUIRE(fixed.status == kExitPass);
  CHECK(fixed.out.find("corpus of corpus_demo f32: 1 recorded case replayed first, 1 passed, 0 failed again") !=
        std::string::npos);
  const attncheck::PropertyReport passed =
      attncheck::reporting::read_report(reports + "/report.json", "").runs.at(0).report.properties.at(0);
  CHECK(passed.verdict == attncheck::Verdict::pass);
  CHECK(passed.corpus.replayed == 1);
  CHECK(passed.corpus.passed == 1);

  // Prune on the fixed kernel drops it, and says so; the corpus is empty then.
  const Run pruned = run("ATTNCHECK_CORPUS_DEMO=fixed " +
                         cmd("corpus " + corpus + " --prune --plugin " CORPUS_PLUGIN " --kernel corpus_demo"));
  INFO(pruned.out << pruned.err);
  REQUIRE(pruned.status == kExitPass);
  CHECK(pruned.out.find("dropped  " + hash + "  corpus_demo  f32  accuracy") != std::string::npos);
  CHECK(pruned.out.find("1 dropped, 0 kept") != std::string::npos);
  CHECK(entry_files(corpus).empty());
  const Run empty = run(cmd("corpus " + corpus));
  CHECK(empty.status == kExitPass);
  CHECK(empty.out.empty());
}

TEST_CASE("corpus lists its entries one line each in hash order, and a run with --jobs replays them too") {
  TempDir dir;
  const std::string corpus = dir / "corpus";
  // Two bugs, two properties each: several entries.
  for (const char *kernel : {"bug:no_rescale", "bug:missing_scale"}) {
    const Run r = run(cmd("check --plugin " BUG_PLUGIN " --kernel " + std::string(kernel) +
                                " --dtype f32 --properties accuracy,lse --cases 15 --seed 1 --quiet --jobs 1 "
                                "--corpus " + corpus));
    INFO(r.out << r.err);
    REQUIRE(r.status == kExitCounterexample);
  }
  const Run listed = run(cmd("corpus " + corpus));
  REQUIRE(listed.status == kExitPass);
  const std::vector<std::string> entries = lines(listed.out);
  REQUIRE(entries.size() == entry_files(corpus).size());
  REQUIRE(entries.size() >= 3);
  for (std::size_t n = 1; n < entries.size(); ++n) CHECK(entries[n - 1] < entries[n]);
  for (const std::string &e : entries) {
    CHECK(e.find(" bug:") == kHashDigits + 1);
    CHECK(e.find("  f32  ") != std::string::npos);
  }

  // Workers replay the corpus as the serial run does: the same report.
  const std::string base = cmd("check --plugin " BUG_PLUGIN
                                     " --kernel bug:missing_scale --dtype f32 --properties accuracy,lse --cases 15 "
                                     "--seed 7 --quiet --corpus " + corpus);
  const Run serial = run(base + " --jobs 1 --report-dir " + dir / "serial");
  const Run parallel = run(base + " --jobs 2 --report-dir " + dir / "parallel");
  REQUIRE(serial.status == kExitCounterexample);
  REQUIRE(parallel.status == kExitCounterexample);
  const std::string json = report_content(dir / "serial/report.json");
  CHECK(json.find("\"corpus_entry\"") != std::string::npos);
  CHECK(report_content(dir / "parallel/report.json") == json);
}

TEST_CASE("an empty corpus changes no report") {
  for (const char *kernel : {"bug:no_rescale", "online_b1_f32acc"}) {
    INFO(kernel);
    TempDir dir;
    const std::string base = cmd("check --plugin " BUG_PLUGIN " --kernel " + std::string(kernel) +
                                       " --dtype f32 --properties accuracy,lse,sum_to_one --cases 15 --seed 3 "
                                       "--quiet --jobs 1");
    const Run plain = run(base + " --report-dir " + dir / "plain");
    std::filesystem::create_directory(dir / "empty");
    const Run with_empty = run(base + " --report-dir " + dir / "with" + " --corpus " + dir / "empty");
    REQUIRE(plain.status == with_empty.status);
    const std::string json = report_content(dir / "plain/report.json");
    REQUIRE(!json.empty());
    CHECK(report_content(dir / "with/report.json") == json);
    CHECK(json.find("\"corpus\"") == std::string::npos);
    CHECK(json.find("\"corpus_entry\"") == std::string::npos);
    CHECK(slurp(dir / "with/summary.md") == slurp(dir / "plain/summary.md"));
  }
}

TEST_CASE("a missing, unreadable or corrupt corpus is one clear line and exit 2") {
  TempDir dir;
  require_usage_error(run(cmd("corpus " + dir / "missing")), "corpus directory " + dir / "missing" +
                                                                       " does not exist");
  { std::ofstream(dir / "file") << "x"; }
  require_usage_error(run(cmd("corpus " + dir / "file")), "is not a directory");

  const std::string corpus = dir / "corpus";
  std::filesystem::create_directory(corpus);
  const std::string bad = corpus + "/" + std::string(kHashDigits, 'a') + ".json";
  { std::ofstream(bad) << "{\"format\": \"attncheck-corpus-entry\", \"version\": 1, \"kernel\": "; }
  require_usage_error(run(cmd("corpus " + corpus)), bad + ": corpus entry: truncated or malformed JSON");
  require_usage_error(run(cmd("check --plugin " BUG_PLUGIN " --kernel bug:no_rescale --dtype f32 "
                                    "--properties accuracy --cases 3 --quiet --corpus " + corpus)),
                      "--corpus: " + bad + ": corpus entry: truncated or malformed JSON");
  { std::ofstream(bad) << "{\"format\": \"attncheck-report\"}"; }
  require_usage_error(run(cmd("corpus " + corpus)), "not an attncheck corpus entry");

  // A real entry edited (its case no longer the one its hash names), or renamed.
  std::filesystem::remove(bad);
  REQUIRE(run(cmd("check --plugin " BUG_PLUGIN " --kernel bug:no_rescale --dtype f32 --properties accuracy "
                        "--cases 15 --seed 1 --quiet --jobs 1 --corpus " + corpus)).status == kExitCounterexample);
  const std::vector<std::filesystem::path> files = entry_files(corpus);
  REQUIRE(files.size() == 1);
  const std::string text = slurp(files[0].string());
  const std::string renamed = corpus + "/" + std::string(kHashDigits, 'b') + ".json";
  std::filesystem::rename(files[0], renamed);
  require_usage_error(run(cmd("corpus " + corpus)), "its name is not its content hash");
  std::string edited = text;
  const std::size_t at = edited.find("\"kernel\": \"bug:no_rescale\"");
  REQUIRE(at != std::string::npos);
  edited.replace(at, 26, "\"kernel\": \"bug:no_rescalf\"");
  { std::ofstream(files[0]) << edited; }
  std::filesystem::remove(renamed);
  require_usage_error(run(cmd("corpus " + corpus)), "is not the content hash of its case");

  // --prune needs a kernel source that loads, and the source options mean nothing without --prune.
  std::filesystem::remove(files[0]);
  require_usage_error(run(cmd("corpus " + corpus + " --plugin " BUG_PLUGIN)), "give --prune");
  require_usage_error(run(cmd("corpus " + corpus + " --prune --plugin " + dir / "nothing.so")), "nothing.so");
}
