/* A shared library that is not a plugin: no rl_env_plugin_v1. */
int not_a_plugin(void) { return 7; }
