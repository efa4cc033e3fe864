/* log.c - see log.h. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int max_log_level = LOG_INFO;

void gcd_log_set_level(int max_level)
{
    max_log_level = max_level;
}

static const char *level_name(int level)
{
    static const char *const names[] = { "emerg", "alert", "crit", "error", "warning", "notice", "info", "debug" };
    return level >= 0 && level <= LOG_DEBUG ? names[level] : "log";
}

void gcd_log(int level, const char *fmt, ...)
{
    if (level > max_log_level)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (getenv("JOURNAL_STREAM"))
        fprintf(stderr, "<%d>%s\n", level, line);
    else
        fprintf(stderr, "gpucompd: %s: %s\n", level_name(level), line);
}
