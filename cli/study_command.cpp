#include "commands.h"
namespace attncheck::cli {
void register_study_command(CLI::App &, Action &) {}
}  // namespace attncheck::cli
