// SPDX-License-Identifier: MIT
/* `ipcbench selftest`: unit tests of the driver helpers, each a small table
 * of inputs with the answer worked out by hand. Prints every failure and a
 * closing "N passed, N failed". */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "driver.h"
#include "iterfile.h"

static int passed, failed;

#define CHECK(cond, ...) do {                                        \
	if (cond) {                                                  \
		passed++;                                            \
	} else {                                                     \
		failed++;                                            \
		printf("FAIL %s:%d: ", __FILE__, __LINE__);          \
		printf(__VA_ARGS__);                                 \
		putchar('\n');                                       \
	}                                                            \
} while (0)

static const struct workload two_sided = {
	.name = "two", .metrics = { "rtt" }, .flags = WL_SIZE | WL_SPINS,
};
static const struct workload single = {
	.name = "one", .metrics = { "a", "b" }, .flags = WL_SINGLE, .modes = "x,y",
};
static const struct workload small = {
	.name = "small", .metrics = { "m" }, .flags = WL_SIZE | WL_FRESH, .max_size = 4096,
};
static const struct workload injectable = {
	.name = "pingpong", .metrics = { "rtt" }, .flags = WL_INJECT,
};

static int parse(struct run_args *a, char *err, size_t len, const char *line)
{
	static char copy[512];          /* a->name, a->out, ... point into it after we return */
	char *argv[32], *save = NULL;
	int argc = 0;

	snprintf(copy, sizeof(copy), "%s", line);
	for (char *t = strtok_r(copy, " ", &save); t && argc < 32; t = strtok_r(NULL, " ", &save))
		argv[argc++] = t;
	return drv_parse_run(argc, argv, a, err, len);
}

static void test_parse_u64(void)
{
	static const struct { const char *s; int suffix, ok; uint64_t v; } cases[] = {
		{ "0", 0, 1, 0 }, { "42", 0, 1, 42 }, { "18446744073709551615", 0, 1, UINT64_MAX },
		{ "18446744073709551616", 0, 0, 0 }, { "-5", 0, 0, 0 }, { "abc", 0, 0, 0 },
		{ "", 0, 0, 0 }, { "12x", 0, 0, 0 }, { "4K", 0, 0, 0 }, { "4K", 1, 1, 4096 },
		{ "4KiB", 1, 1, 4096 }, { "2M", 1, 1, 2u << 20 }, { "1G", 1, 0, 0 }, { " 1", 0, 0, 0 },
		{ "+1", 0, 0, 0 }, { "17592186044416M", 1, 0, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t v = 0;
		int ok = drv_parse_u64(cases[i].s, cases[i].suffix, &v) == 0;

		CHECK(ok == cases[i].ok && (!ok || v == cases[i].v), "parse_u64('%s', %d) ok=%d v=%llu",
		      cases[i].s, cases[i].suffix, ok, (unsigned long long)v);
	}
}

static void test_parse_run(void)
{
	static const struct { const char *line; int ok; } cases[] = {
		{ "pipe --out d", 1 },
		{ "pipe --out=d --iterations 5 --warmup 0 --runs 2 --size 4K", 1 },
		{ "pipe --out d --iterations 0", 0 },
		{ "pipe --out d --iterations -5", 0 },
		{ "pipe --out d --iterations abc", 0 },
		{ "pipe --out d --iterations 99999999999999999999", 0 },
		{ "pipe --out d --iterations 1000000001", 0 },
		{ "pipe --out d --iterations 1000000000", 1 },
		{ "pipe --out d --runs 0", 0 },
		{ "pipe --out d --runs 10001", 0 },
		{ "pipe --out d --warmup -1", 0 },
		{ "pipe --out d --size -1", 0 },
		{ "pipe --out d --size 0", 0 },
		{ "pipe --out d --same-cpu --cross-cpu", 0 },
		{ "pipe --out d --same-cpu --same-cpu", 1 },
		{ "pipe --out d --cpus 0,1 --no-pin", 0 },
		{ "pipe --out d --cpus 0,x", 0 },
		{ "pipe --out d --cpus 99999", 0 },
		{ "pipe --out d --no-such-flag", 0 },
		{ "pipe --out d --procs=1", 0 },
		{ "pipe --out d extra", 0 },
		{ "pipe", 0 },
		{ "--out d", 0 },
		{ "pipe --out", 0 },
		{ "pipe --out d --inject-peer-spin 20000 --inject-peer-syscalls 3", 1 },
		{ "pipe --out d --inject-peer-sleep=1000000 --inject-measuring-spin 1000000000", 1 },
		{ "pipe --out d --inject-peer-spin 0", 0 },
		{ "pipe --out d --inject-peer-spin -5", 0 },
		{ "pipe --out d --inject-peer-spin 1e3", 0 },
		{ "pipe --out d --inject-peer-spin 1000000001", 0 },
		{ "pipe --out d --inject-measuring-spin 1000000001", 0 },
		{ "pipe --out d --inject-peer-sleep 1000001", 0 },
		{ "pipe --out d --inject-peer-syscalls 1000001", 0 },
		{ "pipe --out d --inject-peer-syscalls", 0 },
		{ "pipe --out d --inject-peer", 0 },
	};
	struct run_args a;
	char err[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		err[0] = 0;
		int r = parse(&a, err, sizeof(err), cases[i].line);

		CHECK((r == 0) == cases[i].ok && (r == 0 || r == WL_FAIL_USAGE),
		      "parse_run('%s') = %d (%s)", cases[i].line, r, err);
		CHECK(r == 0 || (err[0] && !strchr(err, '\n')), "parse_run('%s'): one-line message", cases[i].line);
	}
	parse(&a, err, sizeof(err), "pipe --out=d --iterations 5 --warmup 0 --runs 2 --size 4K --cpus 1,0");
	CHECK(a.iterations == 5 && a.warmup == 0 && a.runs == 2 && a.size == 4096 && a.size_given &&
	      a.placement == PLACE_CPUS && a.cpus[0] == 1 && a.cpus[1] == 0 && !strcmp(a.out, "d") &&
	      !strcmp(a.name, "pipe"), "parse_run values");
	parse(&a, err, sizeof(err), "pipe --out d");
	CHECK(a.iterations == 100000 && a.warmup == 10000 && a.runs == 5 && a.size == 1 &&
	      a.placement == PLACE_CROSS && !a.placement_given, "parse_run defaults");
	CHECK(!a.inject.peer && !a.inject.measuring && !a.inject.peer_spin_ns && !a.inject.peer_syscalls &&
	      !a.inject.peer_sleep_us && !a.inject.measuring_spin_ns, "parse_run: no injection by default");
	parse(&a, err, sizeof(err), "pipe --out d --inject-peer-syscalls 7");
	CHECK(a.inject.peer && !a.inject.measuring && a.inject.peer_syscalls == 7 && !a.inject.peer_spin_ns,
	      "parse_run: peer syscalls alone");
	parse(&a, err, sizeof(err), "pipe --out d --inject-measuring-spin 500 --inject-peer-sleep 9");
	CHECK(a.inject.peer && a.inject.measuring && a.inject.measuring_spin_ns == 500 && a.inject.peer_sleep_us == 9,
	      "parse_run: measuring spin and peer sleep");
}

static void test_check_run(void)
{
	static const struct { const struct workload *w; const char *line; uint64_t mem; int ok; } cases[] = {
		{ &two_sided, "two --out d --size 64M", 0, 1 },
		{ &two_sided, "two --out d --size 65M", 0, 0 },
		{ &small, "small --out d --size 4096", 0, 1 },
		{ &small, "small --out d --size 4097", 0, 0 },
		{ &small, "small --out d --fresh", 0, 1 },
		{ &two_sided, "two --out d --fresh", 0, 0 },
		{ &two_sided, "two --out d --procs", 0, 0 },
		{ &two_sided, "two --out d --containers", 0, 0 },
		{ &single, "one --out d --size 1", 0, 1 },
		{ &single, "one --out d --size 2", 0, 0 },
		{ &single, "one --out d --mode y", 0, 1 },
		{ &single, "one --out d --mode z", 0, 0 },
		{ &two_sided, "two --out d --mode x", 0, 0 },
		/* 1 metric x 100000 x 22 B = 2.2 MB: fits in 8 MiB (half is 4), not in 4 MiB */
		{ &two_sided, "two --out d --iterations 100000", 8u << 20, 1 },
		{ &two_sided, "two --out d --iterations 100000", 4u << 20, 0 },
		{ &injectable, "pingpong --out d --inject-peer-spin 10", 0, 1 },
		{ &injectable, "pingpong --out d --inject-measuring-spin 10 --inject-peer-sleep 1", 0, 1 },
		{ &two_sided, "two --out d --inject-peer-syscalls 1", 0, 0 },
		{ &two_sided, "two --out d --inject-measuring-spin 1", 0, 0 },
		{ &single, "one --out d --inject-peer-sleep 1", 0, 0 },
	};
	struct run_args a;
	char err[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		err[0] = 0;
		CHECK(parse(&a, err, sizeof(err), cases[i].line) == 0, "parse '%s': %s", cases[i].line, err);
		int r = drv_check_run(cases[i].w, &a, cases[i].mem, err, sizeof(err));

		CHECK((r == 0) == cases[i].ok, "check_run('%s', mem %llu) = %d (%s)", cases[i].line,
		      (unsigned long long)cases[i].mem, r, err);
	}
	parse(&a, err, sizeof(err), "two --out d --inject-measuring-spin 1");
	drv_check_run(&two_sided, &a, 0, err, sizeof(err));
	CHECK(strstr(err, "two has no injection points: --inject-measuring-spin applies to pipe") && !strchr(err, '\n'),
	      "check_run names the option and the workloads that take it: '%s'", err);
}

static uint64_t elapsed(uint64_t t0)
{
	return wl_now() - t0;
}

static void test_inject(void)
{
	/* 1 s each if they ran */
	struct wl_opts o = { .inject = { .peer_spin_ns = 1000000000, .measuring_spin_ns = 1000000000,
					 .peer_sleep_us = 1000000, .peer_syscalls = 1000000 } };
	struct wl_ctx c = { .o = &o };
	uint64_t t0, d;

	/* not enabled (.peer, .measuring unset): the values are there but nothing is spent */
	t0 = wl_now();
	for (int i = 0; i < 1000; i++) {
		wl_inject_peer(&c);
		wl_inject_measuring(&c);
	}
	d = elapsed(t0);
	CHECK(d < 500000000, "1000 disabled injection points took %llu ns", (unsigned long long)d);

	o.inject = (struct wl_inject){ .peer_spin_ns = 300000, .measuring_spin_ns = 200000, .peer = 1, .measuring = 1 };
	t0 = wl_now();
	wl_inject_peer(&c);
	d = elapsed(t0);
	CHECK(d >= 300000, "peer spin of 300 us took %llu ns", (unsigned long long)d);
	t0 = wl_now();
	wl_inject_measuring(&c);
	d = elapsed(t0);
	CHECK(d >= 200000, "measuring spin of 200 us took %llu ns", (unsigned long long)d);

	o.inject = (struct wl_inject){ .peer_sleep_us = 150, .peer = 1 };
	t0 = wl_now();
	wl_inject_peer(&c);
	d = elapsed(t0);
	CHECK(d >= 150000, "peer sleep of 150 us took %llu ns", (unsigned long long)d);

	o.inject = (struct wl_inject){ .peer_syscalls = 1000, .peer = 1 };
	t0 = wl_now();
	wl_inject_peer(&c);
	d = elapsed(t0);
	CHECK(d >= 1000 * 10, "1000 null syscalls took %llu ns", (unsigned long long)d);
}

static void test_entry_calibration(void)
{
	static struct entry_cal cal;
	int ordered = 1;

	CHECK(entry_calibrate(&cal) == 0, "entry_calibrate");
	CHECK(cal.tid == gettid() && cal.syscall_nr == SYS_getppid && cal.cpu >= 0,
	      "entry calibration by tid %d (self %d), nr %ld, cpu %d", (int)cal.tid, (int)gettid(),
	      cal.syscall_nr, cal.cpu);
	for (int i = 0; i < ENTRY_CAL_CALLS; i++) {
		ordered &= cal.calls[i][0] > 0 && cal.calls[i][0] < cal.calls[i][1];
		if (i)
			ordered &= cal.calls[i][0] >= cal.calls[i - 1][1];
	}
	CHECK(ordered, "every timed call has t0 < t1, each after the one before");
	CHECK(cal.empty_ns >= (double)cal.empty_ns_min && cal.empty_ns < 1e6,
	      "empty loop: median %.1f ns, min %llu ns", cal.empty_ns, (unsigned long long)cal.empty_ns_min);
}

static void test_parse_hog(void)
{
	static const struct { const char *line; int ok, cpu, nice; } cases[] = {
		{ "--cpu 1", 1, 1, 0 },
		{ "--cpu 0 --nice 19", 1, 0, 19 },
		{ "--nice -20 --cpu 3", 1, 3, -20 },
		{ "", 0, 0, 0 },
		{ "--nice 5", 0, 0, 0 },
		{ "--cpu", 0, 0, 0 },
		{ "--cpu -1", 0, 0, 0 },
		{ "--cpu x", 0, 0, 0 },
		{ "--cpu 1 --nice 20", 0, 0, 0 },
		{ "--cpu 1 --nice -21", 0, 0, 0 },
		{ "--cpu 1 --nice 1.5", 0, 0, 0 },
		{ "--cpu 1 extra", 0, 0, 0 },
	};
	char copy[128], *argv[8], *save = NULL, err[256];
	int cpu, nice_value;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int argc = 0;

		snprintf(copy, sizeof(copy), "%s", cases[i].line);
		for (char *t = strtok_r(copy, " ", &save); t && argc < 8; t = strtok_r(NULL, " ", &save))
			argv[argc++] = t;
		err[0] = 0;
		int r = drv_parse_hog(argc, argv, &cpu, &nice_value, err, sizeof(err));

		CHECK((r == 0) == cases[i].ok && (r == 0 || (r == WL_FAIL_USAGE && err[0] && !strchr(err, '\n'))),
		      "parse_hog('%s') = %d (%s)", cases[i].line, r, err);
		CHECK(r || (cpu == cases[i].cpu && nice_value == cases[i].nice), "parse_hog('%s') -> cpu %d nice %d",
		      cases[i].line, cpu, nice_value);
	}
}

static void test_place(void)
{
	static const struct {
		const struct workload *w; const char *line; int ncpus, ok, cpu0, cpu1;
		enum wl_placement placement; int warns;
	} cases[] = {
		{ &two_sided, "two --out d", 2, 1, 0, 1, PLACE_CROSS, 0 },
		{ &two_sided, "two --out d --same-cpu", 2, 1, 0, 0, PLACE_SAME, 1 },   /* spins */
		{ &two_sided, "two --out d --cpus 1,0", 2, 1, 1, 0, PLACE_CPUS, 0 },
		{ &two_sided, "two --out d --cpus 0,5", 2, 0, 0, 0, PLACE_CPUS, 0 },
		{ &two_sided, "two --out d --cpus 1", 2, 0, 0, 0, PLACE_CPUS, 0 },
		{ &two_sided, "two --out d --no-pin", 2, 1, -1, -1, PLACE_NONE, 0 },
		{ &two_sided, "two --out d", 1, 1, 0, 0, PLACE_SAME, 1 },
		{ &single, "one --out d", 2, 1, 0, -1, PLACE_SAME, 0 },
		{ &single, "one --out d --cpus 1", 2, 1, 1, -1, PLACE_CPUS, 0 },
		{ &single, "one --out d --cpus 1,0", 2, 1, 1, -1, PLACE_CPUS, 1 },
		{ &single, "one --out d --cpus 2", 2, 0, 0, 0, PLACE_CPUS, 0 },
	};
	struct run_args a;
	struct wl_opts o;
	cpu_set_t usable;
	char err[256], warn[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		CPU_ZERO(&usable);
		for (int k = 0; k < cases[i].ncpus; k++)
			CPU_SET(k, &usable);
		parse(&a, err, sizeof(err), cases[i].line);
		memset(&o, 0, sizeof(o));
		err[0] = 0;
		int r = drv_place(cases[i].w, &a, &usable, &o, warn, sizeof(warn), err, sizeof(err));

		CHECK((r == 0) == cases[i].ok, "place('%s', %d CPUs) = %d (%s)", cases[i].line, cases[i].ncpus, r, err);
		if (r || !cases[i].ok)
			continue;
		CHECK(o.cpu[0] == cases[i].cpu0 && o.cpu[1] == cases[i].cpu1 && o.placement == cases[i].placement &&
		      !!warn[0] == cases[i].warns, "place('%s', %d CPUs) -> %d,%d %s warn='%s'", cases[i].line,
		      cases[i].ncpus, o.cpu[0], o.cpu[1], drv_placement_name(o.placement), warn);
	}
}

static void test_derived_and_lists(void)
{
	char name[32], from[32];
	double f = 0;

	CHECK(drv_parse_derived("one_way=rtt/2", name, sizeof(name), from, sizeof(from), &f) == 0 &&
	      !strcmp(name, "one_way") && !strcmp(from, "rtt") && f == 0.5, "derived one_way=rtt/2");
	CHECK(drv_parse_derived("x=y*4", name, sizeof(name), from, sizeof(from), &f) == 0 && f == 4.0,
	      "derived x=y*4");
	CHECK(drv_parse_derived("x=y", name, sizeof(name), from, sizeof(from), &f) != 0, "derived without factor");
	CHECK(drv_parse_derived("=y/2", name, sizeof(name), from, sizeof(from), &f) != 0, "derived without name");
	CHECK(drv_parse_derived("x=y/0", name, sizeof(name), from, sizeof(from), &f) != 0, "derived /0");
	CHECK(drv_list_has("lock,handoff", "handoff") && drv_list_has("lock,handoff", "lock") &&
	      !drv_list_has("lock,handoff", "loc") && !drv_list_has(NULL, "lock"), "list_has");
}

static void test_names(void)
{
	struct wl_opts o = { .tag = "123-0000abcd" };   /* privdir: set below, before its first use */
	struct wl_ctx c = { .o = &o };
	char buf[64], tiny[8], tag[32], dir[128], f[200];
	struct stat st;

	wl_posix_name(&c, "sem0", buf, sizeof(buf));
	CHECK(!strcmp(buf, "/ipctrace-123-0000abcd-sem0"), "posix name '%s'", buf);
	wl_posix_name(&c, "sem0", tiny, sizeof(tiny));
	CHECK(strlen(tiny) == sizeof(tiny) - 1, "posix name truncated, terminated");

	drv_make_tag(tag, sizeof(tag));
	CHECK(strchr(tag, '-') && atoi(tag) == getpid() && strlen(strchr(tag, '-')) == 9, "tag '%s'", tag);
	drv_privdir_path(dir, sizeof(dir), tag);
	o.privdir = dir;
	CHECK(stat(dir, &st) != 0, "private dir %s not there before first use", dir);
	drv_clear_error();
	wl_path(&c, "sock", f, sizeof(f));
	CHECK(!strncmp(f, dir, strlen(dir)) && !strcmp(f + strlen(dir), "/sock"), "path '%s'", f);
	CHECK(stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700 && !*drv_error(),
	      "wl_path made %s with mode 0700", dir);
	wl_path(&c, "fifo", f, sizeof(f));
	CHECK(!*drv_error(), "second wl_path accepts the existing directory");
	close(open(f, O_CREAT | O_WRONLY, 0600));
	chmod(dir, 0755);
	wl_path(&c, "x", f, sizeof(f));
	CHECK(*drv_error(), "a directory others can read is refused");
	drv_clear_error();
	drv_privdir_remove(dir);
	CHECK(stat(dir, &st) != 0 && errno == ENOENT, "private dir removed with its files");
}

static void test_record(void)
{
	struct wl_opts o = { .iterations = 5, .warmup = 3, .runs = 2 };
	volatile uint64_t progress = 0;
	struct wl_ctx c = { .o = &o, .w = &single, .progress = &progress };

	CHECK(drv_map_arrays(&c, 2, o.iterations) == 0, "map arrays");
	CHECK(drv_clear_arrays(&c, 2, o.iterations) == 0, "clear arrays");
	c.run = 1;
	for (uint64_t i = 0; i < 9; i++)   /* 3 warm-up, 5 timed, 1 beyond the end */
		wl_record(&c, 0, i, 100 + i, 200 + i);
	wl_record(&c, 1, 4, 1000, 1001);
	wl_record(&c, 2, 4, 1000, 1001);   /* "single" has two metrics: ignored, no overflow */
	CHECK(c.t0[0] == 103 && c.t1[0] == 203 && c.t0[4] == 107, "warm-up dropped: first slot t0=%llu",
	      (unsigned long long)c.t0[0]);
	CHECK(c.done == 5 && progress == 10, "done=%llu progress=%llu", (unsigned long long)c.done,
	      (unsigned long long)progress);
	CHECK(c.t0[5 + 1] == 1000 && c.t1[5] == 0, "metric 1 slot 1 set, slot 0 empty");
	CHECK(c.tid[0] == (uint32_t)gettid() && c.cpu[0] == (uint16_t)sched_getcpu(), "tid and cpu recorded");
	drv_unmap_arrays(&c, 2, o.iterations);
}

static void test_iterfile(void)
{
	struct wl_opts o = { .iterations = 3, .warmup = 0, .runs = 2 };
	struct wl_ctx c = { .o = &o, .w = &single };
	struct iterfile f, again;
	struct iter_file_header h;
	struct iter_rec r[16];
	char path[] = "/tmp/ipcbench-selftest-XXXXXX";
	uint64_t written, unrecorded, total = 0;
	int fd = mkstemp(path);

	CHECK(fd >= 0, "mkstemp");
	close(fd);
	unlink(path);
	CHECK(iterfile_create(&f, AT_FDCWD, path, 2) == 0, "iterfile_create");
	CHECK(iterfile_create(&again, AT_FDCWD, path, 2) == -EEXIST, "iterfile_create refuses an existing file");
	drv_map_arrays(&c, 2, o.iterations);
	for (uint32_t run = 0; run < 2; run++) {
		drv_clear_arrays(&c, 2, o.iterations);
		c.run = run;
		/* metric 0 at 10,30,50; metric 1 at 20,40,(hole in run 1 at iteration 1),60 */
		for (uint64_t i = 0; i < 3; i++) {
			wl_record(&c, 0, i, 1000 * run + 10 + 20 * i, 1000 * run + 15 + 20 * i);
			if (!(run == 1 && i == 1))
				wl_record(&c, 1, i, 1000 * run + 20 + 20 * i, 1000 * run + 25 + 20 * i);
		}
		CHECK(iterfile_append_run(&f, &c, 2, &written, &unrecorded) == 0, "append run %u", run);
		CHECK(written == (run ? 5u : 6u) && unrecorded == (run ? 1u : 0u),
		      "run %u: written %llu, unrecorded %llu", run, (unsigned long long)written,
		      (unsigned long long)unrecorded);
		total += written;
	}
	iterfile_close(&f);
	drv_unmap_arrays(&c, 2, o.iterations);

	fd = open(path, O_RDONLY);
	CHECK(read(fd, &h, sizeof(h)) == sizeof(h) && !memcmp(h.magic, ITER_FILE_MAGIC, 8) &&
	      h.version == ITER_FILE_VERSION && h.rec_size == 40 && h.count == total && h.nmetrics == 2,
	      "header: count %llu", (unsigned long long)h.count);
	CHECK(read(fd, r, sizeof(r)) == (ssize_t)(total * sizeof(r[0])), "record bytes");
	close(fd);
	unlink(path);
	int in_order = 1;
	for (uint64_t k = 0; k < total; k++) {
		in_order &= r[k].seq == k && r[k].t_end_ns == r[k].t_start_ns + 5;
		if (k)
			in_order &= r[k].t_start_ns > r[k - 1].t_start_ns;
	}
	CHECK(in_order, "records in time order with consecutive seq");
	CHECK(r[1].metric == 1 && r[1].iteration == 0 && r[2].metric == 0 && r[2].iteration == 1 &&
	      r[6].run == 1 && r[6].t_start_ns == 1010 && r[8].metric == 0 && r[8].iteration == 1 &&
	      r[9].metric == 0 && r[9].iteration == 2 && r[10].metric == 1 && r[10].iteration == 2,
	      "merged order of metrics and iterations, hole skipped");
}

static void test_full_io(void)
{
	int p[2];
	char out[8] = "abcdefg", in[8] = { 0 };

	CHECK(pipe(p) == 0, "pipe");
	CHECK(wl_write_full(p[1], out, 8) == 0 && wl_read_full(p[0], in, 8) == 0 && !memcmp(in, out, 8),
	      "write_full/read_full round trip");
	close(p[1]);
	CHECK(wl_read_full(p[0], in, 1) == -EPIPE, "read_full at EOF gives -EPIPE");
	close(p[0]);
}

struct peer_report {
	volatile int cpu, sigint_ignored, blocked, done;
	volatile long slack;
};

static int report_peer(struct wl_ctx *c, void *arg)
{
	struct peer_report *r = arg;
	struct sigaction sa;

	sigaction(SIGINT, NULL, &sa);
	r->cpu = sched_getcpu();
	r->slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
	r->sigint_ignored = sa.sa_handler == SIG_IGN;
	r->done = 1;
	sleep(30);   /* until wl_reap's SIGKILL; the bound only matters if that fails */
	return 0;
}

static int report_thread(struct wl_ctx *c, void *arg)
{
	struct peer_report *r = arg;
	sigset_t mask;

	pthread_sigmask(SIG_BLOCK, NULL, &mask);
	r->cpu = sched_getcpu();
	r->slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
	r->blocked = sigismember(&mask, SIGINT) && sigismember(&mask, SIGTERM);
	r->done = 1;
	return 0;
}

static void test_peers(void)
{
	cpu_set_t usable;
	int last = 0;

	drv_usable_cpus(&usable);
	for (int i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, &usable))
			last = i;
	struct wl_opts o = { .cpu = { -1, last } };
	struct wl_ctx c = { .o = &o };
	struct peer_report *r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pthread_t th;

	CHECK(r != MAP_FAILED, "shared page");
	if (r == MAP_FAILED)
		return;
	memset(r, 0, sizeof(*r));
	pid_t pid = wl_fork_peer(&c, report_peer, r);
	CHECK(pid > 0, "wl_fork_peer: %d", pid);
	for (int i = 0; i < 2000 && !r->done; i++)
		usleep(1000);
	CHECK(r->done && r->cpu == last && r->sigint_ignored, "forked peer on CPU %d (want %d), SIGINT ignored %d",
	      r->cpu, last, r->sigint_ignored);
	CHECK(r->slack == prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0), "forked peer keeps the timer slack without a sleep to inject");
	CHECK(c.nthreads == 1 && !strcmp(c.threads[0].role, "peer") && c.threads[0].pid == pid &&
	      c.threads[0].cpu == last, "forked peer recorded");
	kill(pid, SIGINT);
	usleep(20000);
	CHECK(waitpid(pid, NULL, WNOHANG) == 0, "forked peer survives SIGINT");
	wl_reap(pid);
	CHECK(kill(pid, 0) != 0 && errno == ESRCH, "wl_reap killed and reaped the peer");

	memset(r, 0, sizeof(*r));
	o.inject.peer_sleep_us = 100;
	o.inject.peer = 1;
	CHECK(wl_start_thread(&c, report_thread, r, &th) == 0, "wl_start_thread");
	pthread_join(th, NULL);
	o.inject = (struct wl_inject){ 0 };
	CHECK(r->done && r->cpu == last && r->blocked, "peer thread on CPU %d (want %d), stop signals blocked %d",
	      r->cpu, last, r->blocked);
	CHECK(r->slack == 1, "a peer that sleeps has 1 ns of timer slack, not %ld", r->slack);
	CHECK(c.nthreads == 2 && c.threads[1].tid > 0 && c.threads[1].tid != getpid() && c.threads[1].cpu == last,
	      "peer thread recorded with its tid");
	munmap(r, sizeof(*r));
}

int drv_selftest(void)
{
	test_parse_u64();
	test_parse_run();
	test_check_run();
	test_place();
	test_derived_and_lists();
	test_names();
	test_record();
	test_iterfile();
	test_full_io();
	test_peers();
	test_inject();
	test_entry_calibration();
	test_parse_hog();
	printf("%d passed, %d failed\n", passed, failed);
	return failed;
}
