/* serve_absent.c — `slidepipe serve` in a build without libmicrohttpd: says what is missing. */
#include "cli.h"

int cmd_serve(int argc, char **argv) {
    (void)argc, (void)argv;
    return cli_fail("this slidepipe was built without libmicrohttpd, so it cannot serve "
                    "(apt-get install libmicrohttpd-dev, then rebuild)");
}
