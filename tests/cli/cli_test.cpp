// The attncheck command as users and CI run it: documented exit codes, and bad input answered with one clear line
// on stderr — never a crash or a stack trace.
#include "cli_support.h"

#include <string>

using namespace cli_test;

TEST_CASE("a missing plugin file is a usage error naming the path", "[cli]") {
  require_usage_error(run(attncheck("check --plugin /no/such/plugin.so")), "does not exist");
}

TEST_CASE("a file that is not a shared object is a usage error", "[cli]") {
  require_usage_error(run(attncheck("check --plugin " + std::string(EXAMPLE_PLUGIN_SOURCE) + "/CMakeLists.txt")),
                      "cannot load plugin");
}

TEST_CASE("a shared object without attncheck_kernels is a usage error", "[cli]") {
  require_usage_error(run(attncheck("check --plugin " NO_SYMBOL_PLUGIN)), "does not export 'attncheck_kernels'");
}

TEST_CASE("a plugin of another ABI version is a usage error", "[cli]") {
  require_usage_error(run(attncheck("check --plugin " WRONG_ABI_PLUGIN)), "ABI version 99");
}

TEST_CASE("an unknown kernel name lists the kernels there are", "[cli]") {
  const Run r = run(attncheck("check --plugin builtin --kernel nope"));
  require_usage_error(r, "no kernel named 'nope'");
  REQUIRE(r.err.find("naive") != std::string::npos);
  REQUIRE(r.err.find("flash") != std::string::npos);
}

TEST_CASE("bad flag values are usage errors", "[cli]") {
  REQUIRE(run(attncheck("check --cases 0")).status == 2);
  REQUIRE(run(attncheck("check --dtype f64")).status == 2);
  REQUIRE(run(attncheck("check --no-such-flag")).status == 2);
  REQUIRE(run(attncheck("frobnicate")).status == 2);
}

TEST_CASE("the example third-party plugin builds with its own CMakeLists and passes the gate", "[cli]") {
  const std::string build = std::string(CMAKE_COMMAND) + " -S " EXAMPLE_PLUGIN_SOURCE " -B " EXAMPLE_PLUGIN_BUILD +
                            " >/dev/null && " + CMAKE_COMMAND + " --build " EXAMPLE_PLUGIN_BUILD " >/dev/null";
  REQUIRE(run(build).status == 0);
  const Run r = run(attncheck("check --plugin " EXAMPLE_PLUGIN_BUILD "/libexample_attention.so --cases 40 --quiet --time-budget 600"));
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  REQUIRE(r.out.find("example_f32") != std::string::npos);
}
