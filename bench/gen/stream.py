#!/usr/bin/env python3
"""A synthetic capture of one long TCP connection, written directly as a pcap file.

    stream.py OUT --minutes M

In: the capture's length in minutes. Out: OUT, a classic pcap (Ethernet, microsecond
timestamps) of one connection from 10.0.0.1:40000 to 10.0.0.2:80: a handshake (MSS, window
scale, timestamps), then every millisecond a 1,000 B segment from the server and the client's
ACK 100 us later, both with timestamp options, for M minutes (about 70 MB a minute). Nothing
closes: the connection is open from the first packet to the last, so what it costs in memory is
what a long capture of one busy connection costs (its bins, timestamps and series grow with
time, not with connections). A one-line summary goes to stderr. Python 3 only, no packages.
"""

import argparse
import struct
import sys

CLIENT, SERVER = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
CPORT, SPORT = 40000, 80
MACS = bytes.fromhex("020000000001020000000002") + b"\x08\x00"
BASE_S = 1_700_000_000
SEGMENT = 1000
SYN, ACK, PSH = 0x02, 0x10, 0x08


def frame(src, dst, sport, dport, seq, ack, flags, payload_len, tsval, tsecr):
    ts = struct.pack("!BBII", 8, 10, tsval & 0xFFFFFFFF, tsecr & 0xFFFFFFFF)
    if flags & SYN:
        # MSS, window scale 7, timestamps, padded to a multiple of 4.
        opts = struct.pack("!BBH", 2, 4, 1448) + bytes([1, 3, 3, 7]) + ts + bytes([1, 1])
    else:
        opts = bytes([1, 1]) + ts
    tcp_len = 20 + len(opts)
    tcp = struct.pack(
        "!HHIIBBHHH",
        sport,
        dport,
        seq & 0xFFFFFFFF,
        ack & 0xFFFFFFFF,
        (tcp_len // 4) << 4,
        flags,
        512,
        0,
        0,
    )
    ip = struct.pack(
        "!BBHHHBBH4s4s", 0x45, 0, 20 + tcp_len + payload_len, 0, 0x4000, 64, 6, 0, src, dst
    )
    return MACS + ip + tcp + opts + bytes(payload_len)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--minutes", type=int, required=True)
    args = ap.parse_args()
    if args.minutes < 1:
        sys.exit("stream.py: --minutes must be at least 1")
    records = []
    written = packets = 0

    def record(t_us, f):
        nonlocal packets
        packets += 1
        s, us = divmod(t_us, 1_000_000)
        records.append(struct.pack("<IIII", BASE_S + s, us, len(f), len(f)) + f)

    with open(args.out, "wb") as out:
        out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        record(0, frame(CLIENT, SERVER, CPORT, SPORT, 100, 0, SYN, 0, 1, 0))
        record(50, frame(SERVER, CLIENT, SPORT, CPORT, 900, 101, SYN | ACK, 0, 1, 1))
        record(100, frame(CLIENT, SERVER, CPORT, SPORT, 101, 901, ACK, 0, 1, 1))
        seq = 901
        for i in range(1, args.minutes * 60_000):
            t = i * 1000
            record(t, frame(SERVER, CLIENT, SPORT, CPORT, seq, 101, PSH | ACK, SEGMENT, 1 + i, 1 + i))
            seq += SEGMENT
            record(t + 100, frame(CLIENT, SERVER, CPORT, SPORT, 101, seq, ACK, 0, 1 + i, 1 + i))
            if len(records) >= 100_000:
                data = b"".join(records)
                out.write(data)
                written += len(data)
                records.clear()
        data = b"".join(records)
        out.write(data)
        written += len(data) + 24
    print(
        f"stream.py: {args.out}: one TCP connection, {args.minutes} min, {packets} packets, "
        f"{written} bytes",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
