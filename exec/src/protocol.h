// The exec protocol's lines from the child (spec/EXEC_PROTOCOL.md §3-4), parsed without the child: what a hello line
// and an answer line say, or why they are malformed. Pure functions of the text, so that fuzz/ can drive them.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace attncheck::exec_detail {

/// A malformed line; what() says what is wrong and what to do (one line, without the command's name).
struct ProtocolError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// One line of a hello.
struct HelloLine {
  enum class Kind { version, kernel, ready } kind = Kind::ready;
  std::string name;       ///< kernel: its name
  bool backward = false;  ///< kernel: it lists `backward`
  std::string contract;   ///< kernel: its contract tokens, space-separated ("" when none)
  std::uint32_t features = 0;  ///< kernel: the ATTNCHECK_FEATURE_* bits its contract declares
};

/// Line `line` of a hello: the version line first (`have_version` false), then kernel lines or `ready`. Throws
/// ProtocolError for a malformed line, another protocol version, an invalid contract or a kernel without forward.
HelloLine parse_hello_line(std::string_view line, bool have_version);

/// An answer line: `ok`, `unsupported <message>` or `error <message>`.
struct Answer {
  enum class Kind { ok, unsupported, error } kind = Kind::ok;
  std::string message;  ///< clipped
};
/// Throws ProtocolError for anything else.
Answer parse_answer(std::string_view line);

inline constexpr std::size_t kMaxQuoted = 200;
/// One line, printable (control characters become '?'), at most `max` characters then "...": safe to put into a
/// one-line message.
std::string clip(std::string_view s, std::size_t max = kMaxQuoted);
/// Fields separated by single spaces (empty fields kept).
std::vector<std::string> split_spaces(std::string_view s);
/// Kernel names: 1-64 of A-Z a-z 0-9 _ . + -
bool valid_name(std::string_view n);

inline constexpr std::size_t kMaxNameLen = 64;
inline constexpr std::string_view kHelloWord = "attncheck-exec";
inline constexpr std::string_view kProtocolRef = "spec/EXEC_PROTOCOL.md";

}  // namespace attncheck::exec_detail
