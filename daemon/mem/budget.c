/* budget.c - the memory budget (see budget.h). */
#include "budget.h"

#include <pthread.h>
#include <stdlib.h>

/*
 * Per-uid holdings: an open-addressed table keyed by uid. Entries are never
 * removed (a uid holding nothing stays at 0), so probing never breaks; the
 * table doubles when half full. Distinct uids are bounded by the allow-list.
 */
typedef struct uid_entry {
    uid_t uid;
    bool used;
    uint64_t held;
} uid_entry;

struct gcd_budget {
    pthread_mutex_t lock;
    uint64_t limit, uid_limit, in_use;
    uid_entry *table;
    size_t cap, n;
};

static size_t home_of(uid_t uid, size_t cap)
{
    return (size_t)(((uint64_t)uid * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
}

static uid_entry *lookup(uid_entry *t, size_t cap, uid_t uid)
{
    size_t i = home_of(uid, cap);
    while (t[i].used && t[i].uid != uid)
        i = (i + 1) & (cap - 1);
    return &t[i];
}

static bool grow(gcd_budget *b)
{
    size_t cap = b->cap * 2;
    uid_entry *t = calloc(cap, sizeof *t);
    if (!t)
        return false;
    for (size_t i = 0; i < b->cap; i++)
        if (b->table[i].used)
            *lookup(t, cap, b->table[i].uid) = b->table[i];
    free(b->table);
    b->table = t;
    b->cap = cap;
    return true;
}

/* uid's entry, added if new (lock held); NULL only if the table cannot grow. */
static uid_entry *entry(gcd_budget *b, uid_t uid)
{
    uid_entry *e = lookup(b->table, b->cap, uid);
    if (e->used)
        return e;
    if ((b->n + 1) * 2 > b->cap && !grow(b))
        return NULL;
    e = lookup(b->table, b->cap, uid);
    *e = (uid_entry){ .uid = uid, .used = true };
    b->n++;
    return e;
}

gcd_budget *gcd_budget_new(uint64_t limit, uint64_t uid_limit)
{
    gcd_budget *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->cap = 16;
    b->table = calloc(b->cap, sizeof *b->table);
    if (!b->table) {
        free(b);
        return NULL;
    }
    pthread_mutex_init(&b->lock, NULL);
    b->limit = limit;
    b->uid_limit = uid_limit < limit ? uid_limit : limit;
    return b;
}

void gcd_budget_free(gcd_budget *b)
{
    if (!b)
        return;
    pthread_mutex_destroy(&b->lock);
    free(b->table);
    free(b);
}

static bool charge(gcd_budget *b, uid_t uid, uint64_t bytes, bool forced)
{
    pthread_mutex_lock(&b->lock);
    uid_entry *e = entry(b, uid);
    bool fits = e && bytes <= b->limit - (b->in_use < b->limit ? b->in_use : b->limit) &&
                bytes <= b->uid_limit - (e->held < b->uid_limit ? e->held : b->uid_limit);
    if (fits || forced) {
        b->in_use += bytes;
        if (e)
            e->held += bytes;
    }
    pthread_mutex_unlock(&b->lock);
    return fits;
}

bool gcd_budget_try_charge(gcd_budget *b, uid_t uid, uint64_t bytes)
{
    return charge(b, uid, bytes, false);
}

void gcd_budget_charge(gcd_budget *b, uid_t uid, uint64_t bytes)
{
    charge(b, uid, bytes, true);
}

void gcd_budget_release(gcd_budget *b, uid_t uid, uint64_t bytes)
{
    if (bytes == 0)
        return;
    pthread_mutex_lock(&b->lock);
    uid_entry *e = lookup(b->table, b->cap, uid);
    b->in_use -= bytes < b->in_use ? bytes : b->in_use;
    if (e->used)
        e->held -= bytes < e->held ? bytes : e->held;
    pthread_mutex_unlock(&b->lock);
}

bool gcd_budget_could_fit(const gcd_budget *b, uint64_t bytes)
{
    return bytes <= b->uid_limit;
}

uint64_t gcd_budget_in_use(gcd_budget *b)
{
    pthread_mutex_lock(&b->lock);
    uint64_t n = b->in_use;
    pthread_mutex_unlock(&b->lock);
    return n;
}

uint64_t gcd_budget_uid_in_use(gcd_budget *b, uid_t uid)
{
    pthread_mutex_lock(&b->lock);
    uid_entry *e = lookup(b->table, b->cap, uid);
    uint64_t n = e->used ? e->held : 0;
    pthread_mutex_unlock(&b->lock);
    return n;
}

uint64_t gcd_budget_limit(const gcd_budget *b)
{
    return b->limit;
}

uint64_t gcd_budget_uid_limit(const gcd_budget *b)
{
    return b->uid_limit;
}
