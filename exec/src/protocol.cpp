#include "protocol.h"

#include "attncheck/contract.h"
#include "attncheck/exec_kernel.h"

#include <cctype>
#include <charconv>

namespace attncheck::exec_detail {

std::string clip(std::string_view s, std::size_t max) {
  std::string out;
  for (char c : s.substr(0, max)) out.push_back(static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '?' : c);
  if (s.size() > max) out += "...";
  return out;
}

std::vector<std::string> split_spaces(std::string_view s) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < s.size()) {
    const std::size_t j = s.find(' ', i);
    out.emplace_back(s.substr(i, j == std::string_view::npos ? std::string_view::npos : j - i));
    if (j == std::string_view::npos) break;
    i = j + 1;
  }
  return out;
}

bool valid_name(std::string_view n) {
  if (n.empty() || n.size() > kMaxNameLen) return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '+' || c == '-')) return false;
  return true;
}

HelloLine parse_hello_line(std::string_view line, bool have_version) {
  const auto f = split_spaces(line);
  HelloLine h;
  if (!have_version) {
    int version = 0;
    const bool numeric = f.size() == 2 && !f[1].empty() &&
                         std::from_chars(f[1].data(), f[1].data() + f[1].size(), version).ptr ==
                             f[1].data() + f[1].size();
    if (f.empty() || f[0] != kHelloWord || !numeric)
      throw ProtocolError("no hello line: its first line on stdout was '" + clip(line) +
                          "'; the command must print 'attncheck-exec 1' first and write nothing else to stdout (" +
                          std::string(kProtocolRef) + " §3)");
    if (version != kExecProtocolVersion)
      throw ProtocolError("speaks exec protocol version " + f[1] + ", this attncheck speaks version " +
                          std::to_string(kExecProtocolVersion) +
                          ": use a kernel and an attncheck of the same protocol version");
    h.kind = HelloLine::Kind::version;
    return h;
  }
  if (line == "ready") return h;
  if (f.size() < 2 || f[0] != "kernel" || !valid_name(f[1]))
    throw ProtocolError("bad hello line '" + clip(line) +
                        "': expected 'kernel <name> forward [backward]' (name: letters, digits, _ . + -) or 'ready'");
  h.kind = HelloLine::Kind::kernel;
  h.name = f[1];
  bool forward = false;
  for (std::size_t i = 2; i < f.size(); ++i) {
    if (f[i] == "forward") forward = true;
    if (f[i] == "backward") h.backward = true;  // unknown capability tokens are ignored (§3)
    if (is_contract_token(f[i])) h.contract += (h.contract.empty() ? "" : " ") + f[i];
  }
  try {
    h.features = parse_contract(h.contract).features;
  } catch (const ContractError &e) {
    // The contract's message quotes the child's token: one printable line, however long.
    throw ProtocolError("kernel '" + h.name + "' declares an invalid " + clip(e.what(), std::string::npos) +
                        " (spec/SPEC.md §3.1 lists the contract keys)");
  }
  if (!forward)
    throw ProtocolError("kernel '" + h.name + "' does not list the capability 'forward': every kernel has a forward");
  return h;
}

Answer parse_answer(std::string_view answer) {
  const std::size_t sp = answer.find(' ');
  const std::string_view word = answer.substr(0, sp);
  const std::string_view rest = sp == std::string_view::npos ? "" : answer.substr(sp + 1);
  if (word == "unsupported" && (sp != std::string_view::npos || answer == "unsupported"))
    return {Answer::Kind::unsupported, clip(rest)};
  if (word == "error" && (sp != std::string_view::npos || answer == "error")) return {Answer::Kind::error, clip(rest)};
  if (answer != "ok")
    throw ProtocolError("garbled answer '" + clip(answer) +
                        "' (expected 'ok', 'unsupported <message>' or 'error <message>'; " +
                        std::string(kProtocolRef) + " §4; diagnostics belong on stderr)");
  return {};
}

}  // namespace attncheck::exec_detail
