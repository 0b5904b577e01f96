#!/usr/bin/env python3
"""Bulk download (optionally with a small SO_RCVBUF) and healthy request/response exchanges.

Every time is time.time_ns() (the realtime clock tcpdump stamps packets with).

  server ADDR PORT
      Prints READY. For each connection: reads an 8-byte big-endian byte count and sends that
      many bytes, then closes. Serves until killed.
  client ADDR PORT BYTES RCVBUF TRUTH_JSON
      RCVBUF > 0: setsockopt(SO_RCVBUF, RCVBUF) before connect(); 0: leave autotuning alone.
      Downloads BYTES and writes TRUTH_JSON.
  rr-server ADDR PORT
      Prints READY; answers every 100-byte request with 100 bytes (TCP_NODELAY). Until killed.
  rr-client ADDR PORT COUNT PERIOD_MS TRUTH_JSON
      COUNT requests of 100 bytes (one send, TCP_NODELAY), one every PERIOD_MS.
"""
import json
import os
import socket
import sys
import threading
import time

RR = 100


def write_json(path, obj):
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f)
    os.replace(path + ".tmp", path)


def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def flow(sock):
    c, s = sock.getsockname(), sock.getpeername()
    return {"client": f"{c[0]}:{c[1]}", "server": f"{s[0]}:{s[1]}"}


def listen(addr, port):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(8)
    print("READY", flush=True)
    return ls


def bulk_conn(conn):
    with conn:
        req = recv_exact(conn, 8)
        if req is None:
            return
        left = int.from_bytes(req, "big")
        chunk = b"B" * 65536
        while left > 0:
            n = conn.send(chunk[: min(left, len(chunk))])
            left -= n


def server(addr, port):
    ls = listen(addr, port)
    while True:
        conn, _ = ls.accept()
        threading.Thread(target=bulk_conn, args=(conn,), daemon=True).start()


def client(addr, port, nbytes, rcvbuf, truth):
    sock = socket.socket()
    if rcvbuf > 0:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(30)
    sock.connect((addr, port))
    start = time.time_ns()
    sock.sendall(nbytes.to_bytes(8, "big"))
    got, first = 0, None
    while got < nbytes:
        chunk = sock.recv(262144)
        if not chunk:
            break
        if first is None:
            first = time.time_ns()
        got += len(chunk)
    end = time.time_ns()
    write_json(truth, {
        "client_pid": os.getpid(),
        "flow": flow(sock),
        "rcvbuf_requested": rcvbuf if rcvbuf > 0 else None,
        "rcvbuf_effective": sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
        "bytes": nbytes,
        "bytes_received": got,
        "request_ns": start,
        "first_byte_ns": first,
        "last_byte_ns": end,
    })
    sock.close()


def rr_conn(conn):
    with conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            req = recv_exact(conn, RR)
            if req is None:
                return
            conn.sendall(req)


def rr_server(addr, port):
    ls = listen(addr, port)
    while True:
        conn, _ = ls.accept()
        threading.Thread(target=rr_conn, args=(conn,), daemon=True).start()


def rr_client(addr, port, count, period_ms, truth):
    sock = socket.create_connection((addr, port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    out = []
    t0 = time.time_ns() + 10_000_000
    for seq in range(count):
        delay = (t0 + seq * period_ms * 1_000_000 - time.time_ns()) / 1e9
        if delay > 0:
            time.sleep(delay)
        send_ns = time.time_ns()
        sock.sendall(b"r" * RR)
        if recv_exact(sock, RR) is None:
            break
        now = time.time_ns()
        out.append({"seq": seq, "send_ns": send_ns, "reply_ns": now, "latency_ns": now - send_ns})
    write_json(truth, {"client_pid": os.getpid(), "flow": flow(sock), "requests": out})
    sock.close()


def main(a):
    if a[1] == "server":
        server(a[2], int(a[3]))
    elif a[1] == "client":
        client(a[2], int(a[3]), int(a[4]), int(a[5]), a[6])
    elif a[1] == "rr-server":
        rr_server(a[2], int(a[3]))
    elif a[1] == "rr-client":
        rr_client(a[2], int(a[3]), int(a[4]), int(a[5]), a[6])
    else:
        sys.exit(f"unknown role {a[1]!r}")


if __name__ == "__main__":
    main(sys.argv)
