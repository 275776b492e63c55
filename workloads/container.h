/* SPDX-License-Identifier: MIT */
/*
 * --containers: a peer run in a rootful podman container, from a minimal image
 * made locally of this very binary and the shared libraries it loads (no
 * registry). The container is named ipctrace-<tag>, so that teardown and
 * `ipctrace clean` find it.
 */
#ifndef IPCTRACE_CONTAINER_H
#define IPCTRACE_CONTAINER_H

#include "workload.h"

#define CT_IMAGE_REPO "localhost/ipctrace-peer"

/* Root's record of the containers ipctrace started: `ipctrace clean` acts on these only. */
#define CT_STATE_DIR "/run/ipctrace/containers"

struct wl_container {
	char image[80];        /* CT_IMAGE_REPO ":" <hash of the binary and its libraries> */
	char name[64];         /* ipctrace-<tag> */
	char cidfile[128];     /* CT_STATE_DIR/<name>: podman writes the container's id there */
	int image_built;       /* 1: built by this run, 0: found and reused */
	int created;           /* podman run was started: teardown must remove the container */
	int guard_fd;          /* write end of the reaper's pipe (ct_guard), -1 without one */
};

/* 0 when podman can run containers here; else the reason as wl_fail (docker has no
 * way to join a prepared network namespace, so it is named but refused). */
int ct_check_engine(struct wl_ctx *c);
/* Find or build the peer image and name the container; 0 or wl_fail. */
int ct_prepare(struct wl_ctx *c, struct wl_container *ct);
/* Replace the calling process by `podman run` of argv (argv[0] is a path inside the
 * image) joined to the network namespace netns_path; stdout and stderr go to out_fd.
 * Returns only on failure, with -errno. */
int ct_exec_run(const struct wl_container *ct, const char *netns_path, int out_fd, char *const argv[]);
/* Start the reaper: a process of its own session that removes the container (and the conmon
 * and runtime processes podman may leave) if the driver ends without ct_remove, i.e. is
 * killed. 0 or -errno. */
int ct_guard(struct wl_container *ct);
/* Kill and remove the container if it still exists; 0 or -EIO. */
int ct_remove(const struct wl_container *ct);

/* `ipcbench peer zmq ...`: the echo side of zmq-tcp-netns inside the container. */
int zmq_container_peer(int argc, char **argv);

#endif
