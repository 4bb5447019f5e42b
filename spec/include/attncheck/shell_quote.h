// Quoting for /bin/sh, shared by the floors that build command lines: exec (a kernel's COMMAND in its private
// directory) and the gate (the command line that judges saved tensors again).
#pragma once

#include <string>
#include <string_view>

namespace attncheck {

/// `s` quoted for /bin/sh: 'it'\''s' — for building COMMAND strings from paths and arguments.
inline std::string shell_quote(std::string_view s) {
  std::string out = "'";
  for (const char c : s) {
    if (c == '\'') out += "'\\''";
    else out.push_back(c);
  }
  return out + "'";
}

}  // namespace attncheck
