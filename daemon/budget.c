/* budget.c - memory budget and backpressure (see budget.h). */
#include "budget.h"

#include "conn.h"
#include "log.h"

static void set_paused(gcd_server *s, bool paused)
{
    if (s->reading_paused == paused)
        return;
    s->reading_paused = paused;
    gcd_log(LOG_DEBUG, "memory budget: %s reading (%llu of %llu bytes held)",
            paused ? "pausing" : "resuming", (unsigned long long)s->memory_in_use,
            (unsigned long long)s->cfg.memory_budget);
    for (gcd_conn *c = s->conns; c; c = c->next)
        gcd_conn_update_reading(c);
}

void gcd_budget_charge(gcd_server *s, uint64_t bytes)
{
    s->memory_in_use += bytes;
    if (s->memory_in_use > s->cfg.memory_budget)
        set_paused(s, true);
}

void gcd_budget_release(gcd_server *s, uint64_t bytes)
{
    s->memory_in_use -= bytes < s->memory_in_use ? bytes : s->memory_in_use;
    if (s->memory_in_use <= s->cfg.memory_budget / 4 * 3)
        set_paused(s, false);
}
