#include "cli.h"
int cli_cmd_describe(int argc, char **argv) { (void)argc; (void)argv; return 0; }
