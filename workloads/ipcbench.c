// SPDX-License-Identifier: MIT
/*
 * ipcbench: the workload driver. `list` prints the case table as JSON, `run`
 * measures one workload into DIR/iterations.bin and DIR/workload.json,
 * `selftest` runs the driver's unit tests. Interfaces: docs/DESIGN.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "container.h"
#include "driver.h"

#define PROG "ipcbench"

static const char usage_text[] =
	"usage: " PROG " list\n"
	"       " PROG " run NAME --out DIR [--iterations N] [--warmup N] [--runs R] [--size B]\n"
	"                [--cpus A,B | --same-cpu | --cross-cpu | --no-pin] [--mode M]\n"
	"                [--procs] [--fresh] [--containers] [--progress FILE]\n"
	"                [--inject-peer-spin NS] [--inject-peer-syscalls N]\n"
	"                [--inject-peer-sleep US] [--inject-measuring-spin NS] [--inject-every K]\n"
	"       " PROG " selftest\n"
	"Known costs at known places, for validating the breakdown (workloads with the\n"
	"flag \"inject\" in `" PROG " list`: the two-sided ping-pongs):\n"
	"  --inject-peer-spin NS      the peer spins NS ns in user space (clock reads, no\n"
	"                             syscall) after receiving, before replying\n"
	"  --inject-peer-syscalls N   the peer makes N null syscalls (getppid) before replying\n"
	"  --inject-peer-sleep US     the peer sleeps US us (clock_nanosleep, timer slack\n"
	"                             1 ns) before replying\n"
	"  --inject-measuring-spin NS the measuring side spins NS ns in user space right\n"
	"                             after sending, before it waits for the reply\n"
	"  --inject-every K           only into every K-th message of each side, counted\n"
	"                             from the first (warm-up included): message m gets it\n"
	"                             when m mod K = K - 1 (baseline and injection in one run)\n"
	"Every run first times 200 getppid() calls on the measuring thread (workload.json\n"
	"entry_calibration), for the analysis of traced runs.\n"
	"Warnings go to DIR/workload.json, not to stderr, which carries only the error line.\n";

static void die_usage(const char *msg)
{
	/* The message quotes arguments as given: a newline in one must not make a second line. */
	fputs(PROG ": ", stderr);
	for (; *msg; msg++)
		fputc((unsigned char)*msg < 0x20 ? '?' : *msg, stderr);
	fputc('\n', stderr);
	exit(WL_FAIL_USAGE);
}

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
					      "--inject-measuring-spin", "--inject-every" };
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

/* ---- JSON output ---- */

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

static void json_metrics(FILE *f, const struct workload *w)
{
	fputc('[', f);
	for (unsigned m = 0; m < drv_nmetrics(w); m++) {
		fputs(m ? ", " : "", f);
		json_str(f, w->metrics[m]);
	}
	fputc(']', f);
}

static void json_derived(FILE *f, const struct workload *w)
{
	const char *p = w->derived;
	int first = 1;

	fputc('{', f);
	while (p && *p) {
		char item[64], name[32], from[32];
		size_t k = strcspn(p, ",");
		double factor;

		snprintf(item, sizeof(item), "%.*s", (int)k, p);
		if (!drv_parse_derived(item, name, sizeof(name), from, sizeof(from), &factor)) {
			fputs(first ? "" : ", ", f);
			json_str(f, name);
			fputs(": {\"from\": ", f);
			json_str(f, from);
			fprintf(f, ", \"factor\": %.17g}", factor);
			first = 0;
		}
		p += k + (p[k] == ',');
	}
	fputc('}', f);
}

static void json_list_items(FILE *f, const char *list)
{
	int first = 1;

	fputc('[', f);
	while (list && *list) {
		size_t k = strcspn(list, ",");
		char item[64];

		snprintf(item, sizeof(item), "%.*s", (int)k, list);
		fputs(first ? "" : ", ", f);
		json_str(f, item);
		first = 0;
		list += k + (list[k] == ',');
	}
	fputc(']', f);
}

static const struct { unsigned bit; const char *name; } flag_names[] = {
	{ WL_SIZE, "size" }, { WL_PROCS, "procs" }, { WL_FRESH, "fresh" },
	{ WL_NEEDS_ROOT, "needs_root" }, { WL_CONTAINERS, "containers" }, { WL_SPINS, "spins" },
	{ WL_SAME_CPU_DEF, "same_cpu_default" }, { WL_SINGLE, "single" }, { WL_INJECT, "inject" },
};

static int cmd_list(void)
{
	FILE *f = stdout;

	fputs("{\"workloads\": [", f);
	for (const struct workload *const *wp = workloads; *wp; wp++) {
		const struct workload *w = *wp;
		int first = 1;

		fputs(wp == workloads ? "\n  {" : ",\n  {", f);
		fputs("\"name\": ", f);
		json_str(f, w->name);
		fputs(", \"summary\": ", f);
		json_str(f, w->summary);
		fputs(", \"seed\": ", f);
		json_str(f, w->seed);
		fputs(", \"metrics\": ", f);
		json_metrics(f, w);
		fputs(", \"primary_metric\": ", f);
		json_str(f, w->metrics[0]);
		fputs(", \"derived\": ", f);
		json_derived(f, w);
		fputs(", \"modes\": ", f);
		json_list_items(f, w->modes);
		fputs(", \"flags\": [", f);
		for (size_t k = 0; k < sizeof(flag_names) / sizeof(flag_names[0]); k++)
			if (w->flags & flag_names[k].bit) {
				fputs(first ? "" : ", ", f);
				json_str(f, flag_names[k].name);
				first = 0;
			}
		fprintf(f, "], \"max_size\": %llu, \"default_placement\": ",
			(unsigned long long)(w->max_size && w->max_size < DRV_MAX_SIZE ? w->max_size : DRV_MAX_SIZE));
		json_str(f, w->flags & (WL_SINGLE | WL_SAME_CPU_DEF) ? "same-cpu" : "cross-cpu");
		fputc('}', f);
	}
	fputs("\n]}\n", f);
	if (fflush(f) || ferror(f)) {
		fprintf(stderr, PROG ": cannot write the list: %s\n", strerror(errno));
		return 1;
	}
	return 0;
}

/* ---- run ---- */

struct outcome {
	const char *status;        /* complete, interrupted, failed */
	char error[320];
	char warnings[3][320];
	int nwarnings;
	uint64_t runs_completed, iterations_completed;
};

static void add_warning(struct outcome *out, const char *w)
{
	if (w && *w && out->nwarnings < 3)
		snprintf(out->warnings[out->nwarnings++], sizeof(out->warnings[0]), "%s", w);
}

/* the copy-cost estimate for traced runs whose copy routines cannot be probed */
static struct copy_cal copy_cal;
static int have_copy_cal;
/* the entry-path calibration: timed null syscalls of the measuring thread */
static struct entry_cal entry_cal;
static int have_entry_cal;

static void json_inject(FILE *f, const struct wl_inject *in)
{
	const char *sep = "";

	if (!in->peer && !in->measuring)
		return;
	fputs(", \"inject\": {", f);
	if (in->peer_spin_ns) {
		fprintf(f, "%s\"peer_spin_ns\": %llu", sep, (unsigned long long)in->peer_spin_ns);
		sep = ", ";
	}
	if (in->peer_syscalls) {
		fprintf(f, "%s\"peer_syscalls\": %llu", sep, (unsigned long long)in->peer_syscalls);
		sep = ", ";
	}
	if (in->peer_sleep_us) {
		fprintf(f, "%s\"peer_sleep_us\": %llu", sep, (unsigned long long)in->peer_sleep_us);
		sep = ", ";
	}
	if (in->measuring_spin_ns)
		fprintf(f, "%s\"measuring_spin_ns\": %llu", sep, (unsigned long long)in->measuring_spin_ns);
	if (in->every > 1)
		fprintf(f, ", \"every\": %llu", (unsigned long long)in->every);
	fputc('}', f);
}

static void json_entry_cal(FILE *f)
{
	const struct entry_cal *e = &entry_cal;

	if (!have_entry_cal) {
		fputs("null", f);
		return;
	}
	fprintf(f, "{\"tid\": %d, \"cpu\": %d, \"syscall_nr\": %ld, \"empty_ns\": %.17g, \"empty_ns_min\": %llu,\n"
		"  \"tight\": [%llu, %llu, %d],\n  \"calls\": [",
		(int)e->tid, e->cpu, e->syscall_nr, e->empty_ns, (unsigned long long)e->empty_ns_min,
		(unsigned long long)e->tight[0], (unsigned long long)e->tight[1], ENTRY_CAL_CALLS);
	for (int i = 0; i < ENTRY_CAL_CALLS; i++)
		fprintf(f, "%s[%llu, %llu]", i ? (i % 4 ? ", " : ",\n   ") : "",
			(unsigned long long)e->calls[i][0], (unsigned long long)e->calls[i][1]);
	fputs("]}", f);
}

static int write_workload_json(const char *dir, const struct wl_ctx *c, const struct run_args *a,
			       const struct outcome *out)
{
	const struct workload *w = c->w;
	const struct wl_opts *o = c->o;
	char path[4096], tmp[4096];
	FILE *f;
	int err = 0;

	snprintf(path, sizeof(path), "%s/workload.json", dir);
	/* A new file of our own (O_EXCL, never through a link planted in the directory), renamed into place. */
	snprintf(tmp, sizeof(tmp), "%s/.workload.json.%d.tmp", dir, (int)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	f = fd < 0 ? NULL : fdopen(fd, "w");
	if (!f) {
		err = -errno;
		if (fd >= 0) {
			close(fd);
			unlink(tmp);
		}
		return err;
	}
	fputs("{\"workload\": ", f);
	json_str(f, w->name);
	fputs(", \"metrics\": ", f);
	json_metrics(f, w);
	fputs(", \"primary_metric\": ", f);
	json_str(f, w->metrics[c->primary < drv_nmetrics(w) ? c->primary : 0]);
	fputs(", \"derived\": ", f);
	json_derived(f, w);
	fprintf(f, ",\n \"params\": {\"iterations\": %llu, \"warmup\": %llu, \"runs\": %llu, \"size\": %llu, "
		"\"procs\": %s, \"fresh\": %s, \"containers\": %s, \"cpus\": [%d, %d], \"mode\": ",
		(unsigned long long)o->iterations, (unsigned long long)o->warmup, (unsigned long long)a->runs,
		(unsigned long long)o->size, o->procs ? "true" : "false", o->fresh ? "true" : "false",
		o->containers ? "true" : "false", o->cpu[0], o->cpu[1]);
	if (a->mode)
		json_str(f, a->mode);
	else
		fputs("null", f);
	json_inject(f, &o->inject);
	fputs("},\n \"mode\": ", f);
	if (c->mode_used[0])
		json_str(f, c->mode_used);
	else
		fputs("null", f);
	fputs(", \"placement\": ", f);
	json_str(f, drv_placement_name(o->placement));
	fputs(",\n \"threads\": [", f);
	for (int i = 0; i < c->nthreads; i++) {
		fputs(i ? ", " : "", f);
		fputs("{\"role\": ", f);
		json_str(f, c->threads[i].role);
		fprintf(f, ", \"pid\": %d, \"tid\": %d, \"cpu\": %d}", (int)c->threads[i].pid,
			(int)c->threads[i].tid, c->threads[i].cpu);
	}
	fprintf(f, "],\n \"runs_completed\": %llu, \"iterations_completed\": %llu, \"status\": ",
		(unsigned long long)out->runs_completed, (unsigned long long)out->iterations_completed);
	json_str(f, out->status);
	fputs(", \"error\": ", f);
	if (out->error[0])
		json_str(f, out->error);
	else
		fputs("null", f);
	fputs(",\n \"warnings\": [", f);
	for (int i = 0; i < out->nwarnings; i++) {
		fputs(i ? ", " : "", f);
		json_str(f, out->warnings[i]);
	}
	fputs("],\n \"copy_calibration\": ", f);
	if (have_copy_cal)
		fprintf(f, "{\"method\": \"rep movsb timed in user space on the measuring CPU\", "
			"\"ns_per_call\": %.4g, \"ns_per_byte\": %.4g}", copy_cal.ns_per_call, copy_cal.ns_per_byte);
	else
		fputs("null", f);
	fputs(",\n \"entry_calibration\": ", f);
	json_entry_cal(f);
	fputs(",\n \"clock\": \"CLOCK_MONOTONIC\", \"tag\": ", f);
	json_str(f, o->tag);
	fprintf(f, ",\n \"extra\": {%s}}\n", c->extra_json);
	if (fflush(f) || ferror(f))
		err = -errno;
	if (fclose(f) && !err)
		err = -errno;
	if (!err && rename(tmp, path))
		err = -errno;
	if (err)
		unlink(tmp);
	return err;
}

/* A stop signal that lands between a loop's wl_stop check and its blocking call
 * would go unnoticed; SIGALRM every 50 ms after it interrupts such a call too. */
#define STOP_NUDGE_US 50000

static void on_stop_signal(int sig)
{
	struct itimerval nudge = { { 0, STOP_NUDGE_US }, { 0, STOP_NUDGE_US } };

	drv_signal = sig;
	wl_stop = 1;
	setitimer(ITIMER_REAL, &nudge, NULL);
}

static void on_nudge(int sig)
{
}

static void install_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;   /* no SA_RESTART: a blocked read returns EINTR */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = on_nudge;
	sigaction(SIGALRM, &sa, NULL);
	/* a peer that died must show up as EPIPE, not kill the measuring side */
	signal(SIGPIPE, SIG_IGN);
}

static void stop_nudging(void)
{
	struct itimerval off = { { 0, 0 }, { 0, 0 } };

	setitimer(ITIMER_REAL, &off, NULL);
}

static const struct workload *closest(const char *name)
{
	const struct workload *best = NULL;
	size_t best_d = (size_t)-1;

	for (const struct workload *const *w = workloads; *w; w++) {
		const char *t = (*w)->name;
		size_t n = strlen(name), m = strlen(t), row[64], prev, d;

		if (n >= 63 || m >= 63)
			continue;
		for (size_t j = 0; j <= m; j++)
			row[j] = j;
		for (size_t i = 1; i <= n; i++) {
			prev = row[0];
			row[0] = i;
			for (size_t j = 1; j <= m; j++) {
				size_t cur = row[j];

				d = prev + (name[i - 1] != t[j - 1]);
				if (row[j] + 1 < d)
					d = row[j] + 1;
				if (row[j - 1] + 1 < d)
					d = row[j - 1] + 1;
				row[j] = d;
				prev = cur;
			}
		}
		if (row[m] < best_d) {
			best_d = row[m];
			best = *w;
		}
	}
	return best;
}

static volatile uint64_t *map_progress(const char *path, char *err, size_t len)
{
	struct stat st;
	void *p;
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);

	if (fd < 0 || fstat(fd, &st) || (st.st_size < 8 && ftruncate(fd, 8))) {
		snprintf(err, len, "cannot use --progress %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	p = mmap(NULL, 8, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		snprintf(err, len, "cannot map --progress %s: %s", path, strerror(errno));
		return NULL;
	}
	*(volatile uint64_t *)p = 0;
	return p;
}

/* The output directory may exist (the front end creates it and marks it INCOMPLETE)
 * but must not hold an earlier measurement. */
static int prepare_out(const char *dir, int *created, char *err, size_t len)
{
	char path[4096];
	struct stat st;

	*created = 0;
	if (strlen(dir) > 3000) {
		snprintf(err, len, "--out path is too long");
		return WL_FAIL_USAGE;
	}
	if (mkdir(dir, 0755) == 0)
		*created = 1;
	else if (errno != EEXIST) {
		snprintf(err, len, "cannot create --out %s: %s", dir, strerror(errno));
		return WL_FAIL_USAGE;
	}
	if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
		snprintf(err, len, "--out %s is not a directory", dir);
		return WL_FAIL_USAGE;
	}
	if (access(dir, W_OK | X_OK)) {
		snprintf(err, len, "cannot write into --out %s: %s", dir, strerror(errno));
		return WL_FAIL_USAGE;
	}
	snprintf(path, sizeof(path), "%s/iterations.bin", dir);
	if (access(path, F_OK) == 0) {
		snprintf(err, len, "--out %s already holds a measurement (iterations.bin)", dir);
		return WL_FAIL_USAGE;
	}
	return 0;
}

static void remove_out(const char *dir, int created)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/iterations.bin", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/workload.json", dir);
	unlink(path);
	if (created)
		rmdir(dir);
}

/* MemAvailable (what can be had without swapping), or all memory on kernels without it. */
static uint64_t available_memory(void)
{
	unsigned long long kib = 0;
	char line[128];
	FILE *f = fopen("/proc/meminfo", "re");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
			break;
	if (f)
		fclose(f);
	if (kib)
		return (uint64_t)kib << 10;
	return (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
}

static int cmd_run(int argc, char **argv)
{
	struct run_args a;
	struct wl_opts o;
	struct wl_ctx c;
	struct outcome out;
	struct iterfile itf = { .fd = -1 };
	const struct workload *w;
	cpu_set_t usable;
	char err[512], warn[256], tag[32], privdir[128], path[4096];
	unsigned nm;
	int rc = 0, created, r;
	uint64_t mem = available_memory();

	if (argc >= 1 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) {
		fputs(usage_text, stdout);
		return 0;
	}
	if (drv_parse_run(argc, argv, &a, err, sizeof(err)))
		die_usage(err);
	w = drv_find(a.name);
	if (!w) {
		const struct workload *near = closest(a.name);

		snprintf(err, sizeof(err), "unknown workload '%s'%s%s%s (see `" PROG " list`)", a.name,
			 near ? " (closest: '" : "", near ? near->name : "", near ? "')" : "");
		die_usage(err);
	}
	if (drv_check_run(w, &a, mem, err, sizeof(err)))
		die_usage(err);
	memset(&o, 0, sizeof(o));
	o.iterations = a.iterations;
	o.warmup = a.warmup;
	o.runs = (uint32_t)a.runs;
	o.size = a.size;
	o.mode = a.mode;
	o.procs = a.procs;
	o.fresh = a.fresh;
	o.containers = a.containers;
	o.inject = a.inject;
	if ((r = drv_usable_cpus(&usable))) {
		snprintf(err, sizeof(err), "cannot read the CPU affinity mask: %s", strerror(-r));
		die_usage(err);
	}
	if (drv_place(w, &a, &usable, &o, warn, sizeof(warn), err, sizeof(err)))
		die_usage(err);
	if ((w->flags & WL_NEEDS_ROOT) && geteuid() != 0) {
		snprintf(err, sizeof(err), "%s needs root (run it with sudo)", w->name);
		die_usage(err);
	}

	memset(&c, 0, sizeof(c));
	memset(&out, 0, sizeof(out));
	c.o = &o;
	c.w = w;
	nm = drv_nmetrics(w);
	add_warning(&out, warn);
	if (a.progress && !(c.progress = map_progress(a.progress, err, sizeof(err))))
		die_usage(err);
	if (prepare_out(a.out, &created, err, sizeof(err)))
		die_usage(err);
	snprintf(path, sizeof(path), "%s/iterations.bin", a.out);
	if ((r = iterfile_create(&itf, path, nm))) {
		remove_out(a.out, created);
		snprintf(err, sizeof(err), "cannot create %.300s: %s", path, strerror(-r));
		die_usage(err);
	}
	if (drv_map_arrays(&c, nm, o.iterations)) {
		remove_out(a.out, created);
		snprintf(err, sizeof(err), "cannot allocate the timestamp arrays for %llu iterations",
			 (unsigned long long)o.iterations);
		die_usage(err);
	}
	drv_make_tag(tag, sizeof(tag));
	o.tag = tag;
	drv_privdir_path(privdir, sizeof(privdir), tag);
	o.privdir = privdir;
	install_signals();

	if ((r = wl_pin(&c, 0, "measuring"))) {
		snprintf(out.error, sizeof(out.error), "cannot pin the measuring thread to CPU %d: %s",
			 o.cpu[0], strerror(-r));
		rc = WL_FAIL_USAGE;
	} else {
		/* on the measuring CPU, before the peer exists: nothing else competes */
		have_copy_cal = copy_calibrate(&copy_cal) == 0;
		/* in this thread, the measuring one, pinned as it measures; traced if the
		 * run is (the loader attached before it started us) */
		have_entry_cal = entry_calibrate(&entry_cal) == 0;
		drv_clear_error();
		r = w->setup(&c);
		if (r == WL_FAIL_USAGE) {
			snprintf(out.error, sizeof(out.error), "%s", *drv_error() ? drv_error() : "setup refused");
			rc = WL_FAIL_USAGE;
		} else if (r && !wl_stop) {
			snprintf(out.error, sizeof(out.error), "%s: setup failed: %s", w->name,
				 *drv_error() ? drv_error() : strerror(r < 0 ? -r : EIO));
			rc = 1;
		}
		for (uint32_t run = 0; !rc && !wl_stop && run < o.runs; run++) {
			uint64_t written, unrecorded;
			int e;

			if (drv_clear_arrays(&c, nm, o.iterations))
				break;
			c.run = run;
			c.done = 0;
			drv_clear_error();
			r = w->run(&c);
			e = iterfile_append_run(&itf, &c, nm, &written, &unrecorded);
			out.iterations_completed += c.done;
			if (e) {
				snprintf(out.error, sizeof(out.error), "cannot write %.200s: %s", path, strerror(-e));
				rc = 1;
			} else if (unrecorded) {
				snprintf(warn, sizeof(warn), "run %u: %llu timed slots were never recorded", run,
					 (unsigned long long)unrecorded);
				add_warning(&out, warn);
			}
			if (!rc && r && !wl_stop) {
				char death[96];

				drv_peer_death(death, sizeof(death));
				snprintf(out.error, sizeof(out.error), "%s: run %u failed after %llu iterations: %s%s%s",
					 w->name, run, (unsigned long long)c.done,
					 *drv_error() ? drv_error() : strerror(r < 0 ? -r : EIO),
					 *death ? "; " : "", death);
				rc = 1;
			}
			if (!rc && !wl_stop)
				out.runs_completed++;
		}
		w->teardown(&c);
	}
	stop_nudging();
	add_warning(&out, c.warning);
	if (c.mode_used[0] == 0 && w->modes) {
		if (a.mode)
			snprintf(c.mode_used, sizeof(c.mode_used), "%s", a.mode);
		else
			snprintf(c.mode_used, sizeof(c.mode_used), "%.*s", (int)strcspn(w->modes, ","), w->modes);
	}
	drv_privdir_remove(privdir);
	iterfile_close(&itf);
	drv_unmap_arrays(&c, nm, o.iterations);

	if (rc == WL_FAIL_USAGE) {
		remove_out(a.out, created);
		die_usage(out.error);
	}
	out.status = rc ? "failed" : wl_stop ? "interrupted" : "complete";
	if ((r = write_workload_json(a.out, &c, &a, &out))) {
		fprintf(stderr, PROG ": cannot write %s/workload.json: %s\n", a.out, strerror(-r));
		return 1;
	}
	if (rc) {
		fprintf(stderr, PROG ": %s\n", out.error);
		return rc;
	}
	if (wl_stop)
		return 128 + (drv_signal ? drv_signal : SIGINT);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		die_usage("no command given (list, run, selftest; --help shows the usage)");
	if (!strcmp(argv[1], "list") && argc == 2)
		return cmd_list();
	if (!strcmp(argv[1], "run"))
		return cmd_run(argc - 2, argv + 2);
	if (!strcmp(argv[1], "selftest") && argc == 2)
		return drv_selftest() ? 1 : 0;
	if (!strcmp(argv[1], "peer"))   /* not in the usage: the container's entry point */
		return zmq_container_peer(argc - 2, argv + 2);
	if (!strcmp(argv[1], "hog"))    /* not in the usage: the front end's CPU hog */
		return drv_hog(argc - 2, argv + 2);
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fputs(usage_text, stdout);
		return 0;
	}
	if (!strcmp(argv[1], "list") || !strcmp(argv[1], "selftest"))
		fprintf(stderr, PROG ": %s takes no arguments\n", argv[1]);
	else
		fprintf(stderr, PROG ": unknown command '%s' (commands: list, run, selftest)\n", argv[1]);
	return WL_FAIL_USAGE;
}
