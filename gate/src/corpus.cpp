#include "attncheck/corpus.h"

#include "attncheck/check.h"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>

namespace attncheck::gate {

namespace fs = std::filesystem;

namespace {

/// Hex digits of a corpus hash (reporting::corpus_hash).
constexpr std::size_t kHashDigits = 32;

bool is_hash(std::string_view s) {
  return s.size() == kHashDigits &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

/// The whole file, or CorpusError naming it.
std::string read_text(const fs::path &file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw CorpusError("corpus entry " + file.string() + " cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw CorpusError("corpus entry " + file.string() + " cannot be read");
  return text.str();
}

/// Temporary files of this process's writes get distinct names (pid, then a counter): concurrent writers never share
/// one.
std::atomic<unsigned> g_temporaries{0};

/// Writes `text` to `dir`/`name` through a temporary file renamed over it.
void write_atomically(const fs::path &dir, const std::string &name, const std::string &text) {
  const fs::path tmp = dir / fmt::format(".{}.{}.{}.tmp", name, getpid(), g_temporaries.fetch_add(1));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) {
      std::error_code ignored;
      fs::remove(tmp, ignored);
      throw CorpusError("corpus directory " + dir.string() + " cannot be written (" + tmp.filename().string() + ")");
    }
  }
  std::error_code ec;
  fs::rename(tmp, dir / name, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw CorpusError("corpus directory " + dir.string() + ": cannot rename a new entry into place: " + ec.message());
  }
}

}  // namespace

Corpus read_corpus(const fs::path &dir) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (ec || !fs::exists(st)) throw CorpusError("corpus directory " + dir.string() + " does not exist");
  if (!fs::is_directory(st)) throw CorpusError("corpus directory " + dir.string() + " is not a directory");
  Corpus corpus{dir, {}};
  fs::directory_iterator it(dir, ec), end;
  if (ec) throw CorpusError("corpus directory " + dir.string() + " cannot be read: " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) break;
    const std::string name = it->path().filename().string();
    if (name.starts_with(".") || !name.ends_with(kCorpusSuffix)) continue;  // temporaries and other files
    const std::string stem = name.substr(0, name.size() - kCorpusSuffix.size());
    if (!is_hash(stem))
      throw CorpusError("corpus entry " + it->path().string() + ": its name is not a content hash (" +
                        std::to_string(kHashDigits) + " hex digits)");
    reporting::CorpusEntry e;
    try {
      e = reporting::corpus_entry_from_json(read_text(it->path()));
    } catch (const reporting::ReportError &err) {
      throw CorpusError(it->path().string() + ": " + err.what());
    }
    if (e.hash != stem)
      throw CorpusError("corpus entry " + it->path().string() + ": its name is not its content hash (" + e.hash + ")");
    corpus.entries.push_back(std::move(e));
  }
  if (ec) throw CorpusError("corpus directory " + dir.string() + " cannot be read: " + ec.message());
  std::sort(corpus.entries.begin(), corpus.entries.end(),
            [](const reporting::CorpusEntry &a, const reporting::CorpusEntry &b) { return a.hash < b.hash; });
  return corpus;
}

Corpus open_corpus(const fs::path &dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    fs::create_directories(dir, ec);
    if (ec) throw CorpusError("corpus directory " + dir.string() + " cannot be created: " + ec.message());
  }
  return read_corpus(dir);
}

std::vector<CorpusCase> corpus_cases(const Corpus &corpus, std::string_view kernel, Dtype dtype) {
  std::vector<CorpusCase> out;
  for (const reporting::CorpusEntry &e : corpus.entries)
    if (e.kernel == kernel && e.dtype == dtype) out.push_back({e.hash, e.property, e.minimal, e.reproduce});
  return out;
}

reporting::CorpusEntry corpus_entry(const reporting::Run &run, const PropertyReport &p) {
  const Counterexample &cx = *p.counterexample;
  reporting::CorpusEntry e;
  e.kernel = run.report.kernel;
  e.dtype = run.report.dtype;
  e.property = p.id;
  e.verdict = p.verdict;
  e.tier = p.tier;
  e.contract = run.report.contract;
  e.source = run.source;
  e.seed = cx.seed;
  e.reproduce = cx.reproduce;
  e.outcome = cx.outcome;
  e.outcome.failing_case.reset();  // the entry is the minimal case; a property derives its modified copy again
  e.minimal = cx.minimal;
  e.hash = reporting::corpus_hash(e.kernel, e.dtype, e.property, e.minimal);
  return e;
}

std::vector<std::string> store_corpus(const reporting::Document &doc, const fs::path &dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec))
    throw CorpusError("corpus directory " + dir.string() + " cannot be created" + (ec ? ": " + ec.message() : ""));
  std::vector<std::string> added;
  std::set<std::string> seen;
  for (const reporting::Run &run : doc.runs)
    for (const PropertyReport &p : run.report.properties) {
      if (!p.counterexample) continue;
      const reporting::CorpusEntry e = corpus_entry(run, p);
      const std::string name = e.hash + std::string(kCorpusSuffix);
      if (!seen.insert(e.hash).second || fs::exists(dir / name, ec)) continue;  // kept as it is
      write_atomically(dir, name, reporting::to_corpus_json(e));
      added.push_back(e.hash);
    }
  return added;
}

std::string corpus_line(const reporting::CorpusEntry &e) {
  return fmt::format("{}  {}  {}  {}  {}  {}", e.hash, e.kernel, dtype_name(e.dtype), e.property,
                     verdict_id(e.verdict), e.minimal.spec.shape.describe());
}

ReplayResult replay_entry(const reporting::CorpusEntry &e, const attncheck_kernel &kernel) {
  if (!find_property_info(e.property))
    throw CorpusError("corpus entry " + e.hash + " names property '" + e.property +
                      "', which this attncheck does not have");
  ReplayResult result;
  result.contract = e.contract;
  result.tier = property_tier(e.property, e.contract, e.dtype);
  if (result.tier == Tier::off) {
    result.outcome.verdict = Verdict::undecided;
    result.outcome.detail = "the entry's contract leaves " + e.property + " nothing to check";
    return result;
  }
  result.outcome = evaluate(e.property, kernel, e.minimal, e.contract, e.contract.precision(e.dtype));
  return result;
}

void remove_entry(const Corpus &corpus, const reporting::CorpusEntry &e) {
  std::error_code ec;
  const fs::path file = corpus.dir / (e.hash + std::string(kCorpusSuffix));
  if (!fs::remove(file, ec) || ec)
    throw CorpusError("corpus entry " + file.string() + " cannot be removed" + (ec ? ": " + ec.message() : ""));
}

std::vector<Pruned> prune_corpus(const Corpus &corpus,
                                 const std::function<const attncheck_kernel *(const std::string &)> &find,
                                 const std::string &only) {
  std::vector<Pruned> out;
  for (const reporting::CorpusEntry &e : corpus.entries) {
    if (!only.empty() && e.kernel != only) continue;
    Pruned p{e, false, {}};
    if (const attncheck_kernel *kernel = find(e.kernel); !kernel) {
      p.why = "the source has no kernel " + e.kernel;
    } else {
      const ReplayResult r = replay_entry(e, *kernel);
      p.dropped = r.tier != Tier::off && r.verdict() == Verdict::pass;
      if (p.dropped) {
        remove_entry(corpus, e);
        p.why = "passes now";
      } else {
        p.why = (r.tier == Tier::off ? std::string("not run") : std::string(verdict_id(r.verdict()))) +
                (r.outcome.detail.empty() ? "" : ": " + r.outcome.detail);
      }
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::string pruned_line(const Pruned &p) {
  return fmt::format("{}  {}  ({})", p.dropped ? "dropped" : "kept   ", corpus_line(p.entry), p.why);
}

}  // namespace attncheck::gate
