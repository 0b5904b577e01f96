#!/usr/bin/env python3
"""Traffic for bench/pcap.sh's capture: bulk TCP flows plus many short request/response
connections, on one host (meant to run inside a network namespace, on its loopback).

    traffic.py --addr 127.0.0.1 --bulk 2 --bulk-mbit 400 --rr-workers 4 --seconds 120 --stop FILE

In: the address to use (both ends), how many bulk flows and their paced rate each (Mbit/s),
how many request/response workers, a time limit and a stop file (traffic stops when it exists).
Out: traffic only; a one-line summary (connections, bytes) on stderr at the end.

Bulk flows: one connection each, the client writes 64 KiB chunks paced to the rate, the server
reads and discards. Request/response: each worker loops connect, send "N\\n", read N bytes of
reply, close; N cycles through 200 B, 2 KB, 20 KB and 60 KB, so the capture holds thousands of
flows with handshakes, small and multi-segment replies, and closes.
"""

import argparse
import os
import sys
import socket
import threading
import time

REPLY_SIZES = [200, 2000, 20000, 60000]
CHUNK = 65536


def serve_bulk(listener):
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=drain, args=(conn,), daemon=True).start()


def drain(conn):
    with conn:
        try:
            while conn.recv(1 << 20):
                pass
        except OSError:
            pass


def serve_rr(listener):
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=answer, args=(conn,), daemon=True).start()


def answer(conn):
    payload = b"x" * max(REPLY_SIZES)
    with conn:
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            buf = b""
            while True:
                data = conn.recv(4096)
                if not data:
                    return
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    conn.sendall(payload[: int(line)])
        except (OSError, ValueError):
            pass


def listen(addr):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, 0))
    s.listen(1024)
    return s


def bulk_client(addr, port, mbit, done):
    rate = mbit * 1e6 / 8  # bytes/s
    chunk = b"b" * CHUNK
    with socket.create_connection((addr, port)) as s:
        start = time.monotonic()
        sent = 0
        while not done.is_set():
            s.sendall(chunk)
            sent += CHUNK
            ahead = sent / rate - (time.monotonic() - start)
            if ahead > 0:
                time.sleep(ahead)
    return sent


def rr_client(addr, port, done, stats, idx):
    i = idx
    conns = 0
    while not done.is_set():
        n = REPLY_SIZES[i % len(REPLY_SIZES)]
        i += 1
        try:
            with socket.create_connection((addr, port)) as s:
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                s.sendall(b"%d\n" % n)
                got = 0
                while got < n:
                    data = s.recv(1 << 16)
                    if not data:
                        break
                    got += len(data)
            conns += 1
        except OSError:
            time.sleep(0.01)
    stats[idx] = conns


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--addr", default="127.0.0.1")
    p.add_argument("--bulk", type=int, default=2)
    p.add_argument("--bulk-mbit", type=float, default=400)
    p.add_argument("--rr-workers", type=int, default=4)
    p.add_argument("--seconds", type=float, default=120)
    p.add_argument("--stop", required=True)
    a = p.parse_args()

    bulk_l, rr_l = listen(a.addr), listen(a.addr)
    threading.Thread(target=serve_bulk, args=(bulk_l,), daemon=True).start()
    threading.Thread(target=serve_rr, args=(rr_l,), daemon=True).start()

    done = threading.Event()
    stats = {}
    threads = [
        threading.Thread(
            target=bulk_client,
            args=(a.addr, bulk_l.getsockname()[1], a.bulk_mbit, done),
            daemon=True,
        )
        for _ in range(a.bulk)
    ]
    threads += [
        threading.Thread(
            target=rr_client,
            args=(a.addr, rr_l.getsockname()[1], done, stats, w),
            daemon=True,
        )
        for w in range(a.rr_workers)
    ]
    for t in threads:
        t.start()
    deadline = time.monotonic() + a.seconds
    while time.monotonic() < deadline and not os.path.exists(a.stop):
        time.sleep(0.05)
    done.set()
    for t in threads:
        t.join(timeout=2)
    print(
        f"traffic.py: {a.bulk} bulk flows, {sum(stats.values())} request/response connections",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
