#!/usr/bin/env bash
# Socket benchmark: root cause #4 measured with `tailhunt transfer` over the link emulator
# (100 Mbit/s, 40 ms each way, 2 MB queue), and the setsockopt audit's own cost.
#
#   bench/sock.sh [--write]    ROUNDS=N (3)
#
# 1. ROUNDS rounds, in alternating order, of a 10 MB download with the client's SO_RCVBUF
#    pinned at 64 KiB and with autotuning: transfer time, throughput, the window-limited bound
#    window/RTT, and the sender's receive-window-limited share of busy time.
# 2. The audit (`tailhunt sockets`) while python3 makes 100,000 setsockopt(TCP_NODELAY) calls:
#    the kernel's BPF statistics give the program's runs and ns per run, for the attach mode in
#    effect (the syscalls tracepoint with tracefs mounted; else raw_tp on every system call).
# Prints markdown; --write also stores it, with the machine description, in
# bench/results/sock.md. Needs root, iproute2 and python3; builds tailhunt first.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_flags bench/sock.sh "ROUNDS=N" "$@"
rounds="${ROUNDS:-3}"
positive_whole bench/sock.sh "ROUNDS=$rounds"
if [[ "$(id -u)" != 0 ]]; then
    echo "bench/sock.sh: needs root (namespaces, TUN devices, BPF): run as root" >&2
    exit 2
fi

cargo build --release --locked -q -p tailhunt
bin="$PWD/target/release/tailhunt"
tmp="$(mktemp -d)"
link_pid=""
server_pid=""
cleanup() {
    # Only the processes this script started, by PID; the link removes its namespaces.
    [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null || true
    [[ -n "$link_pid" ]] && kill -INT "$link_pid" 2>/dev/null && wait "$link_pid" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT

"$bin" --db "$tmp/t.db" lab link --create --delay 40ms --rate 100mbit --queue 2MB \
    --duration 3600s >"$tmp/link.out" 2>"$tmp/link.err" &
link_pid=$!
for _ in $(seq 50); do grep -q 'link up' "$tmp/link.err" 2>/dev/null && break; sleep 0.1; done
a="$(sed -n 's/^link up: \([^ ]*\) .*/\1/p' "$tmp/link.err")"
b="$(sed -n 's/^link up: .* <-> \([^ ]*\) .*/\1/p' "$tmp/link.err")"
[[ -n "$a" && -n "$b" ]] || { echo "bench/sock.sh: the link did not start: $(cat "$tmp/link.err")" >&2; exit 1; }

ip netns exec "$b" "$bin" --db "$tmp/t.db" transfer server --listen 198.18.10.2:7400 \
    >/dev/null 2>"$tmp/server.err" &
server_pid=$!
for _ in $(seq 50); do grep -q 'listening' "$tmp/server.err" 2>/dev/null && break; sleep 0.1; done

steal_mark
one() { # label, client flags...
    local label="$1"
    shift
    ip netns exec "$a" "$bin" --db "$tmp/t.db" transfer client 198.18.10.2:7400 --bytes 10M "$@" \
        --json >"$tmp/one.json"
    python3 - "$label" "$tmp/one.json" >>"$tmp/results.txt" <<'EOF'
import json, sys
label, d = sys.argv[1], json.load(open(sys.argv[2]))
share = ((d.get("sender") or {}).get("tcp") or {}).get("rwnd_limited_share")
print(f"{label}_s {d['transfer_ns'] / 1e9}")
print(f"{label}_mbit {d['throughput_bps'] / 1e6}")
print(f"{label}_bound_mbit {(d['window_bound_bps'] or 0) / 1e6}")
print(f"{label}_ratio {d['bound_ratio'] or 0}")
print(f"{label}_rwnd_share {share or 0}")
print(f"{label}_findings {len([f for f in d['findings'] if f['detector'] == 'receive-window-limited'])}")
EOF
}
for r in $(seq "$rounds"); do
    if ((r % 2)); then one pinned --rcvbuf 64k; one tuned; else one tuned; one pinned --rcvbuf 64k; fi
done
steal="$(steal_since)"

"$bin" --db "$tmp/t.db" sockets --duration 4s --json >"$tmp/audit.json" 2>/dev/null &
audit_pid=$!
sleep 1.5
python3 -c '
import socket, time
s = socket.socket()
t = time.perf_counter()
for _ in range(100000):
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
print("loop_us", (time.perf_counter() - t) * 1e6 / 100000)
' >>"$tmp/results.txt"
wait "$audit_pid"
python3 - "$tmp/audit.json" >>"$tmp/results.txt" <<'EOF'
import json, sys
a = json.load(open(sys.argv[1]))["audit"]
print("attach_" + a["attach"], 1)
print("events", len(a["events"]))
print("lost", a["lost"])
if a.get("program_runs"):
    print("ns_per_run", a["program_run_time_ns"] / a["program_runs"])
    print("runs", a["program_runs"])
EOF
attach="$(awk '/^attach_/ { sub("attach_", "", $1); print $1 }' "$tmp/results.txt")"

cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
report="$(
    cat <<EOF
# Socket benchmark

Machine: $(nproc) CPUs ($cpu), kernel $(uname -r), $(. /etc/os-release && echo "$PRETTY_NAME"),
congestion control $(cat /proc/sys/net/ipv4/tcp_congestion_control); steal $steal% during the
transfers; load average $(cut -d' ' -f1-3 /proc/loadavg) at the end (the machine is shared).
Run on $(date -u +%Y-%m-%dT%H:%MZ). Command: \`ROUNDS=$rounds bench/sock.sh --write\`.

Path: tailhunt's TUN link emulator, 100 Mbit/s, 40 ms each way, 2 MB drop-tail queue.
\`tailhunt transfer client --bytes 10M\` (10,000,000 bytes), $rounds rounds each, alternating;
median (min-max).

| client | transfer time s | Mbit/s | window/RTT Mbit/s | achieved / bound | sender rwnd-limited share | receive-window-limited fired |
|---|--:|--:|--:|--:|--:|--:|
| SO_RCVBUF=64k | $(fmt_agg pinned_s %.2f 1) | $(fmt_agg pinned_mbit %.2f 1) | $(fmt_agg pinned_bound_mbit %.2f 1) | $(fmt_agg pinned_ratio %.2f 1) | $(fmt_agg pinned_rwnd_share %.2f 1) | $(fmt_agg pinned_findings %.0f 1) |
| autotuned | $(fmt_agg tuned_s %.2f 1) | $(fmt_agg tuned_mbit %.2f 1) | $(fmt_agg tuned_bound_mbit %.2f 1) | $(fmt_agg tuned_ratio %.2f 1) | $(fmt_agg tuned_rwnd_share %.2f 1) | $(fmt_agg tuned_findings %.0f 1) |

Autotuning is $(calc %.1f "$(median_of pinned_s) / $(median_of tuned_s)")x faster (median transfer times).

setsockopt audit, attached as \`$attach\`: python3 made 100,000 setsockopt(TCP_NODELAY) calls
($(fmt_agg loop_us %.2f 1) µs each from Python, audit running); the audit recorded
$(median_of events) call(s) in its 4 s and lost $(median_of lost) (ring buffer full); its program ran $(median_of runs) times at
$(fmt_agg ns_per_run %.0f 1) ns per run (kernel BPF statistics).
EOF
)"
echo "$report"
if ((write)); then
    mkdir -p bench/results
    echo "$report" >bench/results/sock.md
    echo "wrote bench/results/sock.md" >&2
fi
