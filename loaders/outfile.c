// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include "outfile.h"

#define OUT_FLAGS (O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC)

static bool owned;
static uid_t owner_uid;
static gid_t owner_gid;

void outfile_set_owner(uid_t uid, gid_t gid)
{
	owned = true;
	owner_uid = uid;
	owner_gid = gid;
}

/* fd, given to the owner if one is set; -1 (the file removed by the caller) if that fails. */
static int give(int fd)
{
	if (fd >= 0 && owned && fchown(fd, owner_uid, owner_gid)) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

int outfile_give_dir(int dirfd)
{
	return owned && fchown(dirfd, owner_uid, owner_gid) ? -1 : 0;
}

FILE *outfile_create(int dirfd, const char *name, char *tmp, size_t len)
{
	for (int tries = 0; tries < 8; tries++) {
		unsigned int r = 0;
		FILE *f;
		int fd;

		if (getrandom(&r, sizeof(r), 0) != sizeof(r))
			r = (unsigned int)getpid() * 2654435761u + (unsigned int)tries;
		if (snprintf(tmp, len, ".%s.%08x.tmp", name, r) >= (int)len) {
			errno = ENAMETOOLONG;
			return NULL;
		}
		fd = openat(dirfd, tmp, OUT_FLAGS, 0644);
		if (fd < 0) {
			if (errno == EEXIST)
				continue;
			return NULL;
		}
		if (give(fd) < 0) {
			int e = errno;

			unlinkat(dirfd, tmp, 0);
			errno = e;
			return NULL;
		}
		f = fdopen(fd, "w");
		if (!f) {
			int e = errno;

			close(fd);
			unlinkat(dirfd, tmp, 0);
			errno = e;
		}
		return f;
	}
	errno = EEXIST;
	return NULL;
}

int outfile_commit(int dirfd, FILE *f, const char *tmp, const char *name)
{
	int err = 0;

	if (fflush(f) || ferror(f))
		err = errno ? -errno : -EIO;
	if (fclose(f) && !err)
		err = -errno;
	if (!err && renameat(dirfd, tmp, dirfd, name))
		err = -errno;
	if (err)
		unlinkat(dirfd, tmp, 0);
	return err;
}

static int create_final(int dirfd, const char *name, int flags)
{
	int fd = openat(dirfd, name, flags, 0644);

	if (fd >= 0 && give(fd) < 0) {
		int e = errno;

		unlinkat(dirfd, name, 0);
		errno = e;
		return -1;
	}
	return fd;
}

int outfile_create_final(int dirfd, const char *name)
{
	return create_final(dirfd, name, OUT_FLAGS);
}

int outfile_create_final_rw(int dirfd, const char *name)
{
	return create_final(dirfd, name, (OUT_FLAGS & ~O_WRONLY) | O_RDWR);
}
