/* shared_output.c - shared stream output buffers (see shared_output.h). */
#include "shared_output.h"

#include <stdlib.h>

#include "part_cache.h"

gcd_shared_output *gcd_shared_output_wrap(uint8_t *buf, uid_t uid)
{
    gcd_shared_output *o = malloc(sizeof *o);
    if (!o)
        return NULL;
    o->buf = buf;
    o->uid = uid;
    atomic_init(&o->refs, 1);
    return o;
}

void gcd_shared_output_ref(gcd_shared_output *o, size_t n)
{
    atomic_fetch_add(&o->refs, n);
}

void gcd_shared_output_unref(gcd_shared_output *o)
{
    if (o && atomic_fetch_sub(&o->refs, 1) == 1) {
        gcd_part_cache_free(o->uid, o->buf);
        free(o);
    }
}

void gcd_shared_output_done(const void *data, size_t len, void *arg)
{
    (void)data, (void)len;
    gcd_shared_output_unref(arg);
}
