#!/usr/bin/env bash
# Writes a capture of about SIZE_MB MB of local TCP traffic to OUT (for bench/pcap.sh).
#
#   bench/gen/capture.sh OUT SIZE_MB      BULK=N (2), BULK_MBIT=N (400), RR_WORKERS=N (4),
#                                         MAX_SECS=N (180)
#
# In a fresh network namespace (removed at exit, also on failure): loopback up with MTU 1500
# and TSO/GSO/GRO off, so frames are wire-sized; `tcpdump -i lo -s 0 -w OUT` records
# bench/gen/traffic.py's bulk flows and short request/response connections until OUT reaches
# SIZE_MB MB (10^6 bytes) or MAX_SECS pass. Needs root, iproute2, ethtool, tcpdump, python3.
# Prints one summary line on stderr.
set -euo pipefail

if (($# != 2)) || ! [[ "$2" =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: bench/gen/capture.sh OUT SIZE_MB" >&2
    exit 2
fi
out="$1" size_mb="$2"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
max_secs="${MAX_SECS:-180}"
ns="th-bench-pcap-$$"
stop_file="$(mktemp -u /tmp/th-pcap-stop.XXXXXX)"
tcpdump_pid="" traffic_pid=""

cleanup() {
    touch "$stop_file" 2>/dev/null || true
    [[ -n "$traffic_pid" ]] && { kill "$traffic_pid" 2>/dev/null || true; wait "$traffic_pid" 2>/dev/null || true; }
    [[ -n "$tcpdump_pid" ]] && { kill "$tcpdump_pid" 2>/dev/null || true; wait "$tcpdump_pid" 2>/dev/null || true; }
    ip netns del "$ns" 2>/dev/null || true
    rm -f "$stop_file"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ip netns add "$ns"
ip -n "$ns" link set lo mtu 1500 up
ip netns exec "$ns" ethtool -K lo tso off gso off gro off >/dev/null 2>&1 || true

ip netns exec "$ns" tcpdump -i lo -s 0 -B 262144 -w "$out" tcp 2>"$out.tcpdump.log" &
tcpdump_pid=$!
# tcpdump says "listening on lo" once it captures.
for _ in $(seq 100); do
    grep -q 'listening on' "$out.tcpdump.log" 2>/dev/null && break
    sleep 0.05
done

start=$(date +%s.%N)
ip netns exec "$ns" python3 "$here/traffic.py" --addr 127.0.0.1 --bulk "${BULK:-2}" \
    --bulk-mbit "${BULK_MBIT:-400}" --rr-workers "${RR_WORKERS:-4}" --seconds "$max_secs" \
    --stop "$stop_file" 2>"$out.traffic.log" &
traffic_pid=$!

target=$((size_mb * 1000000))
while kill -0 "$traffic_pid" 2>/dev/null; do
    if (($(stat -c %s "$out" 2>/dev/null || echo 0) >= target)); then break; fi
    sleep 0.1
done
# Stop the capture first, so the file ends while traffic still runs (no trailing closes only).
kill -INT "$tcpdump_pid" 2>/dev/null || true
wait "$tcpdump_pid" 2>/dev/null || true
tcpdump_pid=""
touch "$stop_file"
wait "$traffic_pid" 2>/dev/null || true
traffic_pid=""
secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
echo "capture.sh: $(stat -c %s "$out") bytes in ${secs} s; $(cat "$out.traffic.log");" \
    "$(grep -h 'packets' "$out.tcpdump.log" | tr '\n' ' ')" >&2
rm -f "$out.tcpdump.log" "$out.traffic.log"
