/*
 * server.h - the daemon's top: the event loop, the listener, signals,
 * readiness, reload and the drain on shutdown. Its state (server_state.h)
 * is what every loop-thread file shares.
 */
#ifndef GCD_SERVER_H
#define GCD_SERVER_H

#include <stdbool.h>

#include "server_state.h"

/* Set up listener, workers and signals; false (logged) on failure. */
bool gcd_server_init(gcd_server *s, const gcd_config *cfg);

/* Run the loop until SIGINT/SIGTERM and a clean drain; returns exit status. */
int gcd_server_run(gcd_server *s);

/*
 * Re-read the settings (defaults < --config file < command line, as at start).
 * Settings that can change live take effect; the others are logged as needing
 * a restart; a file that does not parse keeps every current setting.
 * Returns false if the new settings were rejected.
 */
bool gcd_server_reload(gcd_server *s);

/* Free everything (safe after a failed init). */
void gcd_server_cleanup(gcd_server *s);

#endif
