// report.json from `attncheck replay` and `merge`: from_json refuses or accepts every input without a crash, and
// what it accepts writes back to a document that reads and writes again byte for byte.
#include "attncheck/report_io.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  using namespace attncheck::reporting;
  Document doc;
  try {
    doc = from_json(std::string_view(reinterpret_cast<const char *>(data), size));
  } catch (const ReportError &) {
    return 0;
  }
  const std::string once = to_json(doc);
  if (to_json(from_json(once)) != once) std::abort();
  (void)doc.failures();
  (void)group_failures(doc);
  (void)to_markdown(doc);
  (void)to_junit(doc);
  return 0;
}
