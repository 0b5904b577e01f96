#!/usr/bin/env bash
# Store ingest benchmark: tailhunt against plain SQLite, same input, same run.
#
#   bench/store.sh [--write]        SAMPLES=N overrides the 10 M samples
#
# 1. crates/store/examples/ingest.rs: the library path (Store + RunWriter) against one SQLite row
#    per sample, on three seeded data sets: samples/s, bytes/sample, ratios.
# 2. The CLI path: `tailhunt import` of a `tailhunt lab synth lognormal` CSV against the sqlite3
#    shell's `.import --csv` of the same file into a one-row-per-sample table.
# 3. crates/store/examples/commits.rs: what durability by time costs (the open block committed
#    every interval) against commits only when blocks fill, for paced sources at 1k-100k/s.
#
# Prints markdown; --write also stores it, with the machine description, in
# bench/results/store.md. Needs cargo, GNU time (/usr/bin/time) and the sqlite3 CLI.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

write=0
for arg in "$@"; do
    case "$arg" in
        --write) write=1 ;;
        -h | --help)
            sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *)
            echo "bench/store.sh: unknown argument '$arg' (use --write, or SAMPLES=N in the environment)" >&2
            exit 2
            ;;
    esac
done

samples="${SAMPLES:-10000000}"
if ! [[ "$samples" =~ ^[1-9][0-9]*$ ]]; then
    echo "bench/store.sh: SAMPLES='$samples' is not a positive whole number" >&2
    exit 2
fi
if ! command -v sqlite3 >/dev/null; then
    echo "bench/store.sh: the sqlite3 CLI (the peer for the CLI import) is not installed;" \
        "install it with 'sudo apt-get install sqlite3'" >&2
    exit 2
fi
if ! [[ -x /usr/bin/time ]]; then
    echo "bench/store.sh: GNU time (/usr/bin/time, for max RSS) is not installed;" \
        "install it with 'sudo apt-get install time'" >&2
    exit 2
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

echo "building (release)..." >&2
cargo build --release --locked -p tailhunt-store --example ingest --example commits >&2
cargo build --release --locked -p tailhunt >&2
tailhunt=target/release/tailhunt

# Steal time: the 8th value of the aggregate cpu line of /proc/stat, over all time spent.
cpu_ticks() { awk '/^cpu / { print $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat; }
now_ns() { date +%s%N; }
# Runs a command under GNU time; sets $secs (wall, from ns clock) and $rss_mb (max RSS).
timed() {
    local t0 t1
    t0="$(now_ns)"
    /usr/bin/time -v -o "$tmp/time.txt" "$@"
    t1="$(now_ns)"
    secs="$(awk -v ns="$((t1 - t0))" 'BEGIN { printf "%.3f", ns / 1e9 }')"
    rss_mb="$(awk -F': ' '/Maximum resident set size/ { printf "%.0f", $2 / 1024 }' "$tmp/time.txt")"
}
# Total size of the files that exist among the arguments (a closed store has no -wal).
file_bytes() {
    local f total=0
    for f in "$@"; do
        if [[ -e "$f" ]]; then total=$((total + $(stat -c %s "$f"))); fi
    done
    echo "$total"
}

read -r steal0 total0 < <(cpu_ticks)
started="$(date -u +%Y-%m-%dT%H:%M:%SZ)"

echo "library ingest, $samples samples per data set..." >&2
library_table="$(target/release/examples/ingest --samples "$samples")"

echo "durability by time, paced sources..." >&2
commits_table="$(target/release/examples/commits --seconds 120)"

echo "CLI import, $samples samples..." >&2
"$tailhunt" lab synth lognormal --count "$samples" --median 500us --sigma 0.5 -o "$tmp/l.csv" >/dev/null
csv_bytes="$(file_bytes "$tmp/l.csv")"

timed "$tailhunt" --db "$tmp/t.db" import "$tmp/l.csv" >"$tmp/import.out"
th_secs="$secs" th_rss="$rss_mb"
th_bytes="$(file_bytes "$tmp/t.db" "$tmp/t.db-wal")"
th_count="$(sqlite3 "$tmp/t.db" 'SELECT SUM(n) FROM sample_blocks')"

# The peer: what a user does with the same file and the sqlite3 shell (which wraps .import in
# one transaction). Same pragmas as the store.
cat >"$tmp/peer.sql" <<EOF
PRAGMA journal_mode = WAL;
PRAGMA synchronous = NORMAL;
CREATE TABLE samples (latency_ns INTEGER);
.import --csv --skip 1 $tmp/l.csv samples
EOF
timed sqlite3 "$tmp/p.db" <"$tmp/peer.sql" >/dev/null
sq_secs="$secs" sq_rss="$rss_mb"
sq_bytes="$(file_bytes "$tmp/p.db" "$tmp/p.db-wal")"
sq_count="$(sqlite3 "$tmp/p.db" 'SELECT COUNT(*) FROM samples')"

read -r steal1 total1 < <(cpu_ticks)
finished="$(date -u +%Y-%m-%dT%H:%M:%SZ)"

for got in "$th_count" "$sq_count"; do
    if [[ "$got" != "$samples" ]]; then
        echo "bench/store.sh: an import stored $got samples, not $samples (see $tmp)" >&2
        exit 1
    fi
done

calc() { awk "BEGIN { printf \"$1\", $2 }"; }
cli_row() { # name secs rss bytes
    echo "| $1 | $2 | $(calc '%.2f M' "$samples / $2 / 1e6") | $3 | $(calc '%.2f' "$4 / $samples") |"
}

model="$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
mem_gib="$(awk '/^MemTotal/ { printf "%.1f", $2 / 1048576 }' /proc/meminfo)"
steal_pct="$(calc '%.2f' "100 * ($steal1 - $steal0) / (($total1 - $total0) > 0 ? ($total1 - $total0) : 1)")"

report="$tmp/report.md"
cat >"$report" <<EOF
# Store ingest benchmark

\`SAMPLES=$samples bench/store.sh\`, $started to $finished.
Goals from the issue: ingest >= 1 M samples/s, <= 4 bytes per latency sample for typical data.

## Machine

| | |
|---|---|
| CPU | $model, $(nproc) CPUs |
| memory | $mem_gib GiB |
| kernel | $(uname -r) |
| rustc | $(rustc --version) |
| sqlite3 CLI | $(sqlite3 --version | cut -d' ' -f1) |
| steal time during the run | $steal_pct % of CPU time |

## Library: tailhunt store vs one SQLite row per sample

\`cargo run --release --locked -p tailhunt-store --example ingest -- --samples $samples\`
(crates/store/examples/ingest.rs). Timed from the start of the run to its commit; size after
a WAL checkpoint (db + wal). Data sets, all seeded: \`latency-us\`: log-normal latencies, median
500 us, sigma 0.5, whole microseconds, latency only; \`latency-ns\`: the same at ns resolution;
\`load-fixed-rate\`: an open-loop generator at 1 kHz (intended, start, end; send lag log-normal
median 2 us sigma 1; service log-normal median 500 us sigma 0.5 at ns; 0.1% timeouts).

$library_table

## CLI: \`tailhunt import\` vs \`sqlite3 .import --csv\`

Input: \`tailhunt lab synth lognormal --count $samples --median 500us --sigma 0.5\`, a one-column
CSV of $(calc '%.0f' "$csv_bytes / 1048576") MiB ($(calc '%.2f' "$csv_bytes / $samples") bytes/sample). \`tailhunt --db t.db import l.csv\`
against a sqlite3 shell with the same pragmas doing \`.import --csv --skip 1\` into
\`samples (latency_ns INTEGER)\`. Wall time of the whole process; max RSS from GNU time; size of
db + wal after the process exits.

| tool | seconds | samples/s | max RSS MiB | bytes/sample |
|---|--:|--:|--:|--:|
$(cli_row "tailhunt import" "$th_secs" "$th_rss" "$th_bytes")
$(cli_row "sqlite3 .import" "$sq_secs" "$sq_rss" "$sq_bytes")

Rate ratio tailhunt / sqlite3: $(calc '%.1fx' "$sq_secs / $th_secs"); size ratio sqlite3 / tailhunt: $(calc '%.1fx' "$sq_bytes / $th_bytes").

## Durability by time

\`cargo run --release --locked -p tailhunt-store --example commits -- --seconds 120\`
(crates/store/examples/commits.rs). The run writer commits the block still filling at least
every interval (\`tailhunt load --commit-interval\`, default 500 ms; 1 s for other writers), so a
\`kill -9\` loses at most that much. This is its cost for an open-loop source at each rate,
against the same samples committed only every 65,536 (8 full blocks); the open block keeps its
row, rewritten as it grows. Commits use synchronous=NORMAL in WAL mode (no fsync per commit:
a killed process loses nothing committed; a power cut may lose the last commits).

$commits_table
EOF

cat "$report"
if [[ "$write" == 1 ]]; then
    mkdir -p bench/results
    cp "$report" bench/results/store.md
    echo "wrote bench/results/store.md" >&2
fi
