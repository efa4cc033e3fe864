/* stats.h - the STATS answer: daemon counters as a gpucomp.Stats message. */
#ifndef GCD_STATS_H
#define GCD_STATS_H

#include "proto/gpucomp.pb-c.h"
#include "server_state.h"

/* A Stats message with the storage its fields point to. */
typedef struct gcd_stats_message {
    Gpucomp__Stats stats;
    Gpucomp__LaneStats lanes[GCD_MAX_LANES];
    Gpucomp__LaneStats *lane_ptrs[GCD_MAX_LANES];
    char names[GCD_MAX_LANES][96];
    char routing[GCD_MAX_CODECS][96];
    char *routing_ptrs[GCD_MAX_CODECS];
} gcd_stats_message;

/* Fill *msg from the server's counters (loop thread). */
void gcd_stats_fill(const gcd_server *s, gcd_stats_message *msg);

/* Count a finished request (loop thread). */
void gcd_stats_count(gcd_server *s, const gcd_request *r);

#endif
