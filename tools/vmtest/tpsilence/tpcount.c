// SPDX-License-Identifier: MIT
/*
 * tpcount OBJ ROUNDS: attach every program of OBJ while CPU 1 wakes tasks (a pipe ping-pong
 * pinned there), then ROUNDS pipe round trips between CPUs 0 and 1; prints each program's
 * run count (kernel.bpf_stats_enabled must be 1). When one ran none, ROUNDS more on the same
 * links say whether it stays silent ("again:"). The links go with the process.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/wait.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

static void pin(int cpu)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	sched_setaffinity(0, sizeof(s), &s);
}

/* ROUNDS round trips: this process on CPU 0, a child on CPU 1 */
static int pingpong(int rounds)
{
	int a[2], b[2], i;
	char c = 0;

	if (pipe(a) || pipe(b))
		return -1;
	if (!fork()) {
		pin(1);
		for (i = 0; i < rounds && read(a[0], &c, 1) == 1; i++)
			if (write(b[1], &c, 1) != 1)
				break;
		_exit(0);
	}
	pin(0);
	for (i = 0; i < rounds; i++)
		if (write(a[1], &c, 1) != 1 || read(b[0], &c, 1) != 1)
			break;
	wait(NULL);
	close(a[0]); close(a[1]); close(b[0]); close(b[1]);
	return 0;
}

/* Prints NAME=RUNS for each program; returns how many ran none. */
static int counts(struct bpf_object *o)
{
	struct bpf_program *p;
	int silent = 0;

	bpf_object__for_each_program(p, o) {
		struct bpf_prog_info info = { 0 };
		__u32 len = sizeof(info);

		bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &len);
		printf("%s=%llu ", bpf_program__name(p), (unsigned long long)info.run_cnt);
		silent += !info.run_cnt;
	}
	return silent;
}

int main(int argc, char **argv)
{
	struct bpf_object *o;
	struct bpf_program *p;
	int x[2], y[2], rounds;
	pid_t busy;
	char c = 0;

	if (argc != 3) {
		fprintf(stderr, "usage: tpcount OBJ ROUNDS\n");
		return 2;
	}
	rounds = atoi(argv[2]);
	o = bpf_object__open_file(argv[1], NULL);
	if (!o || bpf_object__load(o)) {
		perror("tpcount: load");
		return 1;
	}
	/* wake-ups on CPU 1 while CPU 0 attaches: try_to_wake_up runs there as its text is patched */
	if (pipe(x) || pipe(y))
		return 1;
	busy = fork();
	if (!busy) {
		pin(1);
		if (!fork()) {
			close(x[1]); close(y[0]);
			while (read(x[0], &c, 1) == 1 && write(y[1], &c, 1) == 1)
				;
			_exit(0);
		}
		close(x[0]); close(y[1]);
		while (write(x[1], &c, 1) == 1 && read(y[0], &c, 1) == 1)
			;
		_exit(0);
	}
	close(x[0]); close(x[1]); close(y[0]); close(y[1]);
	pin(0);
	usleep(200000);
	bpf_object__for_each_program(p, o)
		if (!bpf_program__attach(p)) {
			fprintf(stderr, "tpcount: attach %s failed\n", bpf_program__name(p));
			return 1;
		}
	kill(busy, SIGKILL);
	waitpid(busy, NULL, 0);
	pingpong(rounds);
	if (counts(o)) {
		printf("again: ");
		pingpong(rounds);
		counts(o);
	}
	printf("\n");
	return 0;
}
