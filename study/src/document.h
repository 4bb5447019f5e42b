// The report as a list of blocks, rendered to markdown or HTML (internal).
#pragma once

#include "attncheck/study.h"
#include "svg.h"

#include <string>
#include <variant>
#include <vector>

namespace attncheck::study {

struct Heading {
  int level = 1;
  std::string text, id;
};
struct Paragraph {
  std::string text;  ///< plain text; `code` spans are kept as code
};
struct Bullets {
  std::vector<std::string> items;
};
struct Table {
  std::string caption;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};
struct Plot {
  PlotSpec spec;
};
using Block = std::variant<Heading, Paragraph, Bullets, Table, Plot>;

/// Every section of the report, in order.
std::vector<Block> build_document(const StudyResult &r);

}  // namespace attncheck::study
