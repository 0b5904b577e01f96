#!/usr/bin/env python3
"""Client timeout scenario: the client gives up on a slow download and closes.

Every time is time.time_ns() (the realtime clock tcpdump stamps packets with).

  server ADDR PORT BYTES TRUTH_JSON
      Prints READY, accepts one connection, reads an 8-byte request and sends up to BYTES until
      the peer resets the connection. Writes TRUTH_JSON (bytes sent, when and how it ended).
  client ADDR PORT BYTES TIMEOUT_MS TRUTH_JSON
      Requests BYTES, reads until TIMEOUT_MS after the request, then close(). Writes TRUTH_JSON.
"""
import fcntl
import json
import os
import socket
import struct
import sys
import termios
import time


def write_json(path, obj):
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f)
    os.replace(path + ".tmp", path)


def server(addr, port, nbytes, truth):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(1)
    print("READY", flush=True)
    ls.settimeout(15)
    conn, _ = ls.accept()
    conn.settimeout(30)
    req = conn.recv(8)
    start, sent, error, chunk = time.time_ns(), 0, None, b"T" * 16384
    try:
        while sent < nbytes:
            sent += conn.send(chunk[: min(len(chunk), nbytes - sent)])
    except OSError as e:
        error = type(e).__name__
    end = time.time_ns()
    conn.close()
    write_json(truth, {
        "server_pid": os.getpid(),
        "request_bytes": len(req),
        "first_send_ns": start,
        "bytes_sent": sent,
        "send_error": error,
        "send_error_ns": end if error else None,
    })


def client(addr, port, nbytes, timeout_ms, truth):
    sock = socket.create_connection((addr, port), timeout=10)
    c, s = sock.getsockname(), sock.getpeername()
    request_ns = time.time_ns()
    sock.sendall(nbytes.to_bytes(8, "big"))
    deadline = request_ns + timeout_ms * 1_000_000
    got = 0
    while True:
        left = (deadline - time.time_ns()) / 1e9
        if left <= 0:
            break
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            break
        if not chunk:
            break
        got += len(chunk)
    fired = time.time_ns()
    unread = struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]
    sock.close()
    close_ns = time.time_ns()
    write_json(truth, {
        "client_pid": os.getpid(),
        "flow": {"client": f"{c[0]}:{c[1]}", "server": f"{s[0]}:{s[1]}"},
        "request_ns": request_ns,
        "timeout_ns": timeout_ms * 1_000_000,
        "timeout_fired_ns": fired,
        "close_ns": close_ns,
        "bytes_requested": nbytes,
        "bytes_received": got,
        "unread_bytes_at_close": unread,
    })


def main(a):
    if a[1] == "server":
        server(a[2], int(a[3]), int(a[4]), a[5])
    elif a[1] == "client":
        client(a[2], int(a[3]), int(a[4]), int(a[5]), a[6])
    else:
        sys.exit(f"unknown role {a[1]!r}")


if __name__ == "__main__":
    main(sys.argv)
