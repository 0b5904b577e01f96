#!/usr/bin/env bash
# Detectors on independent ground truth: precision and recall of every detector over a seeded
# matrix of cases whose causes were planted by tailhunt's own traffic commands and CPU
# workloads, with the truth recorded by those programs (crates/lab/src/truth).
#
#   bench/detectors.sh [--quick|--full] [--seed N] [--assert] [--write]   OUT=DIR keeps the cases
#
# --quick (default): one case per class and its healthy twin, a few minutes. --full: every
# variant (link rates up to 10 Gbit/s, more round trips, timeout styles, burst directions,
# server-side Nagle, a busy host), on demand. --seed N draws the parameters the matrix leaves
# open (default 1). Per detector: planted units, TP, FP, FN, precision, recall; the healthy twins
# with a finding at or above medium confidence; then every miss, false positive and
# contradicted explanation with what the detector said. --assert exits 1 when a detector is
# below 0.9 or a twin fails. --write also stores the report with the machine description in
# bench/results/detectors-SCALE.md (-seedN past seed 1). Needs root (namespaces, tc, tcpdump, cgroups, BPF).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# shellcheck source=bench/lib.sh
. bench/lib.sh
scale=quick seed=1 write=0 assert=()
while (($#)); do
    case "$1" in
        --quick) scale=quick ;;
        --full) scale=full ;;
        --seed)
            seed="${2:-}"
            shift
            ;;
        --assert) assert=(--assert 0.9) ;;
        --write) write=1 ;;
        -h | --help)
            awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *)
            echo "bench/detectors.sh: unknown argument '$1' (use --quick, --full, --seed N, --assert, --write)" >&2
            exit 2
            ;;
    esac
    shift
done
if ! [[ "$seed" =~ ^[0-9]+$ ]]; then
    echo "bench/detectors.sh: --seed '$seed' is not a whole number" >&2
    exit 2
fi
if ((EUID != 0)); then
    echo "bench/detectors.sh: needs root (namespaces, qdiscs, captures, cgroups, BPF); run it with sudo" >&2
    exit 2
fi
for tool in tcpdump tc ethtool taskset; do
    if ! command -v "$tool" >/dev/null; then
        echo "bench/detectors.sh: '$tool' is missing; run scripts/setup.sh" >&2
        exit 2
    fi
done

cargo build --release --locked -p tailhunt -p tailhunt-lab --bins >&2
tmp="$(mktemp -d /tmp/tailhunt-bench-detectors.XXXXXX)"
out="${OUT:-$tmp/cases}"
cleanup() { rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

started="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
load_start="$(cut -d' ' -f1 /proc/loadavg)"
steal_mark
status=0
target/release/tailhunt-truth matrix "--$scale" --seed "$seed" --out "$out" \
    --tailhunt target/release/tailhunt --markdown "$tmp/matrix.md" "${assert[@]}" \
    >"$tmp/matrix.txt" || status=$?
if [[ ! -s "$tmp/matrix.md" ]]; then
    cat "$tmp/matrix.txt" >&2
    echo "bench/detectors.sh: the matrix did not finish (status $status)" >&2
    exit "$status"
fi
finished="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
steal="$(steal_since)"
load_end="$(cut -d' ' -f1 /proc/loadavg)"

report() {
    echo "# Detectors on independent ground truth"
    echo
    echo "\`bench/detectors.sh --$scale --seed $seed\`, $started to $finished, tailhunt built from commit"
    echo "$(git rev-parse --short HEAD). Each case plants one cause (or, for a healthy twin, none) with"
    echo "tailhunt's own traffic commands (\`serve\`, \`load\`, \`transfer\`), the lab's link emulator and"
    echo "tbf queues, or CPU workloads in cgroups, records the truth from those programs, and scores"
    echo "what \`tailhunt pcap\`, \`tailhunt runq\`, \`tailhunt load --sweep\` and \`tailhunt transfer\`"
    echo "concluded (crates/lab/src/truth). A finding naming a planted flow, cgroup pair or target is"
    echo "a TP, naming anything else a FP; a planted unit nobody named a FN. Targets from the issue:"
    echo "precision and recall >= 0.9 for every detector, no finding at or above medium confidence"
    echo "(0.5) on a healthy twin."
    echo
    machine_rows
    echo "| TCP congestion control | $(sysctl -n net.ipv4.tcp_congestion_control) |"
    echo "| steal time during the run | $steal % of CPU time |"
    echo "| other work on the machine | load average $load_start at the start, $load_end at the end |"
    echo
    cat "$tmp/matrix.md"
}
report >"$tmp/report.md"
if ((seed == 1)); then publish "detectors-$scale"; else publish "detectors-$scale-seed$seed"; fi
exit "$status"
