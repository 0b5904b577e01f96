#!/usr/bin/env python3
"""Nagle scenario: a request written in two pieces without TCP_NODELAY.

Every time is time.time_ns() (the realtime clock tcpdump stamps packets with). Neither side
sets TCP_NODELAY or TCP_QUICKACK: the stall is the kernel's defaults meeting each other.

  server ADDR PORT HEADER BODY REPLY TRUTH_JSON
      Prints READY, accepts one connection, reads HEADER then BODY bytes per request and answers
      REPLY bytes in one send. Records when each piece arrived. Writes TRUTH_JSON at EOF.
  client ADDR PORT HEADER BODY REPLY PERIOD_MS COUNT TRUTH_JSON
      Sends COUNT requests, one every PERIOD_MS (waiting for each reply), each as two send()
      calls (HEADER bytes, then BODY bytes). Writes TRUTH_JSON.
"""
import json
import os
import socket
import sys
import time


def recv_exact(sock, n):
    buf = bytearray()
    first = None
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None, first
        if first is None:
            first = time.time_ns()
        buf += chunk
    return bytes(buf), first


def write_json(path, obj):
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f)
    os.replace(path + ".tmp", path)


def nodelay(sock):
    return bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))


def server(addr, port, header, body, reply, truth):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(1)
    print("READY", flush=True)
    ls.settimeout(15)
    conn, _ = ls.accept()
    conn.settimeout(None)
    out = []
    while True:
        h, h_ns = recv_exact(conn, header)
        if h is None:
            break
        b, b_ns = recv_exact(conn, body)
        if b is None:
            break
        conn.sendall(b"s" * reply)
        out.append({"header_recv_ns": h_ns, "body_recv_ns": b_ns, "reply_sent_ns": time.time_ns()})
    write_json(truth, {"server_pid": os.getpid(), "server_nodelay": nodelay(conn), "requests": out})


def client(addr, port, header, body, reply, period_ms, count, truth):
    sock = socket.create_connection((addr, port), timeout=10)
    c, s = sock.getsockname(), sock.getpeername()
    out = []
    t0 = time.time_ns() + 10_000_000
    for seq in range(count):
        delay = (t0 + seq * period_ms * 1_000_000 - time.time_ns()) / 1e9
        if delay > 0:
            time.sleep(delay)
        sock.send(b"h" * header)
        w1 = time.time_ns()
        sock.send(b"b" * body)
        w2 = time.time_ns()
        rep, _ = recv_exact(sock, reply)
        now = time.time_ns()
        if rep is None:
            break
        out.append({
            "seq": seq, "write1_ns": w1, "write2_ns": w2, "reply_ns": now, "latency_ns": now - w1,
        })
    write_json(truth, {
        "client_pid": os.getpid(),
        "client_nodelay": nodelay(sock),
        "flow": {"client": f"{c[0]}:{c[1]}", "server": f"{s[0]}:{s[1]}"},
        "requests": out,
    })
    sock.close()


def main(a):
    if a[1] == "server":
        server(a[2], int(a[3]), int(a[4]), int(a[5]), int(a[6]), a[7])
    elif a[1] == "client":
        client(a[2], int(a[3]), int(a[4]), int(a[5]), int(a[6]), int(a[7]), int(a[8]), a[9])
    else:
        sys.exit(f"unknown role {a[1]!r}")


if __name__ == "__main__":
    main(sys.argv)
