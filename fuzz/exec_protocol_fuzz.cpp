// Lines an exec kernel writes: every hello line and answer line is parsed or refused with a one-line message,
// without a crash; what is accepted is what the protocol allows.
#include "../exec/src/protocol.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  using namespace attncheck::exec_detail;
  const std::string_view text(reinterpret_cast<const char *>(data), size);
  auto one_line = [](const std::string &m) {
    if (m.empty() || m.find('\n') != std::string::npos) std::abort();
  };
  for (bool have_version : {false, true}) {
    try {
      const HelloLine h = parse_hello_line(text, have_version);
      if (h.kind == HelloLine::Kind::kernel && !valid_name(h.name)) std::abort();
    } catch (const ProtocolError &e) {
      one_line(e.what());
    }
  }
  try {
    const Answer a = parse_answer(text);
    if (a.message.size() > kMaxQuoted + 3) std::abort();
  } catch (const ProtocolError &e) {
    one_line(e.what());
  }
  return 0;
}
