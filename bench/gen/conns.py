#!/usr/bin/env python3
"""A synthetic capture of many short TCP connections, written directly as a pcap file (no
network: the loopback generator opens a few thousand connections a second, this writes 100,000
in a few seconds).

    conns.py OUT --connections N --seconds S [--seed K]

In: the number of connections and the capture's length in seconds. Out: OUT, a classic pcap
(Ethernet, microsecond timestamps) in which N connections start evenly spread over S seconds,
from 250 client hosts (each connection its own port) to 10.1.0.1:80: handshake (MSS, window scale,
SACK-permitted and timestamp options), a 200 B request, a reply of 1,000 to 3,000 B in 1 to
3 segments, ACKs, FIN from the client, FIN from the server, last ACK. A connection lasts about
2 ms (100 us round trips, 300 us of server time), so the connections open at once stay few
however many the file holds: what a capture of the same length but 1,000 or 100,000
connections costs in memory is what the connection count costs. A one-line summary goes to
stderr. Python 3 only, no packages.
"""

import argparse
import heapq
import random
import struct
import sys

SERVER = bytes([10, 1, 0, 1])
SERVER_PORT = 80
MAC_C = bytes.fromhex("020000000001")
MAC_S = bytes.fromhex("020000000002")
RTT_NS = 100_000
SERVER_NS = 300_000
MSS = 1448
# Client hosts: a fixed number, so the channels (traffic to and from each host) are the same
# at every connection count.
CLIENTS = 250

SYN, ACK, PSH, FIN = 0x02, 0x10, 0x08, 0x01


def frame(src, dst, sport, dport, seq, ack, flags, payload_len, tsval, tsecr, syn_opts):
    if syn_opts:
        # MSS, SACK permitted, timestamps, NOP, window scale 7.
        opts = (struct.pack("!BBH", 2, 4, MSS) + bytes([4, 2])
                + struct.pack("!BBII", 8, 10, tsval, tsecr) + bytes([1, 3, 3, 7]))
    else:
        opts = bytes([1, 1]) + struct.pack("!BBII", 8, 10, tsval, tsecr)
    tcp_len = 20 + len(opts)
    win = 65535 if flags & SYN else 512
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF,
                      (tcp_len // 4) << 4, flags, win, 0, 0) + opts
    total = 20 + tcp_len + payload_len
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 0, 0x4000, 64, 6, 0, src, dst)
    eth = (MAC_S + MAC_C if src != SERVER else MAC_C + MAC_S) + b"\x08\x00"
    return eth + ip + tcp + bytes(payload_len)


def connection(i, start_ns, rng):
    """The frames of connection i: a list of (ts_ns, bytes)."""
    client = bytes([10, 0, 0, 1 + i % CLIENTS])
    cport = 1024 + (i // CLIENTS) % 64000
    c_isn, s_isn = rng.getrandbits(32), rng.getrandbits(32)
    reply = rng.choice([1000, 2000, 3000])
    out = []
    half = RTT_NS // 2
    t = start_ns
    ts = (start_ns // 1_000_000) & 0x7FFFFFFF  # 1 kHz timestamp clocks

    def c(t, seq, ack, flags, n, syn=False):
        out.append((t, frame(client, SERVER, cport, SERVER_PORT, seq, ack, flags, n,
                             ts + (t - start_ns) // 1_000_000, 1, syn)))

    def s(t, seq, ack, flags, n, syn=False):
        out.append((t, frame(SERVER, client, SERVER_PORT, cport, seq, ack, flags, n,
                             ts + 7 + (t - start_ns) // 1_000_000, ts, syn)))

    # The capture point sits next to the server: client frames arrive half a round trip
    # after the client sent them.
    c(t, c_isn, 0, SYN, 0, True)
    s(t + 10_000, s_isn, c_isn + 1, SYN | ACK, 0, True)
    t += RTT_NS
    c(t, c_isn + 1, s_isn + 1, ACK, 0)
    c(t + 5_000, c_isn + 1, s_isn + 1, ACK | PSH, 200)
    t += 5_000 + SERVER_NS
    sent = 0
    while sent < reply:
        n = min(MSS, reply - sent)
        s(t, s_isn + 1 + sent, c_isn + 201, ACK | PSH, n)
        sent += n
        t += 12_000
    t += half * 2
    c(t, c_isn + 201, s_isn + 1 + reply, ACK, 0)
    c(t + 20_000, c_isn + 201, s_isn + 1 + reply, ACK | FIN, 0)
    s(t + 40_000, s_isn + 1 + reply, c_isn + 202, ACK | FIN, 0)
    c(t + 40_000 + RTT_NS, c_isn + 202, s_isn + 2 + reply, ACK, 0)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out")
    p.add_argument("--connections", type=int, required=True)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    if a.connections < 1 or a.connections > CLIENTS * 64000 or a.seconds <= 0:
        sys.exit("conns.py: give 1 or more connections and a positive length in seconds")
    rng = random.Random(a.seed)
    base = 1_700_000_000 * 1_000_000_000
    gap = a.seconds * 1e9 / a.connections
    # Connections start in order and last ~2 ms: a heap of the ones still sending keeps the
    # frames in time order without holding the whole file.
    heap = []
    frames = bytes_out = 0
    with open(a.out, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i in range(a.connections):
            start = base + int(i * gap)
            while heap and heap[0][0] < start:
                t, _, data = heapq.heappop(heap)
                f.write(struct.pack("<IIII", t // 1_000_000_000, (t // 1000) % 1_000_000,
                                    len(data), len(data)))
                f.write(data)
                frames += 1
                bytes_out += len(data)
            for k, (t, data) in enumerate(connection(i, start, rng)):
                heapq.heappush(heap, (t, i * 16 + k, data))
        while heap:
            t, _, data = heapq.heappop(heap)
            f.write(struct.pack("<IIII", t // 1_000_000_000, (t // 1000) % 1_000_000,
                                len(data), len(data)))
            f.write(data)
            frames += 1
            bytes_out += len(data)
    print(f"conns.py: {a.connections} connections over {a.seconds:g} s, {frames} frames, "
          f"{bytes_out} bytes of frames", file=sys.stderr)


if __name__ == "__main__":
    main()
