// The parent's reading of what the sandbox server sends. The server runs the plugin — untrusted code that may
// scribble over the server's memory before a message goes out — so every field is checked and every string bounded
// by its buffer. Pure functions of the messages, so that fuzz/ can drive them.
#pragma once

#include "server.h"
#include "wire.h"

#include <stdexcept>
#include <string>

namespace attncheck::sandbox {

/// A message that cannot be a correct server's; what() says what is wrong (one line, without the plugin's name).
struct DecodeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The text of a fixed-size buffer: up to its first NUL, never past its end, control characters replaced.
template <std::size_t N>
std::string bounded(const char (&buf)[N]) {
  std::string s;
  for (std::size_t i = 0; i < N && buf[i] != '\0'; ++i)
    s.push_back(static_cast<unsigned char>(buf[i]) < 0x20 || buf[i] == 0x7f ? '?' : buf[i]);
  return s;
}

/// Hello: the number of kernels that follow, or (count < 0) throws DecodeError with the server's load error; a
/// garbled magic or zero kernels throw too.
int decode_hello(const wire::Hello &hello);
/// Kernel `index`'s KernelInfo, checked: its name, contract and their full lengths within what the wire carries.
KernelDesc decode_kernel_info(const wire::KernelInfo &info, int index);
/// A Reply's kernel message (its last_error), bounded; throws DecodeError for a garbled magic or type.
std::string decode_reply_message(const wire::Reply &reply);

}  // namespace attncheck::sandbox
