// The parent's reading of the sandbox server's messages (sandbox/src/decode.h): the server runs untrusted plugin
// code, so garbage in any field is refused and no string is read past its buffer — the properties
// fuzz/sandbox_wire_fuzz.cpp drives with random messages.
#include "../../sandbox/src/decode.h"

#include <catch2/catch.hpp>

#include <cstring>

using namespace attncheck::sandbox;
using Catch::Contains;

namespace {
template <class T>
T zeroed() {
  T m;
  std::memset(&m, 0, sizeof m);
  return m;
}
}  // namespace

TEST_CASE("a load error without its terminating NUL is read up to its buffer's end") {
  // Before decode.h the parent printed hello.error as a C string: a scribbled buffer without a NUL was read past.
  auto h = zeroed<wire::Hello>();
  h.magic = wire::kMagic;
  h.count = -1;
  std::memset(h.error, 'E', sizeof h.error);
  try {
    decode_hello(h);
    FAIL("accepted");
  } catch (const DecodeError &e) {
    CHECK(std::strlen(e.what()) == sizeof h.error);
  }
}

TEST_CASE("garbled hellos and replies and oversized kernel names are refused") {
  auto h = zeroed<wire::Hello>();
  CHECK_THROWS_WITH(decode_hello(h), Contains("garbled"));
  h.magic = wire::kMagic;
  CHECK_THROWS_WITH(decode_hello(h), Contains("exports no kernels"));
  h.count = 3;
  CHECK(decode_hello(h) == 3);

  auto k = zeroed<wire::KernelInfo>();
  std::strcpy(k.name, "naive\x01");
  k.full_name_len = 6;
  CHECK(decode_kernel_info(k, 0).name == "naive?");
  k.full_name_len = -5;
  CHECK_THROWS_WITH(decode_kernel_info(k, 0), Contains("has a name of -5 characters"));
  k.full_name_len = wire::kNameBytes;
  CHECK_THROWS_WITH(decode_kernel_info(k, 0), Contains("at most"));

  auto r = zeroed<wire::Reply>();
  r.magic = wire::kMagic;
  r.type = wire::kReturned;
  std::memset(r.message, 'm', sizeof r.message);
  CHECK(decode_reply_message(r).size() == sizeof r.message);
  r.type = static_cast<wire::ReplyType>(7);
  CHECK_THROWS_WITH(decode_reply_message(r), Contains("garbled"));
}
