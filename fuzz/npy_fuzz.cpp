// .npy files from an exec kernel: parse() refuses or accepts every input without a crash, and what it accepts
// serializes back to bytes it accepts again, unchanged.
#include "attncheck/npy.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  using namespace attncheck::npy;
  Array a;
  try {
    a = parse(std::string_view(reinterpret_cast<const char *>(data), size), "fuzz.npy");
  } catch (const NpyError &) {
    return 0;
  }
  const Array b = parse(serialize(a), "again.npy");
  if (b.descr != a.descr || b.shape != a.shape || b.data != a.data) std::abort();
  return 0;
}
