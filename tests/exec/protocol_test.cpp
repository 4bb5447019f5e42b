// The exec protocol's line parsers (exec/src/protocol.h), without a child: what each hello and answer line says, and
// one printable line for everything malformed — the properties fuzz/exec_protocol_fuzz.cpp drives with random lines.
#include "../../exec/src/protocol.h"

#include <catch2/catch.hpp>

#include <string>

using namespace attncheck::exec_detail;
using Catch::Contains;

namespace {
/// The ProtocolError message of `f()`, checked to be one printable line.
template <class F>
std::string error_of(F &&f) {
  try {
    f();
  } catch (const ProtocolError &e) {
    const std::string m = e.what();
    for (char c : m) REQUIRE(static_cast<unsigned char>(c) >= 0x20);
    return m;
  }
  FAIL("no ProtocolError");
  return "";
}
}  // namespace

TEST_CASE("a hello is a version line then kernel lines then ready") {
  CHECK(parse_hello_line("attncheck-exec 1", false).kind == HelloLine::Kind::version);
  const HelloLine k = parse_hello_line("kernel torch_sdpa forward backward causal=top-left lse=none shiny", true);
  CHECK(k.kind == HelloLine::Kind::kernel);
  CHECK(k.name == "torch_sdpa");
  CHECK(k.backward);
  CHECK(k.contract == "causal=top-left lse=none");  // unknown capability tokens are ignored
  CHECK(parse_hello_line("ready", true).kind == HelloLine::Kind::ready);
  CHECK_THAT(error_of([] { parse_hello_line("attncheck-exec 2", false); }), Contains("version 2"));
  CHECK_THAT(error_of([] { parse_hello_line("hello", false); }), Contains("no hello line"));
  CHECK_THAT(error_of([] { parse_hello_line("kernel k backward", true); }), Contains("'forward'"));
  CHECK_THAT(error_of([] { parse_hello_line("kernel bad/name forward", true); }), Contains("bad hello line"));
}

TEST_CASE("a contract token holding control characters gives a one-line error") {
  // Found by fuzz/exec_protocol_fuzz.cpp: the contract's message quoted the token, line break and all.
  const std::string line = std::string("kernel k forward causal=top\nleft\x01", 34);
  CHECK_THAT(error_of([&] { parse_hello_line(line, true); }), Contains("declares an invalid"));
}

TEST_CASE("an answer is ok or unsupported or error with a message and nothing else") {
  CHECK(parse_answer("ok").kind == Answer::Kind::ok);
  CHECK(parse_answer("unsupported").kind == Answer::Kind::unsupported);
  const Answer e = parse_answer("error MemoryError\x07 in kernel");
  CHECK(e.kind == Answer::Kind::error);
  CHECK(e.message == "MemoryError? in kernel");
  CHECK(parse_answer("error " + std::string(1000, 'x')).message.size() == kMaxQuoted + 3);
  CHECK_THAT(error_of([] { parse_answer("OK"); }), Contains("garbled answer 'OK'"));
  CHECK_THAT(error_of([] { parse_answer("errors"); }), Contains("garbled answer"));
}
