#include "commands.h"
namespace attncheck::cli {
void register_check_command(CLI::App &, Action &) {}
}  // namespace attncheck::cli
