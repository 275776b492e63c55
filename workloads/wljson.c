// SPDX-License-Identifier: MIT
/* The driver's JSON: the case table (`ipcbench list`) and DIR/workload.json of a run. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "driver.h"
#include "json.h"
#include "outfile.h"

#define PROG "ipcbench"

static void json_metrics(FILE *f, const struct workload *w)
{
	fputc('[', f);
	for (unsigned m = 0; m < drv_nmetrics(w); m++) {
		fputs(m ? ", " : "", f);
		json_str(f, w->metrics[m], SIZE_MAX);
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
			json_str(f, name, SIZE_MAX);
			fputs(": {\"from\": ", f);
			json_str(f, from, SIZE_MAX);
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
		json_str(f, item, SIZE_MAX);
		first = 0;
		list += k + (list[k] == ',');
	}
	fputc(']', f);
}

static const struct { unsigned bit; const char *name; } flag_names[] = {
	{ WL_SIZE, "size" }, { WL_PROCS, "procs" }, { WL_FRESH, "fresh" },
	{ WL_NEEDS_ROOT, "needs_root" }, { WL_CONTAINERS, "containers" }, { WL_SPINS, "spins" },
	{ WL_SAME_CPU_DEF, "same_cpu_default" }, { WL_SINGLE, "single" }, { WL_INJECT, "inject" },
	{ WL_NO_COPY, "no_copy" },
};

int list_json(void)
{
	FILE *f = stdout;

	fputs("{\"workloads\": [", f);
	for (const struct workload *const *wp = workloads; *wp; wp++) {
		const struct workload *w = *wp;
		int first = 1;

		fputs(wp == workloads ? "\n  {" : ",\n  {", f);
		fputs("\"name\": ", f);
		json_str(f, w->name, SIZE_MAX);
		fputs(", \"summary\": ", f);
		json_str(f, w->summary, SIZE_MAX);
		fputs(", \"seed\": ", f);
		json_str(f, w->seed, SIZE_MAX);
		fputs(", \"metrics\": ", f);
		json_metrics(f, w);
		fputs(", \"primary_metric\": ", f);
		json_str(f, w->metrics[0], SIZE_MAX);
		fputs(", \"derived\": ", f);
		json_derived(f, w);
		fputs(", \"modes\": ", f);
		json_list_items(f, w->modes);
		fputs(", \"mode_help\": ", f);
		json_str(f, w->mode_help ? w->mode_help : "", SIZE_MAX);
		fputs(", \"flags\": [", f);
		for (size_t k = 0; k < sizeof(flag_names) / sizeof(flag_names[0]); k++)
			if (w->flags & flag_names[k].bit) {
				fputs(first ? "" : ", ", f);
				json_str(f, flag_names[k].name, SIZE_MAX);
				first = 0;
			}
		fprintf(f, "], \"max_size\": %llu, \"default_placement\": ",
			(unsigned long long)(w->max_size && w->max_size < DRV_MAX_SIZE ? w->max_size : DRV_MAX_SIZE));
		json_str(f, w->flags & (WL_SINGLE | WL_SAME_CPU_DEF) ? "same-cpu" : "cross-cpu", SIZE_MAX);
		fputc('}', f);
	}
	fputs("\n]}\n", f);
	if (fflush(f) || ferror(f)) {
		fprintf(stderr, PROG ": cannot write the list: %s\n", strerror(errno));
		return 1;
	}
	return 0;
}

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

void json_entry_cal(FILE *f, const struct entry_cal *e)
{
	if (!e) {
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

int write_workload_json(int dirfd, const struct wl_ctx *c, const struct run_args *a,
			const struct run_outcome *out, const struct copy_cal *copy_cal, const struct entry_cal *entry_cal)
{
	const struct workload *w = c->w;
	const struct wl_opts *o = c->o;
	char tmp[64];
	FILE *f;

	/* A new file of our own (O_EXCL | O_NOFOLLOW, never through a link planted in the
	 * directory; --owner's at once), renamed into place: loaders/outfile.h. */
	f = outfile_create(dirfd, "workload.json", tmp, sizeof(tmp));
	if (!f)
		return -errno;
	fputs("{\"workload\": ", f);
	json_str(f, w->name, SIZE_MAX);
	fputs(", \"metrics\": ", f);
	json_metrics(f, w);
	fputs(", \"primary_metric\": ", f);
	json_str(f, w->metrics[c->primary < drv_nmetrics(w) ? c->primary : 0], SIZE_MAX);
	fputs(", \"derived\": ", f);
	json_derived(f, w);
	fprintf(f, ",\n \"params\": {\"iterations\": %llu, \"warmup\": %llu, \"runs\": %llu, \"size\": %llu, "
		"\"procs\": %s, \"fresh\": %s, \"containers\": %s, \"cpus\": [%d, %d], \"mode\": ",
		(unsigned long long)o->iterations, (unsigned long long)o->warmup, (unsigned long long)a->runs,
		(unsigned long long)o->size, o->procs ? "true" : "false", o->fresh ? "true" : "false",
		o->containers ? "true" : "false", o->cpu[0], o->cpu[1]);
	if (a->mode)
		json_str(f, a->mode, SIZE_MAX);
	else
		fputs("null", f);
	json_inject(f, &o->inject);
	fputs("},\n \"mode\": ", f);
	if (c->mode_used[0])
		json_str(f, c->mode_used, SIZE_MAX);
	else
		fputs("null", f);
	/* Two sides pinned by --cpus are on one CPU or on two: say which, as --same-cpu and
	 * --cross-cpu would (the CPUs themselves are in "threads" and params.cpus). */
	enum wl_placement shown = o->placement;
	if (shown == PLACE_CPUS && o->cpu[1] >= 0)
		shown = o->cpu[0] == o->cpu[1] ? PLACE_SAME : PLACE_CROSS;
	fputs(", \"placement\": ", f);
	json_str(f, drv_placement_name(shown), SIZE_MAX);
	/* The breakdown estimates a copy for each data syscall unless the workload says none copies. */
	fprintf(f, ", \"copies\": %s", w->flags & WL_NO_COPY ? "false" : "true");
	fputs(",\n \"threads\": [", f);
	for (int i = 0; i < c->nthreads; i++) {
		fputs(i ? ", " : "", f);
		fputs("{\"role\": ", f);
		json_str(f, c->threads[i].role, SIZE_MAX);
		fprintf(f, ", \"pid\": %d, \"tid\": %d, \"cpu\": %d}", (int)c->threads[i].pid,
			(int)c->threads[i].tid, c->threads[i].cpu);
	}
	fputs("]", f);
	if (c->break_iteration)
		fprintf(f, ",\n \"break\": {\"run\": %u, \"iteration\": %llu, \"latency_ns\": %llu, \"threshold_ns\": %llu}",
			c->break_run, (unsigned long long)(c->break_iteration - 1),
			(unsigned long long)c->break_latency, (unsigned long long)c->o->break_ns);
	fprintf(f, ",\n \"runs_completed\": %llu, \"iterations_completed\": %llu, \"status\": ",
		(unsigned long long)out->runs_completed, (unsigned long long)out->iterations_completed);
	json_str(f, out->status, SIZE_MAX);
	fputs(", \"error\": ", f);
	if (out->error[0])
		json_str(f, out->error, SIZE_MAX);
	else
		fputs("null", f);
	fputs(",\n \"warnings\": [", f);
	for (int i = 0; i < out->nwarnings; i++) {
		fputs(i ? ", " : "", f);
		json_str(f, out->warnings[i], SIZE_MAX);
	}
	fputs("],\n \"copy_calibration\": ", f);
	if (copy_cal)
		fprintf(f, "{\"method\": \"rep movsb timed in user space on the measuring CPU\", "
			"\"ns_per_call\": %.4g, \"ns_per_byte\": %.4g}", copy_cal->ns_per_call, copy_cal->ns_per_byte);
	else
		fputs("null", f);
	fputs(",\n \"entry_calibration\": ", f);
	json_entry_cal(f, entry_cal);
	fputs(",\n \"clock\": \"CLOCK_MONOTONIC\", \"tag\": ", f);
	json_str(f, o->tag, SIZE_MAX);
	fprintf(f, ",\n \"extra\": {%s}}\n", c->extra_json);
	return outfile_commit(dirfd, f, tmp, "workload.json");
}
