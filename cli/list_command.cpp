// attncheck list: every property id with its one-line math, the ABI 1.2 features a kernel may declare, and how
// kernel processes are contained here; `attncheck list --shapes`: the model presets of `check --shapes`.
#include "commands.h"

#include "attncheck/containment.h"
#include "attncheck/check.h"
#include "attncheck/shapes.h"

#include <fmt/core.h>

#include <algorithm>
#include <memory>

namespace attncheck::cli {

void register_list_command(CLI::App &app, Action &action) {
  CLI::App *cmd = app.add_subcommand("list", "List every property id with its formula and what a failure means.");
  auto shapes = std::make_shared<bool>(false);
  cmd->add_flag("--shapes", *shapes,
                "List the model presets of `attncheck check --shapes` instead: each shape, and where its numbers "
                "come from");
  cmd->callback([&action, shapes] {
    action = [shapes] {
      if (*shapes) {
        for (const gate::ModelPreset &m : gate::model_presets()) {
          fmt::print("{}\n  source: {}\n", m.name, m.source);
          for (const DeclaredShape &d : m.shapes) fmt::print("  {}\n", d.describe());
        }
        return gate::kExitPass;
      }
      std::size_t width = 0;
      for (const PropertyInfo &p : property_catalog()) width = std::max(width, p.id.size());
      for (const PropertyInfo &p : property_catalog())
        fmt::print("{:<{}}  {}\n{:<{}}  {}{}{}\n", p.id, width, p.formula, "", width, p.summary,
                   p.needs_backward ? " (needs a backward)" : "",
                   p.feature ? fmt::format(" (checked when the kernel declares features={})", feature_name(p.feature))
                             : "");
      // The features a contract may declare (SPEC.md §2.7) and the property that checks each.
      fmt::print("\nfeatures (declare with --contract features=a+b, the plugin's attncheck_contracts or the exec hello):\n");
      for (const PropertyInfo &p : property_catalog())
        if (p.feature) fmt::print("  {:<8}  checked by {}\n", feature_name(p.feature), p.id);
      // How kernel processes are contained on this machine (SPEC.md §8).
      fmt::print("\nkernel processes: {}\n", containment::kernel_domain()->description());
      return gate::kExitPass;
    };
  });
}

}  // namespace attncheck::cli
