/* stats.c - counters and the STATS message (see stats.h). */
#include "stats.h"

#include "budget.h"
#include "gc_clock.h"

#include "fd_map_cache.h"

#include <stdio.h>

#include "lane.h"
#include "codec.h"
#include "dispatch.h"

static void fill_lane(gcd_lane *b, Gpucomp__LaneStats *d, char *name, size_t name_size)
{
    gcd_lane_stats bs;
    gcd_lane_get_stats(b, &bs);
    gpucomp__lane_stats__init(d);
    snprintf(name, name_size, "%s", gcd_lane_name(b));
    d->name = name;
    d->batches = bs.batches;
    d->bytes_in = bs.bytes_in;
    d->bytes_out = bs.bytes_out;
    d->kernel_ns = bs.kernel_ns;
    d->copy_ns = bs.h2d_ns + bs.d2h_ns;
    d->h2d_ns = bs.h2d_ns;
    d->d2h_ns = bs.d2h_ns;
    d->wall_ns = bs.wall_ns;
    d->requests = bs.requests;
    d->queue_depth = bs.queue_depth;
    d->fallbacks = bs.fallbacks;
    d->retired = bs.retired;
    d->requests_in_flight = bs.in_flight.requests;
    d->bytes_in_flight = bs.in_flight.bytes;
    d->gpu = gcd_lane_gpu(b);
}

void gcd_stats_count(gcd_server *s, const gcd_request *r)
{
    gcd_counters *k = &s->counters;
    if (gcd_request_is_registration(r)) /* not codec work */
        return;
    if (r->error.code != GC_OK) {
        k->requests_failed++;
        return;
    }
    k->requests_ok++;
    k->bytes_in += r->total_size;
    k->bytes_out += r->output_len;
    if (r->backend == GPUCOMP__BACKEND__BACKEND_GPU)
        k->gpu_requests++;
    else
        k->cpu_requests++;
}

void gcd_stats_fill(const gcd_server *s, gcd_stats_message *msg)
{
    const gcd_counters *k = &s->counters;
    Gpucomp__Stats *st = &msg->stats;
    gpucomp__stats__init(st);
    st->uptime_ms = (gc_now_ns() - k->started_ns) / 1000000u;
    st->connections = s->n_conns;
    st->requests_ok = k->requests_ok;
    st->requests_failed = k->requests_failed;
    st->bytes_in = k->bytes_in;
    st->bytes_out = k->bytes_out;
    st->worker_threads = s->workers ? gcd_workers_threads(s->workers) : 0;
    st->queue_depth = s->workers ? gcd_workers_pending(s->workers) : 0;
    st->memory_in_use = gcd_budget_in_use(s->budget);
    st->memory_budget = s->cfg.memory_budget;
    st->registered_bytes = gcd_fd_map_registered_bytes();
    st->register_limit = s->cfg.register_limit;
    st->backend = (char *)gcd_dispatch_backend(s);
    for (unsigned i = 0; i < s->n_lanes; i++) {
        fill_lane(s->lanes[i], &msg->lanes[i], msg->names[i], sizeof msg->names[i]);
        msg->lane_ptrs[i] = &msg->lanes[i];
    }
    st->n_lanes = s->n_lanes;
    st->lanes = msg->lane_ptrs;
    st->gpus = gcd_dispatch_gpus(s);
    st->gpu_by_load = k->gpu_by_load;
    st->stream_loop_copied = k->stream_loop_copied;
    st->cpu_requests = k->cpu_requests;
    st->gpu_requests = k->gpu_requests;
    unsigned n_codecs;
    const gcd_codec *const *codecs = gcd_codec_all(&n_codecs);
    for (unsigned i = 0; i < n_codecs && i < GCD_MAX_CODECS; i++) {
        gcd_dispatch_describe(s, codecs[i], msg->routing[i], sizeof msg->routing[i]);
        msg->routing_ptrs[i] = msg->routing[i];
        st->n_routing = i + 1;
    }
    st->routing = msg->routing_ptrs;
}
