// attncheck list: every property id with its one-line math.
#include "commands.h"

#include "attncheck/property.h"

#include <fmt/core.h>

#include <algorithm>

namespace attncheck::cli {

void register_list_command(CLI::App &app, Action &action) {
  CLI::App *cmd = app.add_subcommand("list", "List every property id with its formula and what a failure means.");
  cmd->callback([&action] {
    action = [] {
      std::size_t width = 0;
      for (const PropertyDef *d : all_properties()) width = std::max(width, d->id.size());
      for (const PropertyDef *d : all_properties())
        fmt::print("{:<{}}  {}\n{:<{}}  {}{}\n", d->id, width, d->formula, "", width, d->summary,
                   d->needs_backward ? " (needs a backward)" : "");
      return kExitPass;
    };
  });
}

}  // namespace attncheck::cli
