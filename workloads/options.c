// SPDX-License-Identifier: MIT
/* The driver's options: the run command's arguments checked against the workload, and
 * the placement of its threads on CPUs. */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver.h"

#define PROG "ipcbench"

const struct workload *drv_find(const char *name)
{
	for (const struct workload *const *w = workloads; *w; w++)
		if (!strcmp((*w)->name, name))
			return *w;
	return NULL;
}

unsigned drv_nmetrics(const struct workload *w)
{
	unsigned n = 0;

	while (n < WL_MAX_METRICS && w->metrics[n])
		n++;
	return n;
}

int drv_parse_u64(const char *s, int suffix, uint64_t *out)
{
	uint64_t v = 0, mult = 1;
	const char *p = s;

	if (!s || *s < '0' || *s > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (*p && suffix) {
		if (*p == 'k' || *p == 'K')
			mult = 1ull << 10;
		else if (*p == 'm' || *p == 'M')
			mult = 1ull << 20;
		else
			return -1;
		p++;
		if (!strcmp(p, "iB") || !strcmp(p, "B"))
			p += strlen(p);
	}
	if (*p)
		return -1;
	if (v > UINT64_MAX / mult)
		return -1;
	*out = v * mult;
	return 0;
}

int drv_parse_derived(const char *spec, char *name, size_t nlen, char *from, size_t flen, double *factor)
{
	const char *eq = strchr(spec, '='), *op;
	char *end;
	double v;

	if (!eq || eq == spec)
		return -1;
	op = eq + 1 + strcspn(eq + 1, "/*");
	if (!*op || op == eq + 1)
		return -1;
	v = strtod(op + 1, &end);
	if (end == op + 1 || *end || v <= 0)
		return -1;
	snprintf(name, nlen, "%.*s", (int)(eq - spec), spec);
	snprintf(from, flen, "%.*s", (int)(op - eq - 1), eq + 1);
	*factor = *op == '/' ? 1.0 / v : v;
	return 0;
}

int drv_list_has(const char *list, const char *word)
{
	size_t n = strlen(word);

	while (list && *list) {
		size_t k = strcspn(list, ",");

		if (k == n && !strncmp(list, word, n))
			return 1;
		list += k + (list[k] == ',');
	}
	return 0;
}

const char *drv_placement_name(enum wl_placement p)
{
	switch (p) {
	case PLACE_CROSS: return "cross-cpu";
	case PLACE_SAME:  return "same-cpu";
	case PLACE_CPUS:  return "cpus";
	default:          return "none";
	}
}

static int set_placement(struct run_args *a, enum wl_placement p, const char *opt, char *err, size_t len)
{
	static const char *const opt_of[] = { "--cross-cpu", "--same-cpu", "--cpus", "--no-pin" };

	if (a->placement_given && a->placement != p) {
		snprintf(err, len, "%s and %s exclude each other", opt_of[a->placement], opt);
		return WL_FAIL_USAGE;
	}
	a->placement = p;
	a->placement_given = 1;
	return 0;
}

static int parse_count(const char *opt, const char *val, uint64_t min, uint64_t max, uint64_t *out,
		       char *err, size_t len)
{
	if (drv_parse_u64(val, 0, out) || *out < min || *out > max) {
		snprintf(err, len, "%s needs a whole number from %llu to %llu, not '%s'", opt,
			 (unsigned long long)min, (unsigned long long)max, val);
		return WL_FAIL_USAGE;
	}
	return 0;
}

/* --owner UID:GID (the invoking user under sudo): decimal ids below 2^32 - 1. */
static int parse_owner(struct run_args *a, const char *val, char *err, size_t len)
{
	const char *colon = strchr(val, ':');
	uint64_t u, g;
	char uid[24];

	if (!colon || (size_t)(colon - val) >= sizeof(uid)) {
		snprintf(err, len, "--owner needs UID:GID, not '%s'", val);
		return WL_FAIL_USAGE;
	}
	snprintf(uid, sizeof(uid), "%.*s", (int)(colon - val), val);
	if (drv_parse_u64(uid, 0, &u) || drv_parse_u64(colon + 1, 0, &g) || u >= UINT32_MAX || g >= UINT32_MAX) {
		snprintf(err, len, "--owner needs UID:GID, not '%s'", val);
		return WL_FAIL_USAGE;
	}
	a->owner_given = 1;
	a->owner_uid = (unsigned)u;
	a->owner_gid = (unsigned)g;
	return 0;
}

static int parse_cpus(struct run_args *a, const char *val, char *err, size_t len)
{
	char first[32];
	const char *comma = strchr(val, ',');
	uint64_t x, y = 0;

	snprintf(first, sizeof(first), "%.*s", comma ? (int)(comma - val) : (int)strlen(val), val);
	if (drv_parse_u64(first, 0, &x) || x >= CPU_SETSIZE ||
	    (comma && (drv_parse_u64(comma + 1, 0, &y) || y >= CPU_SETSIZE))) {
		snprintf(err, len, "--cpus needs A or A,B (CPU numbers), not '%s'", val);
		return WL_FAIL_USAGE;
	}
	a->cpus[0] = (int)x;
	a->cpus[1] = comma ? (int)y : -1;
	return set_placement(a, PLACE_CPUS, "--cpus", err, len);
}

int drv_parse_run(int argc, char **argv, struct run_args *a, char *err, size_t len)
{
	static const char *const valued[] = { "--out", "--iterations", "--warmup", "--runs", "--size",
					      "--cpus", "--mode", "--progress", "--inject-peer-spin",
					      "--inject-peer-syscalls", "--inject-peer-sleep",
					      "--inject-measuring-spin", "--inject-every", "--interval",
					      "--duration", "--break-at", "--priority", "--owner" };
	int r = 0;

	memset(a, 0, sizeof(*a));
	a->iterations = 100000;
	a->warmup = 10000;
	a->runs = 5;
	a->size = 1;
	a->placement = PLACE_CROSS;
	a->cpus[0] = a->cpus[1] = -1;

	for (int i = 0; i < argc && !r; i++) {
		const char *arg = argv[i], *val = NULL;
		char opt[32];
		int takes = 0;

		if (strncmp(arg, "--", 2)) {
			if (a->name) {
				snprintf(err, len, "unexpected argument '%s' (one workload per run)", arg);
				return WL_FAIL_USAGE;
			}
			a->name = arg;
			continue;
		}
		snprintf(opt, sizeof(opt), "%.*s", (int)strcspn(arg, "="), arg);
		for (size_t k = 0; k < sizeof(valued) / sizeof(valued[0]); k++)
			takes |= !strcmp(opt, valued[k]);
		if (takes) {
			if (strchr(arg, '='))
				val = strchr(arg, '=') + 1;
			else if (i + 1 < argc)
				val = argv[++i];
			else {
				snprintf(err, len, "%s needs a value", opt);
				return WL_FAIL_USAGE;
			}
		} else if (strchr(arg, '=')) {
			snprintf(err, len, "%s takes no value", opt);
			return WL_FAIL_USAGE;
		}

		if (!strcmp(opt, "--out"))
			a->out = val;
		else if (!strcmp(opt, "--progress"))
			a->progress = val;
		else if (!strcmp(opt, "--owner"))
			r = parse_owner(a, val, err, len);
		else if (!strcmp(opt, "--mode"))
			a->mode = val;
		else if (!strcmp(opt, "--iterations"))
			r = parse_count(opt, val, 1, DRV_MAX_ITERATIONS, &a->iterations, err, len);
		else if (!strcmp(opt, "--warmup"))
			r = parse_count(opt, val, 0, DRV_MAX_ITERATIONS, &a->warmup, err, len);
		else if (!strcmp(opt, "--runs"))
			r = parse_count(opt, val, 1, DRV_MAX_RUNS, &a->runs, err, len);
		else if (!strcmp(opt, "--size")) {
			if (drv_parse_u64(val, 1, &a->size) || a->size == 0) {
				snprintf(err, len, "--size needs a byte count of at least 1 (suffix K or M allowed), not '%s'", val);
				return WL_FAIL_USAGE;
			}
			a->size_given = 1;
		} else if (!strcmp(opt, "--cpus"))
			r = parse_cpus(a, val, err, len);
		else if (!strcmp(opt, "--same-cpu"))
			r = set_placement(a, PLACE_SAME, opt, err, len);
		else if (!strcmp(opt, "--cross-cpu"))
			r = set_placement(a, PLACE_CROSS, opt, err, len);
		else if (!strcmp(opt, "--no-pin"))
			r = set_placement(a, PLACE_NONE, opt, err, len);
		else if (!strcmp(opt, "--procs"))
			a->procs = 1;
		else if (!strcmp(opt, "--fresh"))
			a->fresh = 1;
		else if (!strcmp(opt, "--containers"))
			a->containers = 1;
		else if (!strcmp(opt, "--inject-peer-spin"))
			r = parse_count(opt, val, 1, DRV_MAX_INJECT_NS, &a->inject.peer_spin_ns, err, len);
		else if (!strcmp(opt, "--inject-peer-syscalls"))
			r = parse_count(opt, val, 1, DRV_MAX_INJECT_SYSCALLS, &a->inject.peer_syscalls, err, len);
		else if (!strcmp(opt, "--inject-peer-sleep"))
			r = parse_count(opt, val, 1, DRV_MAX_INJECT_US, &a->inject.peer_sleep_us, err, len);
		else if (!strcmp(opt, "--inject-measuring-spin"))
			r = parse_count(opt, val, 1, DRV_MAX_INJECT_NS, &a->inject.measuring_spin_ns, err, len);
		else if (!strcmp(opt, "--inject-every"))
			r = parse_count(opt, val, 1, DRV_MAX_INJECT_EVERY, &a->inject.every, err, len);
		else if (!strcmp(opt, "--interval"))
			r = parse_count(opt, val, 1, 10000000, &a->interval_us, err, len);
		else if (!strcmp(opt, "--duration"))
			r = parse_count(opt, val, 1, 86400, &a->duration_s, err, len);
		else if (!strcmp(opt, "--break-at"))
			r = parse_count(opt, val, 1, 10000000, &a->break_us, err, len);
		else if (!strcmp(opt, "--priority"))
			r = parse_count(opt, val, 1, 99, &a->priority, err, len);
		else {
			snprintf(err, len, "unknown option %s (see `" PROG " run --help`)", opt);
			return WL_FAIL_USAGE;
		}
	}
	if (r)
		return r;
	a->inject.peer = a->inject.peer_spin_ns || a->inject.peer_syscalls || a->inject.peer_sleep_us;
	a->inject.measuring = a->inject.measuring_spin_ns != 0;
	if (a->inject.every && !a->inject.peer && !a->inject.measuring) {
		snprintf(err, len, "--inject-every needs one of the --inject-* costs");
		return WL_FAIL_USAGE;
	}
	if (!a->name) {
		snprintf(err, len, "run needs a workload name (see `" PROG " list`)");
		return WL_FAIL_USAGE;
	}
	if (!a->out) {
		snprintf(err, len, "run needs --out DIR");
		return WL_FAIL_USAGE;
	}
	if (a->mode && !*a->mode) {
		snprintf(err, len, "--mode needs a value");
		return WL_FAIL_USAGE;
	}
	return 0;
}

/* The first --inject-* option given, for messages. */
static const char *first_inject(const struct wl_inject *in)
{
	return in->peer_spin_ns ? "--inject-peer-spin" : in->peer_syscalls ? "--inject-peer-syscalls"
		: in->peer_sleep_us ? "--inject-peer-sleep" : "--inject-measuring-spin";
}

/* "pipe, eventfd, ...": the workloads with injection points. */
static void inject_names(char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = 0;
	for (const struct workload *const *w = workloads; *w && at < len; w++)
		if ((*w)->flags & WL_INJECT)
			at += (size_t)snprintf(buf + at, len - at, "%s%s", at ? ", " : "", (*w)->name);
}

int drv_check_run(const struct workload *w, struct run_args *a, uint64_t mem_bytes, char *err, size_t len)
{
	uint64_t max = w->max_size && w->max_size < DRV_MAX_SIZE ? w->max_size : DRV_MAX_SIZE;
	uint64_t need;
	char names[200];

	if ((a->inject.peer || a->inject.measuring) && !(w->flags & WL_INJECT)) {
		inject_names(names, sizeof(names));
		snprintf(err, len, "%s has no injection points: %s applies to %s", w->name,
			 first_inject(&a->inject), names);
	} else if (a->procs && !(w->flags & WL_PROCS))
		snprintf(err, len, "%s has no --procs variant", w->name);
	else if (a->fresh && !(w->flags & WL_FRESH))
		snprintf(err, len, "%s has no --fresh variant", w->name);
	else if (a->containers && !(w->flags & WL_CONTAINERS))
		snprintf(err, len, "%s cannot run in --containers", w->name);
	else if (a->mode && !drv_list_has(w->modes, a->mode))
		snprintf(err, len, "%s has no mode '%s' (modes: %s)", w->name, a->mode,
			 w->modes ? w->modes : "none");
	else if (!(w->flags & WL_SIZE) && a->size != 1)
		snprintf(err, len, "%s carries no payload: --size does not apply", w->name);
	else if (a->size > max)
		snprintf(err, len, "--size %llu is more than %s carries (at most %llu bytes)",
			 (unsigned long long)a->size, w->name, (unsigned long long)max);
	else {
		need = drv_nmetrics(w) * a->iterations * DRV_BYTES_PER_REC;
		if (mem_bytes && need > mem_bytes / 2) {
			snprintf(err, len, "--iterations %llu needs %llu MiB of timestamp arrays, more than half of the available memory (%llu MiB)",
				 (unsigned long long)a->iterations, (unsigned long long)(need >> 20),
				 (unsigned long long)(mem_bytes >> 20));
			return WL_FAIL_USAGE;
		}
		return 0;
	}
	return WL_FAIL_USAGE;
}

static int first_cpu(const cpu_set_t *set, int after)
{
	for (int i = after + 1; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, set))
			return i;
	return -1;
}

int drv_place(const struct workload *w, const struct run_args *a, const cpu_set_t *usable,
	      struct wl_opts *o, char *warn, size_t wlen, char *err, size_t len)
{
	int single = !!(w->flags & WL_SINGLE);
	int a0 = first_cpu(usable, -1), a1 = a0 >= 0 ? first_cpu(usable, a0) : -1;

	warn[0] = 0;
	o->placement = a->placement;
	if (!a->placement_given && (w->flags & WL_SAME_CPU_DEF))
		o->placement = PLACE_SAME;
	switch (o->placement) {
	case PLACE_NONE:
		o->cpu[0] = o->cpu[1] = -1;
		return 0;
	case PLACE_CPUS:
		for (int s = 0; s < 2; s++) {
			int cpu = a->cpus[s];

			if (s == 1 && cpu < 0) {
				if (!single) {
					snprintf(err, len, "%s runs two sides: --cpus needs A,B", w->name);
					return WL_FAIL_USAGE;
				}
				break;
			}
			if (!CPU_ISSET(cpu, usable)) {
				snprintf(err, len, "CPU %d is offline, does not exist or is not allowed for this process", cpu);
				return WL_FAIL_USAGE;
			}
		}
		o->cpu[0] = a->cpus[0];
		o->cpu[1] = single ? -1 : a->cpus[1];
		if (single && a->cpus[1] >= 0)
			snprintf(warn, wlen, "%s runs one thread: the second CPU of --cpus is unused", w->name);
		break;
	case PLACE_SAME:
		o->cpu[0] = a0;
		o->cpu[1] = single ? -1 : a0;
		break;
	case PLACE_CROSS:
		o->cpu[0] = a0;
		o->cpu[1] = single ? -1 : a1;
		if (single) {
			/* one thread: "cross" has nothing to cross; say what it is */
			o->placement = PLACE_SAME;
		} else if (a1 < 0) {
			o->cpu[1] = a0;
			o->placement = PLACE_SAME;
			snprintf(warn, wlen, "only one usable CPU: both sides run on CPU %d", a0);
		}
		break;
	}
	if (o->cpu[0] < 0) {
		snprintf(err, len, "no usable CPU to pin to (try --no-pin)");
		return WL_FAIL_USAGE;
	}
	if (!single && (w->flags & WL_SPINS) && o->cpu[0] == o->cpu[1] && !warn[0])
		snprintf(warn, wlen, "both sides spin on CPU %d: each waits for the other's time slice", o->cpu[0]);
	return 0;
}

int drv_usable_cpus(cpu_set_t *set)
{
	cpu_set_t online;
	char line[4096], *p = line;
	FILE *f;

	CPU_ZERO(set);
	if (sched_getaffinity(0, sizeof(*set), set))
		return -errno;
	f = fopen("/sys/devices/system/cpu/online", "re");
	if (!f)
		return 0;   /* no sysfs: the affinity mask is all we know */
	if (!fgets(line, sizeof(line), f)) {
		fclose(f);
		return 0;
	}
	fclose(f);
	CPU_ZERO(&online);
	while (*p >= '0' && *p <= '9') {
		char *end;
		long lo = strtol(p, &end, 10), hi = lo;

		if (*end == '-')
			hi = strtol(end + 1, &end, 10);
		for (long c = lo; c <= hi && c < CPU_SETSIZE; c++)
			CPU_SET((int)c, &online);
		p = end + (*end == ',');
	}
	CPU_AND(set, set, &online);
	return 0;
}
