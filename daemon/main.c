/* main.c - gpucompd entry point: settings, then the server loop. */
#include "config.h"

#include <stdlib.h>

#include "log.h"
#include "server.h"
#include "settings.h"

int main(int argc, char **argv)
{
    gcd_config cfg;
    gcd_config_defaults(&cfg);
    int rc = gcd_config_parse(&cfg, argc, argv);
    if (rc != 0)
        return rc > 0 ? EXIT_SUCCESS : 2;
    gcd_log_set_level(cfg.log_level);

    gcd_server server;
    int status = EXIT_FAILURE;
    if (gcd_server_init(&server, &cfg)) {
        server.argc = argc; /* SIGHUP re-reads the command line and its --config */
        server.argv = argv;
        status = gcd_server_run(&server);
    }
    gcd_server_cleanup(&server);
    gcd_log(LOG_INFO, "exited");
    return status;
}
