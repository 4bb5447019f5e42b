// Messages from the sandbox server, which runs untrusted plugin code: any bytes in a Hello, a KernelInfo or a
// Reply are decoded or refused, every string bounded by its buffer, without a crash.
#include "../sandbox/src/decode.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace {
/// `T` filled from the input (zero past its end).
template <class T>
T message(const std::uint8_t *data, std::size_t size) {
  T m;
  std::memset(&m, 0, sizeof m);
  std::memcpy(&m, data, std::min(size, sizeof m));
  return m;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  using namespace attncheck::sandbox;
  try {
    (void)decode_hello(message<wire::Hello>(data, size));
  } catch (const DecodeError &) {
  }
  try {
    (void)decode_kernel_info(message<wire::KernelInfo>(data, size), 0);
  } catch (const DecodeError &) {
  }
  try {
    const wire::Reply r = message<wire::Reply>(data, size);
    (void)decode_reply_message(r);
    (void)signal_name(r.signo);
  } catch (const DecodeError &) {
  }
  return 0;
}
