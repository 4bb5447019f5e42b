// Corpus entries (spec/REPORT_SCHEMA.md, "Corpus entries"): a counterexample's case with its kernel, dtype, property
// and outcome, named by the content hash of its case.
#include "json_io.h"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace attncheck::reporting {

using namespace json_detail;

namespace {
constexpr std::string_view kCorpusFormat = "attncheck-corpus-entry";
constexpr int kCorpusVersion = 1;
constexpr std::string_view kReportPrefix = "report.json: ";

/// 32 lowercase hex digits of a 128-bit value.
std::string fmt_hex128(unsigned __int128 h) {
  static constexpr char kDigits[] = "0123456789abcdef";
  constexpr int kNibbles = 32, kNibbleBits = 4;
  std::string out(kNibbles, '0');
  for (int n = kNibbles - 1; n >= 0; --n, h >>= kNibbleBits) out[static_cast<std::size_t>(n)] = kDigits[h & 0xfu];
  return out;
}

/// The canonical case an entry's hash is taken of: kernel, dtype, property and the exact inputs, compact.
std::string canonical_case(std::string_view kernel, Dtype dtype, std::string_view property, const Case &minimal) {
  const ojson j{{"kernel", kernel},
                {"dtype", dtype_name(dtype)},
                {"property", property},
                {"inputs", case_json(minimal, minimal.spec.scale())}};
  return j.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

/// 128-bit FNV-1a of `s`, as 32 lowercase hex digits.
std::string fnv1a_128(std::string_view s) {
  using u128 = unsigned __int128;
  constexpr u128 kOffset = (u128{0x6c62272e07bb0142ull} << 64) | 0x62b821756295c58dull;
  constexpr u128 kPrime = (u128{1} << 88) | 0x13bu;
  u128 h = kOffset;
  for (const char ch : s) h = (h ^ static_cast<unsigned char>(ch)) * kPrime;
  return fmt_hex128(h);
}
}  // namespace

std::string corpus_hash(std::string_view kernel, Dtype dtype, std::string_view property, const Case &minimal) {
  return fnv1a_128(canonical_case(kernel, dtype, property, minimal));
}

std::string to_corpus_json(const CorpusEntry &e) {
  ojson j{{"format", kCorpusFormat},
          {"version", kCorpusVersion},
          {"hash", corpus_hash(e.kernel, e.dtype, e.property, e.minimal)},
          {"kernel", e.kernel},
          {"dtype", dtype_name(e.dtype)},
          {"property", e.property},
          {"verdict", verdict_id(e.verdict)},
          {"tier", tier_name(e.tier)},
          {"contract", e.contract.describe()},
          {"source", ojson{{"kind", kind_name(e.source.kind)}, {"location", e.source.location}}},
          {"seed", std::to_string(e.seed)},
          {"reproduce", e.reproduce},
          {"outcome", outcome_json(e.outcome)},
          {"inputs", case_json(e.minimal, e.minimal.spec.scale())}};
  return j.dump(kIndent, ' ', false, ojson::error_handler_t::replace) + "\n";
}

CorpusEntry corpus_entry_from_json(std::string_view text) {
  try {
    const ParsedDocument parsed = parse_document(text, kCorpusFormat, "corpus entry", kCorpusVersion);
    const Obj top(parsed.j, "");
    CorpusEntry e;
    e.kernel = top.str("kernel");
    e.dtype = top.name<Dtype, kDtypes>("dtype", dtype_name);
    e.property = top.str("property");
    e.verdict = top.name<Verdict, kVerdicts>("verdict", verdict_id);
    e.tier = top.name<Tier, kTiers>("tier", tier_name);
    try {
      e.contract = parse_contract(top.str("contract"));
    } catch (const ContractError &err) {
      fail("\"contract\" does not parse: " + detail::first_line(err.what()));
    }
    const Obj src = top.obj("source");
    e.source.kind = src.name<KernelSource::Kind, kKinds>("kind", kind_name);
    e.source.location = src.str("location");
    e.seed = top.seed("seed");
    e.reproduce = top.str("reproduce");
    e.outcome = read_outcome(top.obj("outcome"));
    e.minimal = read_case(top.obj("inputs"), "the entry has no inputs");
    if (e.minimal.spec.dtype != e.dtype)
      fail("inputs.spec: dtype " + std::string(dtype_name(e.minimal.spec.dtype)) + " is not the entry's " +
           std::string(dtype_name(e.dtype)));
    if (!e.minimal.broadcast_consistent())
      fail("inputs: a broadcast input's values differ along its broadcast dimension");
    e.hash = corpus_hash(e.kernel, e.dtype, e.property, e.minimal);
    if (top.str("hash") != e.hash)
      fail("\"hash\" is not the content hash of its case (" + e.hash + "): the file was edited");
    return e;
  } catch (const ReportError &err) {
    std::string_view what = err.what();
    if (what.starts_with(kReportPrefix)) what.remove_prefix(kReportPrefix.size());
    throw ReportError("corpus entry: " + std::string(what));
  }
}

}  // namespace attncheck::reporting
