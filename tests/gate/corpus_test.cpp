// The counterexample corpus in the gate and the engine (gate/include/attncheck/corpus.h, CheckOptions::corpus):
// entries stored by content hash, deterministic and round-tripping; corpus cases replayed before the search, a failing
// one the property's counterexample, a passing one counted without changing the search that follows; prune. The
// commands end to end are in tests/cli/cli_corpus_test.cpp and tests/python/test_corpus.py.
#include "attncheck/check.h"
#include "attncheck/corpus.h"
#include "variant_kernels.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace attncheck {
namespace {

namespace fs = std::filesystem;

const attncheck_kernel &no_rescale() { return support::variant_kernel(support::bug_variant(support::Bug::no_rescale)); }
const attncheck_kernel &correct() { return support::variant_kernel(support::correct_variants().front()); }

/// A fresh directory, removed at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    char name[] = "/tmp/attncheck-corpus-test-XXXXXX";
    REQUIRE(mkdtemp(name) != nullptr);
    path = name;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
};

std::string slurp(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

CheckOptions plan(std::uint64_t seed, int cases) {
  CheckOptions o;
  o.properties = {"accuracy", "sum_to_one"};  // both fail on no_rescale
  o.cases = cases;
  o.seed = seed;
  return o;
}

/// `kernel` checked under `o`, as one run of a document.
reporting::Document checked(const attncheck_kernel &kernel, const CheckOptions &o) {
  reporting::Run run;
  run.source.kind = reporting::KernelSource::Kind::plugin;
  run.plan = "default";
  run.report = check(kernel, o);
  reporting::Document doc;
  doc.runs.push_back(std::move(run));
  return doc;
}

}  // namespace

TEST_CASE("the corpus stores each counterexample once, by the content hash of its case, the same bytes every time") {
  const reporting::Document doc = checked(no_rescale(), plan(1, 40));
  REQUIRE(doc.failures().size() == 2);
  TempDir a, b;
  const std::vector<std::string> added = gate::store_corpus(doc, a.path);
  REQUIRE(added.size() == 2);
  CHECK(gate::store_corpus(doc, b.path) == added);
  CHECK(gate::store_corpus(doc, a.path).empty());  // already there: kept as they are
  for (const std::string &h : added) {
    CHECK(h.size() == 32);
    CHECK(slurp(a.path / (h + ".json")) == slurp(b.path / (h + ".json")));
  }
  // Temporaries of a write in progress and other files are not entries.
  std::ofstream(a.path / ".x.json.123.0.tmp") << "{";
  std::ofstream(a.path / "README.txt") << "notes";
  const gate::Corpus corpus = gate::read_corpus(a.path);
  REQUIRE(corpus.entries.size() == 2);
  CHECK(corpus.entries[0].hash < corpus.entries[1].hash);
  for (const reporting::CorpusEntry &e : corpus.entries) {
    CHECK(reporting::to_corpus_json(e) == slurp(a.path / (e.hash + ".json")));  // round trip
    CHECK(e.kernel == no_rescale().name);
    CHECK(e.dtype == Dtype::f32);
    CHECK(e.verdict == Verdict::fail);
    const PropertyReport &p = *doc.runs[0].report.find(e.property);
    CHECK(e.minimal.same_as(p.counterexample->minimal));
    CHECK(e.hash == reporting::corpus_hash(e.kernel, e.dtype, e.property, p.counterexample->minimal));
  }
  // Only the entries of the kernel and dtype asked for are replayed, in hash order.
  const std::vector<CorpusCase> cases = gate::corpus_cases(corpus, no_rescale().name, Dtype::f32);
  REQUIRE(cases.size() == 2);
  CHECK(cases[0].hash == corpus.entries[0].hash);
  CHECK(gate::corpus_cases(corpus, "another kernel", Dtype::f32).empty());
  CHECK(gate::corpus_cases(corpus, no_rescale().name, Dtype::f16).empty());
}

TEST_CASE("corpus cases replay before the search: a failing one is the counterexample, passing ones leave the search "
          "as it was") {
  TempDir dir;
  gate::store_corpus(checked(no_rescale(), plan(1, 40)), dir.path);
  const gate::Corpus corpus = gate::read_corpus(dir.path);
  CheckOptions o = plan(2, 5);
  o.corpus = gate::corpus_cases(corpus, no_rescale().name, Dtype::f32);
  REQUIRE(o.corpus.size() == 2);

  const RunReport failing = check(no_rescale(), o);
  for (const PropertyReport &p : failing.properties) {
    INFO(p.id);
    REQUIRE(p.counterexample);
    CHECK(p.counterexample->from_corpus());
    CHECK(p.corpus == CorpusReplay{.replayed = 1, .passed = 0});
    CHECK(p.cases == 0);  // the search did not run
    const CorpusCase &cc = *std::find_if(o.corpus.begin(), o.corpus.end(),
                                         [&](const CorpusCase &c) { return c.hash == p.counterexample->corpus_entry; });
    CHECK(cc.property == p.id);
    CHECK(p.counterexample->minimal.same_as(cc.minimal));
  }

  // On a correct kernel the corpus cases pass, are counted, and the search is the one a run without them makes.
  const RunReport passing = check(correct(), o);
  CheckOptions without = o;
  without.corpus.clear();
  const RunReport plain = check(correct(), without);
  REQUIRE(passing.properties.size() == plain.properties.size());
  for (std::size_t n = 0; n < plain.properties.size(); ++n) {
    const PropertyReport &p = passing.properties[n], &q = plain.properties[n];
    INFO(p.id);
    CHECK(p.verdict == Verdict::pass);
    CHECK(p.corpus == CorpusReplay{.replayed = 1, .passed = 1});
    CHECK(q.corpus == CorpusReplay{});
    CHECK(p.cases == q.cases);
    CHECK(p.worst_ratio == q.worst_ratio);
    CHECK(p.worst == q.worst);
    CHECK(p.coverage.decided == q.coverage.decided);
    CHECK(p.targeted == q.targeted);
    const std::string replayed = "corpus: 1 recorded case replayed first, 1 passed";
    CHECK(p.note == (q.note.empty() ? replayed : q.note + "; " + replayed));
  }
}

TEST_CASE("prune drops the entries that pass now and keeps the others, saying why") {
  TempDir dir;
  gate::store_corpus(checked(no_rescale(), plan(1, 40)), dir.path);
  const gate::Corpus corpus = gate::read_corpus(dir.path);
  const auto none = [](const std::string &) -> const attncheck_kernel * { return nullptr; };
  const auto still_buggy = [](const std::string &) -> const attncheck_kernel * { return &no_rescale(); };
  const auto fixed = [](const std::string &) -> const attncheck_kernel * { return &correct(); };

  for (const gate::Pruned &p : gate::prune_corpus(corpus, none, "")) {
    CHECK(!p.dropped);
    CHECK(p.why == "the source has no kernel " + std::string(no_rescale().name));
  }
  for (const gate::Pruned &p : gate::prune_corpus(corpus, still_buggy, "")) {
    CHECK(!p.dropped);
    CHECK(p.why.starts_with("fail: "));
    CHECK(gate::pruned_line(p).starts_with("kept     " + p.entry.hash + "  "));
  }
  CHECK(gate::prune_corpus(corpus, fixed, "another kernel").empty());  // --kernel: only that kernel's entries
  CHECK(gate::read_corpus(dir.path).entries.size() == 2);
  const std::vector<gate::Pruned> dropped = gate::prune_corpus(corpus, fixed, no_rescale().name);
  REQUIRE(dropped.size() == 2);
  for (const gate::Pruned &p : dropped) {
    CHECK(p.dropped);
    CHECK(gate::pruned_line(p) == "dropped  " + gate::corpus_line(p.entry) + "  (passes now)");
  }
  CHECK(gate::read_corpus(dir.path).entries.empty());
}

TEST_CASE("a corpus the gate cannot read is one line naming it") {
  TempDir dir;
  CHECK_THROWS_WITH(gate::read_corpus(dir.path / "missing"), Catch::Contains("does not exist"));
  CHECK_THROWS_WITH(gate::read_corpus(dir.path / "missing"), !Catch::Contains("\n"));
  std::ofstream(dir.path / "not-a-hash.json") << "{}";
  CHECK_THROWS_WITH(gate::read_corpus(dir.path), Catch::Contains("its name is not a content hash"));
  fs::remove(dir.path / "not-a-hash.json");
  std::ofstream(dir.path / (std::string(32, 'c') + ".json")) << "[1, 2";
  CHECK_THROWS_WITH(gate::read_corpus(dir.path), Catch::Contains("corpus entry: truncated or malformed JSON"));
  // open_corpus creates a missing directory (a first run has no corpus yet).
  CHECK(gate::open_corpus(dir.path / "new").entries.empty());
  CHECK(fs::is_directory(dir.path / "new"));
}

}  // namespace attncheck
