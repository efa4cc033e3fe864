/*
 * log.h - logging to stderr in a form the systemd journal understands.
 *
 * Under systemd (JOURNAL_STREAM set) each line starts with "<N>", the
 * sd-daemon priority prefix, so `journalctl -p err` works; on a terminal the
 * level is spelled out instead. Thread-safe: one fprintf per line.
 */
#ifndef GCD_LOG_H
#define GCD_LOG_H

#include <syslog.h>

/* Messages above this level (LOG_DEBUG > LOG_INFO > ...) are dropped. */
void gcd_log_set_level(int max_level);

void gcd_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
