/*
 * budget.h - the global memory budget and read backpressure.
 *
 * Every request's input is charged when its first frame arrives and released
 * when its response is queued. While the charge is over the budget the daemon
 * stops reading from all sockets (clients block in write) instead of growing;
 * reading resumes once usage falls to 3/4 of the budget. A single request
 * larger than the budget is refused (GC_E_LIMIT).
 */
#ifndef GCD_BUDGET_H
#define GCD_BUDGET_H

#include <stdint.h>

#include "server.h"

void gcd_budget_charge(gcd_server *s, uint64_t bytes);
void gcd_budget_release(gcd_server *s, uint64_t bytes);

#endif
