/*
 * budget.h - one memory budget for everything the daemon holds for requests.
 *
 * What is charged, and when (docs/SECURITY.md, "Memory"):
 *   - a socket-streamed input: its declared size, when its first frame is
 *     admitted (the buffer is allocated then), until the engine is done with it;
 *   - every output buffer and codec growth, when the engine allocates it
 *     (memfd outputs too: their pages are faulted in by the daemon);
 *   - response bytes queued on a socket, until the kernel has taken them.
 *
 * Charges are shared out per user (peer uid): one user holds at most
 * `uid_share` of the budget, so a user who stops reading, or who starts
 * requests and never finishes them, cannot starve the others. A charge that
 * does not fit is refused (the caller answers GC_E_LIMIT or waits): the
 * budget never overflows and reading never stops globally, so the daemon
 * always makes progress.
 *
 * Thread-safe: workers charge outputs while the loop charges inputs.
 */
#ifndef GCD_BUDGET_H
#define GCD_BUDGET_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct gcd_budget gcd_budget;

/* limit: bytes in all; uid_limit: bytes one uid may hold. NULL if out of memory. */
gcd_budget *gcd_budget_new(uint64_t limit, uint64_t uid_limit);
void gcd_budget_free(gcd_budget *b);

/* Charge bytes to uid if both the budget and uid's share have room. */
bool gcd_budget_try_charge(gcd_budget *b, uid_t uid, uint64_t bytes);

/* Charge whatever happens (bytes already held, e.g. a response being queued). */
void gcd_budget_charge(gcd_budget *b, uid_t uid, uint64_t bytes);

void gcd_budget_release(gcd_budget *b, uid_t uid, uint64_t bytes);

/* Would a charge of bytes to uid fit if nothing else were held by uid? */
bool gcd_budget_could_fit(const gcd_budget *b, uint64_t bytes);

uint64_t gcd_budget_in_use(gcd_budget *b);
uint64_t gcd_budget_limit(const gcd_budget *b);
uint64_t gcd_budget_uid_limit(const gcd_budget *b);
uint64_t gcd_budget_uid_in_use(gcd_budget *b, uid_t uid);

#endif
