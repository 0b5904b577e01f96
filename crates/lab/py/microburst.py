#!/usr/bin/env python3
"""Microburst scenario: "db" servers, the "cache" and the "api" client.

Every time is time.time_ns() (the realtime clock tcpdump stamps packets with).

  db ADDR,ADDR,... PORT REPLY_BYTES
      Listens on every ADDR:PORT; each 16-byte request gets REPLY_BYTES back. Prints READY.
  cache LISTEN_ADDR LISTEN_PORT DB_ADDR,... DB_PORT INTERVAL_MS REPLY_BYTES TRUTH_JSON
      Connects to every db, prints READY, accepts one api connection and answers its 100-byte
      requests with 100 bytes (TCP_NODELAY). While the api is connected it asks every db at
      once every INTERVAL_MS and records each burst. Writes TRUTH_JSON when the api leaves.
  api CACHE_ADDR CACHE_PORT LOCAL_ADDR PERIOD_US DURATION_MS TRUTH_JSON
      Sends a 100-byte request every PERIOD_US (open loop: a sender and a receiver thread),
      records send/reply times, then writes TRUTH_JSON.
"""
import json
import os
import selectors
import socket
import statistics
import sys
import threading
import time

REQ = 100
DB_REQ = 16


def flow(sock):
    c = sock.getsockname()
    s = sock.getpeername()
    return {"client": f"{c[0]}:{c[1]}", "server": f"{s[0]}:{s[1]}"}


def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def write_json(path, obj):
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f)
    os.replace(path + ".tmp", path)


def db_conn(conn, reply):
    with conn:
        while recv_exact(conn, DB_REQ) is not None:
            conn.sendall(reply)


def db_listen(lsock, reply):
    while True:
        conn, _ = lsock.accept()
        threading.Thread(target=db_conn, args=(conn, reply), daemon=True).start()


def db(addrs, port, reply_bytes):
    reply = b"d" * reply_bytes
    for a in addrs.split(","):
        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((a, port))
        ls.listen(16)
        threading.Thread(target=db_listen, args=(ls, reply), daemon=True).start()
    print("READY", flush=True)
    while True:
        time.sleep(3600)


class Burst:
    def __init__(self, dbs, reply_bytes):
        self.request_ns = time.time_ns()
        self.remaining = {id(s): reply_bytes for s in dbs}
        self.first = {}
        self.last = {}

    def record(self, sock, n, now):
        self.first.setdefault(id(sock), now)
        self.last[id(sock)] = now
        self.remaining[id(sock)] -= n

    def done(self):
        return all(v <= 0 for v in self.remaining.values())


def serve_api(api, pending, reply_times):
    data = api.recv(65536)
    if not data:
        return False
    pending += data
    while len(pending) >= REQ:
        req = bytes(pending[:REQ])
        del pending[:REQ]
        api.sendall(req[:8] + b"r" * (REQ - 8))
        reply_times.append(time.time_ns())
    return True


def cache(listen, lport, db_addrs, db_port, interval_ms, reply_bytes, truth):
    dbs = [socket.create_connection((a, db_port), timeout=5) for a in db_addrs.split(",")]
    for s in dbs:
        s.setblocking(False)
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((listen, lport))
    ls.listen(1)
    print("READY", flush=True)
    ls.settimeout(15)
    api, _ = ls.accept()
    api.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sel = selectors.DefaultSelector()
    sel.register(api, selectors.EVENT_READ)
    for s in dbs:
        sel.register(s, selectors.EVENT_READ)
    interval_ns = interval_ms * 1_000_000
    next_burst = time.time_ns() + interval_ns // 2
    bursts, burst, pending, api_open, replies = [], None, bytearray(), True, []
    while api_open or (burst is not None and time.time_ns() < burst.request_ns + 2_000_000_000):
        now = time.time_ns()
        if burst is None and api_open and now >= next_burst:
            burst = Burst(dbs, reply_bytes)
            for s in dbs:
                s.send(b"q" * DB_REQ)
            next_burst += interval_ns
        wait = max(0.0, (next_burst - time.time_ns()) / 1e9) if burst is None else 0.05
        for key, _ in sel.select(timeout=min(wait, 0.05)):
            s = key.fileobj
            if s is api:
                api_open = serve_api(api, pending, replies) and api_open
                if not api_open:
                    sel.unregister(api)
                continue
            data = s.recv(262144)
            if burst is not None and data:
                burst.record(s, len(data), time.time_ns())
        if burst is not None and burst.done():
            bursts.append(burst_record(burst, dbs, reply_bytes))
            burst = None
    api.close()
    write_json(truth, {
        "cache_pid": os.getpid(),
        "db_flows": [flow(s) for s in dbs],
        "reply_bytes_per_db": reply_bytes,
        "burst_interval_ns": interval_ns,
        "bursts": bursts,
        "api_replies_sent": len(replies),
    })


def burst_record(b, dbs, reply_bytes):
    return {
        "request_ns": b.request_ns,
        "start_ns": min(b.first.values()),
        "end_ns": max(b.last.values()),
        "bytes": reply_bytes * len(dbs),
        "per_db": [
            dict(flow(s), first_byte_ns=b.first[id(s)], last_byte_ns=b.last[id(s)]) for s in dbs
        ],
    }


def api_receiver(sock, out, n):
    got = 0
    while got < n:
        rep = recv_exact(sock, REQ)
        if rep is None:
            return
        now = time.time_ns()
        seq = int.from_bytes(rep[:8], "big")
        out[seq] = now
        got += 1


def api(cache_addr, port, local, period_us, duration_ms, truth):
    sock = socket.socket()
    sock.bind((local, 0))
    sock.connect((cache_addr, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    n = duration_ms * 1000 // period_us
    sent, replies = {}, {}
    rx = threading.Thread(target=api_receiver, args=(sock, replies, n), daemon=True)
    rx.start()
    t0 = time.time_ns() + 10_000_000
    for seq in range(n):
        due = t0 + seq * period_us * 1000
        delay = (due - time.time_ns()) / 1e9
        if delay > 0:
            time.sleep(delay)
        sent[seq] = (due, time.time_ns())
        sock.sendall(seq.to_bytes(8, "big") + b"a" * (REQ - 8))
    rx.join(timeout=5)
    fl = flow(sock)
    sock.close()
    reqs = []
    for seq in range(n):
        due, send_ns = sent[seq]
        rep = replies.get(seq)
        reqs.append({
            "seq": seq,
            "intended_ns": due,
            "send_ns": send_ns,
            "reply_ns": rep,
            "latency_ns": None if rep is None else rep - send_ns,
        })
    lat = [r["latency_ns"] for r in reqs if r["latency_ns"] is not None]
    median = int(statistics.median(lat)) if lat else None
    threshold = 5 * median if median else None
    slow = [r["seq"] for r in reqs if r["latency_ns"] is not None and r["latency_ns"] > threshold]
    write_json(truth, {
        "api_pid": os.getpid(),
        "api_flow": fl,
        "period_ns": period_us * 1000,
        "requests": reqs,
        "unanswered": sum(1 for r in reqs if r["reply_ns"] is None),
        "median_latency_ns": median,
        "slow_threshold_ns": threshold,
        "slow_seqs": slow,
    })


def main(argv):
    role = argv[1]
    if role == "db":
        db(argv[2], int(argv[3]), int(argv[4]))
    elif role == "cache":
        cache(argv[2], int(argv[3]), argv[4], int(argv[5]), int(argv[6]), int(argv[7]), argv[8])
    elif role == "api":
        api(argv[2], int(argv[3]), argv[4], int(argv[5]), int(argv[6]), argv[7])
    else:
        sys.exit(f"unknown role {role!r}")


if __name__ == "__main__":
    main(sys.argv)
