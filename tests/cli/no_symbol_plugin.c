/* A shared object that is not an attncheck plugin: it exports no attncheck_kernels. */
int not_a_plugin(void) { return 42; }
