/*
 * trim.h - gives the heap memory the daemon freed back to the system once
 * it is idle.
 *
 * Why: requests, streams and codec stages allocate and free large blocks on
 * many threads. glibc keeps what is freed inside its arenas (and raises its
 * mmap threshold after freeing a large mapped block, so later blocks of
 * that size come from the arenas too), so after a burst of clients the
 * daemon's private memory stays near its peak although nothing is in use.
 * malloc_trim(0) returns the free pages of every arena. It walks every
 * arena, taking each one's lock, so it runs on a thread of its own, not
 * on the event loop, and twice per idle spell at most.
 */
#ifndef GCD_TRIM_H
#define GCD_TRIM_H

#include <stdbool.h>
#include <stdint.h>

typedef struct gcd_trim gcd_trim;

/* The trimming thread; NULL (logged) if it cannot start: then nothing is trimmed. */
gcd_trim *gcd_trim_start(void);

/*
 * From the loop, once a second. busy: requests in flight or memory held
 * for them; activity: a counter that moves with every request and stream.
 * After activity, the second idle tick in a row trims (a tick later than
 * needed, so the codec threads have given their scratch back first), and
 * the sixth trims again, for what was freed later on a loaded host.
 */
void gcd_trim_tick(gcd_trim *t, bool busy, uint64_t activity);

/* Trims done so far (for tests and logs). */
uint64_t gcd_trim_count(gcd_trim *t);

/* Stop and join the thread; NULL is fine. */
void gcd_trim_stop(gcd_trim *t);

#endif
