#!/usr/bin/env bash
# Link emulator benchmark: tailhunt's TUN WAN emulator (crates/lab/src/link) at 100 Mbit/s and
# 80 ms RTT between two namespaces it creates (198.18.11.0/30).
#
#   bench/link.sh [--write]    PING_S=N (10), BULK_S=N (15)
#
# 1. Capacity: one TCP flow through the emulator with no delay and no rate limit.
# 2. Bulk: one TCP flow a->b for BULK_S over 100 Mbit/s, 40 ms each way, 1 MB drop-tail queue.
# 3. Ping-pong at 1000 datagrams/s for PING_S, 64-byte payload, RTT p50/p99/p99.9: idle with the
#    Rust UDP probe (crates/lab/src/link/measure.rs), idle with iputils `ping -i 0.001` as an
#    independent check, and while a bulk transfer a->b runs (that RTT includes the queueing the
#    bulk flow causes in the 1 MB queue, up to 80 ms: that is the emulated link working).
# The emulator's own timing error is its "lateness": how long after its due time each packet
# was written, per direction. CPU time stolen by the hypervisor during each phase is shown,
# because on a shared VM it delays every process alike.
# Prints markdown; --write also stores it, with the machine description, in
# bench/results/link.md. Needs root, cargo, iproute2 and iputils-ping.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

write=0
for arg in "$@"; do
    case "$arg" in
        --write) write=1 ;;
        -h | --help)
            sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *)
            echo "bench/link.sh: unknown argument '$arg' (use --write, or PING_S=N, BULK_S=N" \
                "in the environment)" >&2
            exit 2
            ;;
    esac
done

ping_s="${PING_S:-10}"
bulk_s="${BULK_S:-15}"
for pair in "PING_S=$ping_s" "BULK_S=$bulk_s"; do
    if ! [[ "${pair#*=}" =~ ^[1-9][0-9]*$ ]]; then
        echo "bench/link.sh: ${pair%%=*}='${pair#*=}' is not a positive whole number" >&2
        exit 2
    fi
done
if [[ "$(id -u)" != 0 ]]; then
    echo "bench/link.sh: needs root (network namespaces and TUN devices): run as root" >&2
    exit 2
fi
for tool in cargo ip ping; do
    if ! command -v "$tool" >/dev/null; then
        echo "bench/link.sh: $tool is needed; run scripts/setup.sh" >&2
        exit 2
    fi
done

load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
cmd=(cargo test --release -q -p tailhunt-netlab --test link_bench -- --ignored --nocapture)
body="$(LINK_BENCH_PING_S="$ping_s" LINK_BENCH_BULK_S="$bulk_s" "${cmd[@]}" 2>/dev/null |
    grep -v -E '^(running [0-9]+ test|test result:|test link_bench_root|\.+$)' || true)"
if ! grep -q 'goodput' <<<"$body"; then
    echo "bench/link.sh: the benchmark produced no figures; run it by hand to see why:" >&2
    echo "  LINK_BENCH_PING_S=$ping_s LINK_BENCH_BULK_S=$bulk_s ${cmd[*]}" >&2
    exit 1
fi

cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
steal_note="$(awk '/^cpu /{printf "%.1f s of steal since boot", $9/100}' /proc/stat)"
report="$(
    cat <<EOF
# Link emulator benchmark

Machine: $(nproc) CPUs ($cpu), kernel $(uname -r), $(. /etc/os-release && echo "$PRETTY_NAME");
$steal_note; load average $load_before when the run started (the machine is shared).
Run on $(date -u +%Y-%m-%dT%H:%MZ).

Command: \`PING_S=$ping_s BULK_S=$bulk_s bench/link.sh --write\` (runs
\`${cmd[*]}\`).

Link: two namespaces joined by tailhunt's TUN emulator; 100 Mbit/s each way (IP bytes),
40 ms one-way delay (80 ms RTT), 1 MB drop-tail queue, no loss. Emulator threads run
SCHED_FIFO 20; probe threads SCHED_FIFO 10. Times in ms.

$body

How to read it: the idle rows' excess over 80 ms is the whole distortion added by the
emulator, the kernel stacks of both namespaces and the probes (target: p99 within 1 ms). The
emulator's lateness is the part due to its own timer. During the bulk transfer the RTT also
holds the queueing delay of the 1 MB queue (up to 1 MB / 100 Mbit/s = 80 ms): that is the
emulated link behaving like a real bottleneck, not distortion; the lateness column shows
the emulator stayed punctual meanwhile. Time stolen by the hypervisor delays every process
on this VM alike; runs with much of it show it in the tail.
EOF
)"
printf '%s\n' "$report"
if [[ "$write" == 1 ]]; then
    mkdir -p bench/results
    printf '%s\n' "$report" >bench/results/link.md
    echo "wrote bench/results/link.md" >&2
fi
