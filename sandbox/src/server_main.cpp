// attncheck-sandbox-server: the fork server of attncheck's sandbox, exec()ed by it in the forked child so that
// every server is a fresh process (a forked copy of a parent that ran OpenMP would hang in the plugin's OpenMP).
#include "serve.h"

#include <cstdio>
#include <cstdlib>

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "attncheck-sandbox-server is started by attncheck's sandbox, not by hand\n");
    return 2;
  }
  attncheck::sandbox::serve(attncheck::sandbox::kServerSocketFd, attncheck::sandbox::kServerMemFd, argv[1],
                            static_cast<pid_t>(std::strtol(argv[2], nullptr, 10)));
}
