#!/usr/bin/env bash
# HTML report benchmark: how long `tailhunt report` takes and how big its file is, for a
# 10 M-sample run and for the run of a 1 GB capture.
#
#   bench/report.sh [--write]        SAMPLES=N (10000000), CAPTURE_MB=N (1000), ROUNDS=N (3)
#
# 1. `tailhunt lab synth trimodal --count SAMPLES`, timestamped at 10k/s, imported as one run;
#    `tailhunt report` of it,
#    ROUNDS times, beside `tailhunt analyze` of the same run (the terminal's quick look, which
#    reads the same samples): wall time, CPU, peak memory, file size.
# 2. bench/gen/capture.sh writes a CAPTURE_MB MB capture of local TCP traffic (root);
#    `tailhunt pcap` stores its run; `tailhunt report` of that run, ROUNDS times.
#
# No peer tool draws these charts from the same data, so the figures stand against the issue's
# targets (under 5 s, under 5 MB) and against `analyze` on the same run. Prints markdown;
# --write also stores it in bench/results/report.md. Needs root (the capture), GNU time,
# tcpdump, ethtool.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
source bench/lib.sh
bench_flags bench/report.sh "SAMPLES=N, CAPTURE_MB=N, ROUNDS=N" "$@"
samples="${SAMPLES:-10000000}" capture_mb="${CAPTURE_MB:-1000}" rounds="${ROUNDS:-3}"
positive_whole bench/report.sh "SAMPLES=$samples" "CAPTURE_MB=$capture_mb" "ROUNDS=$rounds"

cargo build --release --locked -p tailhunt >&2
bin="$PWD/target/release/tailhunt"
tmp="$(mktemp -d /tmp/th-bench-report.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
db="$tmp/bench.db"
started="$(date -u +%FT%TZ)"
steal_mark

# Runs "$@" under GNU time; records wall s, CPU s and peak KiB under KEY_*.
timed() { # key cmd...
    local key=$1
    shift
    /usr/bin/time -f "%e %U %S %M" -o "$tmp/time" "$@" >/dev/null
    read -r wall user sys rss <"$tmp/time"
    record "${key}_wall" "$wall"
    record "${key}_cpu" "$(calc '%.2f' "$user + $sys")"
    record "${key}_rss" "$rss"
}

echo "bench/report.sh: $samples synthetic samples" >&2
"$bin" lab synth trimodal --count "$samples" --seed 1 -o "$tmp/raw.csv" >/dev/null
# Timestamped, 10k samples a second, so the charts over time are drawn too.
awk 'NR > 1 { printf "%.6f,%s\n", 1700000000 + (NR - 1) * 0.0001, $1 }' "$tmp/raw.csv" >"$tmp/t.csv"
rm -f "$tmp/raw.csv"
"$bin" --db "$db" --json import "$tmp/t.csv" --unit ns >"$tmp/import.json"
big="$(awk -F'"' '/"run_id"/ { print $4; exit }' "$tmp/import.json")"
for ((i = 1; i <= rounds; i++)); do
    timed samples_report "$bin" --db "$db" report "$big" -o "$tmp/samples.html"
    timed samples_analyze "$bin" --db "$db" analyze "$big"
done
record samples_bytes "$(stat -c %s "$tmp/samples.html")"
rm -f "$tmp/t.csv"

echo "bench/report.sh: a $capture_mb MB capture" >&2
bash bench/gen/capture.sh "$tmp/big.pcap" "$capture_mb"
capture_bytes="$(stat -c %s "$tmp/big.pcap")"
"$bin" --db "$db" --json pcap "$tmp/big.pcap" --link-rate 10gbit >"$tmp/pcap.json"
cap="$(awk -F'"' '/"run_id"/ { print $4; exit }' "$tmp/pcap.json")"
rm -f "$tmp/big.pcap"
for ((i = 1; i <= rounds; i++)); do
    timed capture_report "$bin" --db "$db" report "$cap" -o "$tmp/capture.html"
done
record capture_bytes "$(stat -c %s "$tmp/capture.html")"
steal="$(steal_since)"

{
    echo "# HTML report benchmark"
    echo
    echo "\`SAMPLES=$samples CAPTURE_MB=$capture_mb ROUNDS=$rounds bench/report.sh\`, $started to $(date -u +%FT%TZ)."
    echo "Targets from the issue: a 10 M-sample run and a 1 GB capture's run each render in under 5 s"
    echo "into a file under 5 MB."
    echo
    machine_rows
    echo "| steal time during the run | $steal % of CPU time |"
    echo
    echo "## Results (median, min-max of $rounds)"
    echo
    echo "| run | command | wall | CPU | peak memory | file |"
    echo "|---|---|--:|--:|--:|--:|"
    echo "| $samples samples (trimodal, timestamped) | \`report\` | $(fmt_agg samples_report_wall '%.2f s' 1) | $(fmt_agg samples_report_cpu '%.2f s' 1) | $(fmt_agg samples_report_rss '%.0f MiB' 1024) | $(calc '%.2f MB' "$(median_of samples_bytes) / 1e6") |"
    echo "| the same run | \`analyze\` (reference) | $(fmt_agg samples_analyze_wall '%.2f s' 1) | $(fmt_agg samples_analyze_cpu '%.2f s' 1) | $(fmt_agg samples_analyze_rss '%.0f MiB' 1024) | |"
    echo "| capture of $(calc '%.2f GB' "$capture_bytes / 1e9") | \`report\` | $(fmt_agg capture_report_wall '%.2f s' 1) | $(fmt_agg capture_report_cpu '%.2f s' 1) | $(fmt_agg capture_report_rss '%.0f MiB' 1024) | $(calc '%.2f MB' "$(median_of capture_bytes) / 1e6") |"
    echo
    echo "Report/analyze wall-time ratio on the same run: $(calc '%.2f' "$(median_of samples_report_wall) / $(median_of samples_analyze_wall)")."
    echo "The report runs the detectors first (as \`diagnose\` does), then reads every series of the run."
} >"$tmp/report.md"
publish report
