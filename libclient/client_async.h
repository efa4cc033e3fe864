/*
 * client_async.h - asynchronous requests (gpucomp_submit and friends,
 * client_async.c): what the rest of the library needs from them.
 */
#ifndef GPUCOMP_CLIENT_ASYNC_H
#define GPUCOMP_CLIENT_ASYNC_H

#include "client_internal.h"

/*
 * gpucomp_close: drop the outstanding asynchronous requests without running
 * their callbacks (closing the socket afterwards cancels them on the
 * daemon) and free c->async. No other thread may be using c.
 */
void client_async_destroy(gpucomp_client *c);

/*
 * A blocking call opened a new connection (client_reopen; nothing async is
 * outstanding then): asynchronous requests may use it.
 */
void client_async_connection_reset(gpucomp_client *c);

#endif
