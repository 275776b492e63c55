/* SPDX-License-Identifier: MIT */
/* The one JSON string writer of the C programs (the loader, its sampler, the driver). */
#ifndef IPCTRACE_JSON_H
#define IPCTRACE_JSON_H
#include <stddef.h>
#include <stdio.h>

/* s (at most max bytes: a kernel comm may be cut) as a JSON string: valid UTF-8 kept, any
 * other byte as U+FFFD, '"', '\\' and control characters escaped. NULL is "". */
void json_str(FILE *f, const char *s, size_t max);

#endif
