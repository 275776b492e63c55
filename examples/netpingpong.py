#!/usr/bin/env python3
"""A TCP or UDP ping-pong across hosts: `server` answers each message, `client` sends
--iterations messages and waits for each answer. Every message carries its sequence number,
so each one's first bytes differ (what `ipctrace merge` matches the two hosts' traces by).
--spin-us makes the server busy for that long before it answers (a known cost to recover); at
the end the server prints the median of what each spin took by its own clock.

    netpingpong.py server --proto tcp --port 7000 [--spin-us 200]
    netpingpong.py client --proto tcp --host 10.0.0.2 --port 7000 --iterations 2000
"""

import argparse
import socket
import sys
import time

SIZE = 64


def spin(us):
    """Busy for us microseconds; returns how long it took by this host's clock (ns)."""
    start = time.perf_counter_ns()
    end = start + us * 1000
    while (t := time.perf_counter_ns()) < end:
        pass
    return t - start


def said_work(work):
    work.sort()
    print(f"netpingpong server: {len(work)} answers, work median {work[len(work) // 2] if work else 0} ns", flush=True)


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        part = s.recv(n - len(buf))
        if not part:
            return None
        buf += part
    return buf


def server(args):
    kind = socket.SOCK_STREAM if args.proto == "tcp" else socket.SOCK_DGRAM
    ls = socket.socket(socket.AF_INET, kind)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", args.port))
    work = []
    if args.proto == "tcp":
        ls.listen(1)
        print("ready", flush=True)
        s, _ = ls.accept()
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while (m := recv_exact(s, SIZE)) is not None and not m.startswith(b"bye"):
            work.append(spin(args.spin_us))
            s.send(b"pong" + m[4:])
    else:
        print("ready", flush=True)
        while not (got := ls.recvfrom(SIZE))[0].startswith(b"bye"):
            m, peer = got
            work.append(spin(args.spin_us))
            ls.sendto(b"pong" + m[4:], peer)
    said_work(work)


def client(args):
    kind = socket.SOCK_STREAM if args.proto == "tcp" else socket.SOCK_DGRAM
    s = socket.socket(socket.AF_INET, kind)
    for _ in range(100):  # the server may still be starting
        try:
            s.connect((args.host, args.port))
            break
        except ConnectionRefusedError:
            time.sleep(0.05)
    else:
        sys.exit(f"netpingpong: no server at {args.host}:{args.port}")
    if args.proto == "tcp":
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.settimeout(10)
    for i in range(args.iterations):
        s.send(b"ping" + i.to_bytes(8, "little") * ((SIZE - 4) // 8) + b"\0" * ((SIZE - 4) % 8))
        if (recv_exact(s, SIZE) if args.proto == "tcp" else s.recv(SIZE)) is None:
            sys.exit("netpingpong: the server closed the connection")
    s.send(b"bye".ljust(SIZE, b"\0"))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("role", choices=("server", "client"))
    p.add_argument("--proto", choices=("tcp", "udp"), default="tcp")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=7000)
    p.add_argument("--iterations", type=int, default=1000)
    p.add_argument("--spin-us", type=int, default=0)
    args = p.parse_args()
    server(args) if args.role == "server" else client(args)


if __name__ == "__main__":
    main()
