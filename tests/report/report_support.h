// Helpers shared by the report tests.
#pragma once

#include "attncheck/report_io.h"

#include <string>

namespace attncheck::test {

/// The message of the ReportError that from_json throws on `text` ("" when it does not throw).
inline std::string error_of(const std::string &text) {
  try {
    (void)reporting::from_json(text);
  } catch (const reporting::ReportError &e) {
    return e.what();
  }
  return "";
}

}  // namespace attncheck::test
