// SPDX-License-Identifier: MIT
/* --containers with podman: the peer image is this binary, the shared libraries ldd
 * names and the dynamic loader, imported from a tar (`podman import`, no registry)
 * and tagged with a hash of those files, so a rebuilt binary gets a new image and an
 * unchanged one reuses its image. Every podman call runs without a shell. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "container.h"

#define CT_MAX_FILES 64
#define EXIT_NOT_FOUND 127

/* A pipe p (close-on-exec) and a fork: the pid (0 in the child), or -errno with no pipe left. */
static pid_t fork_with_pipe(int p[2])
{
	pid_t pid;

	if (pipe2(p, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0) {
		int err = -errno;

		close(p[0]);
		close(p[1]);
		return err;
	}
	return pid;
}

/*
 * Start argv with its stdout (and its stderr if with_stderr) into a pipe whose read
 * end goes to *fd; stdin is /dev/null. Returns the pid or -errno.
 */
static pid_t spawn_reading(char *const argv[], bool with_stderr, int *fd)
{
	int p[2];
	pid_t pid;

	pid = fork_with_pipe(p);
	if (pid < 0)
		return pid;
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDONLY);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		signal(SIGINT, SIG_IGN);   /* the driver decides what an interruption stops */
		signal(SIGTERM, SIG_IGN);
		dup2(devnull, 0);
		dup2(p[1], 1);
		if (with_stderr)
			dup2(p[1], 2);
		execvp(argv[0], argv);
		_exit(EXIT_NOT_FOUND);
	}
	close(p[1]);
	*fd = p[0];
	return pid;
}

/* Run argv, its stdout and stderr into out (the last line kept, NUL-terminated);
 * returns its exit status (EXIT_NOT_FOUND when it could not be executed) or -errno. */
static int run_capture(char *const argv[], char *out, size_t len)
{
	char chunk[4096];
	size_t used = 0;
	int fd, status;
	ssize_t n;
	pid_t pid;

	out[0] = 0;
	pid = spawn_reading(argv, true, &fd);
	if (pid < 0)
		return pid;
	while ((n = read(fd, chunk, sizeof(chunk))) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		/* keep the tail: the last line says why a command failed */
		if ((size_t)n >= len - 1) {
			memcpy(out, chunk + n - (len - 1), len - 1);
			used = len - 1;
		} else {
			if (used + (size_t)n > len - 1) {
				size_t drop = used + (size_t)n - (len - 1);

				memmove(out, out + drop, used - drop);
				used -= drop;
			}
			memcpy(out + used, chunk, (size_t)n);
			used += (size_t)n;
		}
	}
	close(fd);
	out[used] = 0;
	while (used && (out[used - 1] == '\n' || out[used - 1] == ' '))
		out[--used] = 0;
	if (strrchr(out, '\n'))
		memmove(out, strrchr(out, '\n') + 1, strlen(strrchr(out, '\n')));
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int ct_check_engine(struct wl_ctx *c)
{
	char *podman[] = { "podman", "info", "--format", "{{.Host.OCIRuntime.Name}}", NULL };
	char *docker[] = { "docker", "info", NULL };
	char out[200];
	int r = run_capture(podman, out, sizeof(out));

	if (r == 0)
		return 0;
	if (r != EXIT_NOT_FOUND)
		return wl_fail(c, "--containers: `podman info` fails: %s", out[0] ? out : "no message");
	r = run_capture(docker, out, sizeof(out));
	if (r == EXIT_NOT_FOUND)
		return wl_fail(c, "--containers needs podman or docker, and neither is installed");
	if (r != 0)
		return wl_fail(c, "--containers: podman is not installed, and docker is but `docker info` fails "
			       "(is its daemon running?)");
	return wl_fail(c, "--containers needs podman: docker cannot join the peer's prepared network namespace");
}

/* The files the peer needs: ldd's resolved libraries and the loader, absolute paths. */
static int needed_libraries(struct wl_ctx *c, const char *exe, char paths[][PATH_MAX], int *n)
{
	char *ldd[] = { "ldd", (char *)exe, NULL };
	char line[PATH_MAX + 128];
	int fd, status, err = 0;
	pid_t pid;
	FILE *f;

	*n = 0;
	pid = spawn_reading(ldd, false, &fd);
	if (pid < 0)
		return pid;
	f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		err = -errno;
	}
	while (f && fgets(line, sizeof(line), f)) {
		/* "\tlibzmq.so.5 => /lib/x86_64-linux-gnu/libzmq.so.5 (0x...)" or "\t/lib64/ld-linux-x86-64.so.2 (0x...)" */
		char *path = strstr(line, "=> /"), *end;

		path = path ? path + 3 : line + strspn(line, " \t");
		end = strstr(path, " (");
		if (*path != '/' || !end)
			continue;
		if (*n == CT_MAX_FILES) {
			err = wl_fail(c, "--containers: %s needs more than %d shared libraries", exe, CT_MAX_FILES);
			break;
		}
		snprintf(paths[(*n)++], PATH_MAX, "%.*s", (int)(end - path), path);
	}
	if (f)
		fclose(f);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (err)
		return err;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || *n == 0)
		return wl_fail(c, "--containers: `ldd %s` failed; it names the libraries the peer image needs", exe);
	return 0;
}

/* FNV-1a over the name and bytes of each file. */
static int hash_file(const char *path, uint64_t *h)
{
	unsigned char buf[65536];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	for (const char *s = path; *s; s++)
		*h = (*h ^ (unsigned char)*s) * 0x100000001b3ull;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < n; i++)
			*h = (*h ^ buf[i]) * 0x100000001b3ull;
	close(fd);
	return n < 0 ? -errno : 0;
}

/* CT_STATE_DIR made if missing, and found root's own (0700, not a link), in a directory of
 * root's that no one else may write (the broker made it 0755 before, for its slots): no one
 * else can add a record that `ipctrace clean` would act on. 0 or -errno. */
static int state_dir(void)
{
	const char *dirs[] = { "/run/ipctrace", CT_STATE_DIR };
	struct stat st;

	for (int i = 0; i < 2; i++) {
		if (mkdir(dirs[i], 0700) && errno != EEXIST)
			return -errno;
		if (lstat(dirs[i], &st))
			return -errno;
		if (!S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & (i ? 077 : 022)))
			return -EPERM;
	}
	return 0;
}

int ct_prepare(struct wl_ctx *c, struct wl_container *ct)
{
	static char libs[CT_MAX_FILES][PATH_MAX];
	char exe[PATH_MAX], tarpath[PATH_MAX], out[300];
	char *argv[CT_MAX_FILES + 12];
	uint64_t h = 0xcbf29ce484222325ull;
	int nlibs, err, argc = 0;
	char *slash;
	ssize_t len;

	memset(ct, 0, sizeof(*ct));
	snprintf(ct->name, sizeof(ct->name), "ipctrace-%s", c->o->tag);
	err = state_dir();
	if (err)
		return wl_fail(c, "--containers: cannot keep the record of its container in " CT_STATE_DIR ": %s",
			       strerror(-err));
	snprintf(ct->cidfile, sizeof(ct->cidfile), CT_STATE_DIR "/%s", ct->name);
	len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (len <= 0)
		return -errno;
	exe[len] = 0;
	err = needed_libraries(c, exe, libs, &nlibs);
	if (err)
		return err;
	err = hash_file(exe, &h);
	for (int i = 0; i < nlibs && !err; i++)
		err = hash_file(libs[i], &h);
	if (err)
		return wl_fail(c, "--containers: cannot read the files of the peer image: %s", strerror(-err));
	snprintf(ct->image, sizeof(ct->image), CT_IMAGE_REPO ":%016llx", (unsigned long long)h);

	char *exists[] = { "podman", "image", "exists", ct->image, NULL };
	if (run_capture(exists, out, sizeof(out)) == 0)
		return 0;

	/* the binary at /ipcbench, every library at its own path, symlinks followed */
	wl_path(c, "peer-image.tar", tarpath, sizeof(tarpath));
	slash = strrchr(exe, '/');
	*slash = 0;
	char file_opt[PATH_MAX + 8], exe_dir_opt[PATH_MAX + 16];
	snprintf(file_opt, sizeof(file_opt), "--file=%s", tarpath);
	snprintf(exe_dir_opt, sizeof(exe_dir_opt), "--directory=%s", exe);
	argv[argc++] = "tar";
	argv[argc++] = "--create";
	argv[argc++] = "--dereference";
	argv[argc++] = file_opt;
	argv[argc++] = exe_dir_opt;
	argv[argc++] = slash + 1;
	argv[argc++] = "--directory=/";
	for (int i = 0; i < nlibs; i++)
		argv[argc++] = libs[i] + 1;
	argv[argc] = NULL;
	err = run_capture(argv, out, sizeof(out));
	if (err) {
		unlink(tarpath);
		return wl_fail(c, "--containers: cannot pack the peer image: tar: %s",
			       err == EXIT_NOT_FOUND ? "not installed" : out);
	}
	char *import[] = { "podman", "import", "--quiet", tarpath, ct->image, NULL };
	err = run_capture(import, out, sizeof(out));
	unlink(tarpath);
	if (err)
		return wl_fail(c, "--containers: podman import of the peer image failed: %s", out);
	ct->image_built = 1;
	return 0;
}

int ct_exec_run(const struct wl_container *ct, const char *netns_path, int out_fd, char *const argv[])
{
	char network[PATH_MAX + 8], nofile[64], nproc[64];
	char *run[32 + 16];
	struct rlimit files, procs;
	unsigned long long pid_max = 0;
	int n = 0;
	FILE *f;

	/* Without CAP_SYS_RESOURCE the runtime cannot raise the container's limits above
	 * ours, and podman's defaults (about a million files and processes) are higher;
	 * podman itself caps its process limit at pid_max. */
	if (getrlimit(RLIMIT_NOFILE, &files) || getrlimit(RLIMIT_NPROC, &procs))
		return -errno;
	f = fopen("/proc/sys/kernel/pid_max", "re");
	if (f) {
		if (fscanf(f, "%llu", &pid_max) != 1)
			pid_max = 0;
		fclose(f);
	}
	if (pid_max && procs.rlim_max > pid_max)
		procs.rlim_max = pid_max;
	if (procs.rlim_cur > procs.rlim_max)
		procs.rlim_cur = procs.rlim_max;
	snprintf(network, sizeof(network), "ns:%s", netns_path);
	snprintf(nofile, sizeof(nofile), "nofile=%llu:%llu", (unsigned long long)files.rlim_cur,
		 (unsigned long long)files.rlim_max);
	snprintf(nproc, sizeof(nproc), "nproc=%llu:%llu", (unsigned long long)procs.rlim_cur,
		 (unsigned long long)procs.rlim_max);
	run[n++] = "podman";
	run[n++] = "run";
	run[n++] = "--rm";   /* conmon removes it when the peer exits, even without this client */
	run[n++] = "--sig-proxy=false";
	run[n++] = "--cidfile";
	run[n++] = (char *)ct->cidfile;
	run[n++] = "--name";
	run[n++] = (char *)ct->name;
	run[n++] = "--network";
	run[n++] = network;
	run[n++] = "--ulimit";
	run[n++] = nofile;
	run[n++] = "--ulimit";
	run[n++] = nproc;
	run[n++] = (char *)ct->image;
	for (int i = 0; argv[i] && n < 47; i++)
		run[n++] = argv[i];
	run[n] = NULL;
	if (dup2(out_fd, 1) < 0 || dup2(out_fd, 2) < 0)
		return -errno;
	execvp(run[0], run);
	return -errno;
}

/* The value after flag in a NUL-separated command line of len bytes, or NULL. */
static const char *cmdline_arg(const char *args, size_t len, const char *flag)
{
	for (size_t i = 0; i < len; i += strlen(args + i) + 1)
		if (!strcmp(args + i, flag) && i + strlen(flag) + 1 < len)
			return args + i + strlen(flag) + 1;
	return NULL;
}

/* SIGKILL pid and its descendants (children first found, deepest killed first). */
static void kill_tree(pid_t pid)
{
	char path[64], buf[4096];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
	f = fopen(path, "re");
	if (f) {
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		char *tok, *save = NULL;

		fclose(f);
		buf[n] = 0;
		for (tok = strtok_r(buf, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save))
			kill_tree((pid_t)atoi(tok));
	}
	kill(pid, SIGKILL);
}

/* The conmon of container name, if one still runs: podman killed while it started the
 * container leaves conmon and a `runc init` that `podman rm` forgets. */
static void kill_conmons_of(const char *name)
{
	struct dirent *d;
	DIR *proc = opendir("/proc");

	if (!proc)
		return;
	while ((d = readdir(proc))) {
		char path[300], args[8192];
		const char *n;
		ssize_t len;
		int fd;

		struct stat st;

		if (d->d_name[0] < '1' || d->d_name[0] > '9')
			continue;
		/* podman's conmon is root's: a user's process that only calls itself so is not */
		snprintf(path, sizeof(path), "/proc/%s", d->d_name);
		if (stat(path, &st) || st.st_uid != 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", d->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		len = read(fd, args, sizeof(args) - 1);
		close(fd);
		if (len <= 0)
			continue;
		args[len] = 0;
		if (strcmp(strrchr(args, '/') ? strrchr(args, '/') + 1 : args, "conmon"))
			continue;
		n = cmdline_arg(args, (size_t)len, "-n");
		if (n && !strcmp(n, name))
			kill_tree((pid_t)atoi(d->d_name));
	}
	closedir(proc);
}

static void podman_rm(const char *name)
{
	char *rm[] = { "podman", "rm", "--force", "--time", "0", "--ignore", (char *)name, NULL };
	char out[200];

	run_capture(rm, out, sizeof(out));
}

int ct_guard(struct wl_container *ct)
{
	int p[2];
	pid_t pid;
	char c;

	ct->guard_fd = -1;
	pid = fork_with_pipe(p);
	if (pid < 0)
		return pid;
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDWR);
		ssize_t n;

		/* Its own session: a terminal's Ctrl-C is the driver's to answer; it holds none of
		 * the driver's output (a reader waiting for its end would wait for this one). */
		setsid();
		signal(SIGINT, SIG_IGN);
		signal(SIGTERM, SIG_IGN);
		dup2(devnull, 0);
		dup2(devnull, 1);
		dup2(devnull, 2);
		/* nothing else of the driver's: its results directory, its progress counter */
		dup2(p[0], 3);
		fcntl(3, F_SETFD, FD_CLOEXEC);
		close_range(4, ~0U, 0);
		do
			n = read(3, &c, 1);
		while (n < 0 && errno == EINTR);
		if (n == 1)
			_exit(0);   /* the driver removed the container itself */
		/* The driver is gone without its teardown. The podman client it started got SIGTERM
		 * and may still be creating the container: let it get that far, then remove it. */
		sleep(1);
		podman_rm(ct->name);
		kill_conmons_of(ct->name);
		podman_rm(ct->name);
		unlink(ct->cidfile);
		_exit(0);
	}
	close(p[0]);
	ct->guard_fd = p[1];
	return 0;
}

int ct_remove(const struct wl_container *ct)
{
	char *rm[] = { "podman", "rm", "--force", "--time", "0", "--ignore", (char *)ct->name, NULL };
	char out[200];
	int err;

	if (!ct->created)
		return 0;
	err = run_capture(rm, out, sizeof(out)) == 0 ? 0 : -EIO;
	if (!err)
		unlink(ct->cidfile);
	if (ct->guard_fd >= 0) {
		/* the reaper has nothing left to do */
		if (write(ct->guard_fd, "d", 1) != 1)
			err = err ? err : -errno;
		close(ct->guard_fd);
	}
	return err;
}
