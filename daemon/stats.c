/* stats.c - counters and the STATS message (see stats.h). */
#include "stats.h"

void gcd_stats_count(gcd_server *s, const gcd_request *r)
{
    gcd_counters *k = &s->counters;
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
    st->uptime_ms = (gcd_now_ns() - k->started_ns) / 1000000u;
    st->connections = s->n_conns;
    st->requests_ok = k->requests_ok;
    st->requests_failed = k->requests_failed;
    st->bytes_in = k->bytes_in;
    st->bytes_out = k->bytes_out;
    st->worker_threads = s->workers ? gcd_workers_threads(s->workers) : 0;
    st->queue_depth = s->workers ? gcd_workers_pending(s->workers) : 0;
    st->memory_in_use = s->memory_in_use;
    st->memory_budget = s->cfg.memory_budget;
    st->backend = (char *)"cpu";
    st->cpu_requests = k->cpu_requests;
    st->gpu_requests = k->gpu_requests;
}
