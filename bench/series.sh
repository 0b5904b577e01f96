#!/usr/bin/env bash
# The over-time and variant detectors on the seeded generator's labelled probe runs: precision
# and recall of step-change, periodic-tail, latency-floor, cold-path and fragile-percentile.
#
#   bench/series.sh [--seed N] [--seeds K] [--assert] [--write]
#
# A sibling of bench/detectors.sh rather than a part of it: that harness plants causes with real
# traffic in namespaces (root, minutes per case) and scores tailhunt's capture, runq, load and
# transfer commands; these causes live in a long probe run's series (a step on one date, a
# daily cycle over three days), which the generator (crates/synth/src/probe/) writes straight
# into a store as a `probe` run would, in seconds and without root. Each case is diagnosed with
# `diagnose_run` (never told what was planted) and scored by the runner
# (crates/diagnose/examples/series_truth.rs): a finding naming the planted probe (a step within
# two intervals or 3% of the run, a period within 15%) is a TP, any other finding of these
# detectors a FP, a planted cause nobody named a FN; the controls must have no finding.
# --seeds K (default 20) adds up seeds N..N+K-1 (default N = 1). --assert exits 1 when a
# detector is below 0.9 or a control has a finding. --write stores the report with the machine
# description in bench/results/series.md.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# shellcheck source=bench/lib.sh
. bench/lib.sh
seed=1 seeds=20 write=0 assert=()
while (($#)); do
    case "$1" in
        --seed)
            seed="${2:-}"
            shift
            ;;
        --seeds)
            seeds="${2:-}"
            shift
            ;;
        --assert) assert=(--assert) ;;
        --write) write=1 ;;
        -h | --help)
            awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *)
            echo "bench/series.sh: unknown argument '$1' (use --seed N, --seeds K, --assert, --write)" >&2
            exit 2
            ;;
    esac
    shift
done
for v in "$seed" "$seeds"; do
    if ! [[ "$v" =~ ^[0-9]+$ ]]; then
        echo "bench/series.sh: '$v' is not a whole number" >&2
        exit 2
    fi
done

cargo build --release --locked -p tailhunt-diagnose --example series_truth >&2
tmp="$(mktemp -d /tmp/tailhunt-bench-series.XXXXXX)"
cleanup() { rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

started="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
status=0
target/release/examples/series_truth --seed "$seed" --seeds "$seeds" --markdown "$tmp/matrix.md" \
    "${assert[@]}" >"$tmp/matrix.txt" || status=$?
if [[ ! -s "$tmp/matrix.md" ]]; then
    cat "$tmp/matrix.txt" >&2
    echo "bench/series.sh: the runner did not finish (status $status)" >&2
    exit "$status"
fi
finished="$(date -u +%Y-%m-%dT%H:%M:%SZ)"

report() {
    echo "# Over-time and variant detectors on generated probe runs"
    echo
    echo "\`bench/series.sh --seed $seed --seeds $seeds\`, $started to $finished, tailhunt built from commit"
    echo "$(git rev-parse --short HEAD). Each case is a probe run written by the seeded generator"
    echo "(crates/synth/src/probe/) into a fresh store as \`tailhunt probe\` would write it, then"
    echo "diagnosed by \`diagnose_run\`, which is not told what was planted. A finding naming the planted"
    echo "probe (a step within two intervals or 3% of the run, a period within 15% of its length) is a"
    echo "TP, any other finding of these detectors a FP, a planted cause nobody named a FN. Targets:"
    echo "precision and recall >= 0.9 per detector, no finding on a control."
    echo
    machine_rows
    echo
    cat "$tmp/matrix.md"
}
report >"$tmp/report.md"
publish series
exit "$status"
