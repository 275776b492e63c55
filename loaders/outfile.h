/* SPDX-License-Identifier: MIT */
/* Files the tracer writes into the results directory, which another user may be able to
 * write (the one ipctrace runs for under sudo): every file is made anew through the
 * directory's descriptor with O_CREAT | O_EXCL | O_NOFOLLOW under a unique name, then
 * renamed over its final name in that directory, so no name planted there (a link, a FIFO)
 * is ever followed or opened. See analysis/store/safeio.py for the whole model. */
#ifndef OUTFILE_H
#define OUTFILE_H
#include <stdio.h>
#include <sys/types.h>

/* Every file made from now on is given to uid:gid at once (through its descriptor): the
 * invoking user's under sudo, so that nothing root-owned is left in their directory even if
 * we are killed before the front end could hand it over. */
void outfile_set_owner(uid_t uid, gid_t gid);
/* A directory made for the results (its descriptor) given to the owner, if one is set: 0 or -1 with errno. */
int outfile_give_dir(int dirfd);
/* A new file ".NAME.<random>.tmp" in dirfd for writing; its name goes into tmp. NULL with errno. */
FILE *outfile_create(int dirfd, const char *name, char *tmp, size_t len);
/* Close f and rename tmp over name in dirfd: 0, or -errno with tmp removed. */
int outfile_commit(int dirfd, FILE *f, const char *tmp, const char *name);
/* A new file NAME itself in dirfd (O_EXCL: refused if anything has that name); fd or -1 with errno. */
int outfile_create_final(int dirfd, const char *name);
/* The same, open for reading too (a file to map shared: ipcbench's --progress counter). */
int outfile_create_final_rw(int dirfd, const char *name);
#endif
