#!/usr/bin/env bash
# Prober soak: 1,000 probes per second against local echo servers for SOAK_SECS (600), with
# the prober's memory sampled every second and every sample counted.
#
#   bench/probe.sh [--write]    SOAK_SECS=N (600), PROBES=N (20), INTERVAL_MS=N (20)
#
# Starts PROBES/2 `tailhunt serve tcp` and PROBES/2 `tailhunt serve udp` on loopback, writes a
# configuration with one tcp-echo or udp-echo probe per server (timeout INTERVAL_MS/4), and runs
# `tailhunt probe --config ... --interval INTERVAL_MS ms --duration SOAK_SECS s`: PROBES probes
# per round, 1000 * PROBES / INTERVAL_MS probes per second. Its resident memory (VmRSS) is read
# every second; growth = last reading against the reading once start-up is over: the later of
# 10% of the run and 20 s after the store's open sample blocks (8192 samples per series, one
# sample per series per round) first fill, since those buffers are bounded but take
# 8192 x INTERVAL_MS to grow to their size. Lost samples = rounds x PROBES - samples stored (read back from the store
# with `tailhunt runs --json`). Pass: RSS growth < 10% and no lost sample. Prints markdown;
# --write also stores it, with the machine description, in bench/results/probe.md.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
source bench/lib.sh
bench_flags bench/probe.sh "SOAK_SECS=N, PROBES=N, INTERVAL_MS=N" "$@"

soak="${SOAK_SECS:-600}"
probes="${PROBES:-20}"
interval_ms="${INTERVAL_MS:-20}"
positive_whole bench/probe.sh "SOAK_SECS=$soak" "PROBES=$probes" "INTERVAL_MS=$interval_ms"
if ((interval_ms < 4)); then
    echo "bench/probe.sh: INTERVAL_MS=$interval_ms is below 4 (the timeout is a quarter of it)" >&2
    exit 2
fi
command -v python3 >/dev/null || { echo "bench/probe.sh: python3 is missing; run scripts/setup.sh" >&2; exit 1; }

cargo build --release --locked -p tailhunt --bin tailhunt >&2
bin=target/release/tailhunt
tmp=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT

# Echo servers on free ports: each prints "serving PROTO on ADDR" first on stderr.
config="$tmp/probes.toml"
printf 'interval = "%sms"\ntimeout = "%sus"\n' "$interval_ms" "$((interval_ms * 250))" >"$config"
for i in $(seq 1 "$probes"); do
    if ((i % 2)); then proto=tcp; else proto=udp; fi
    "$bin" serve "$proto" --listen 127.0.0.1:0 2>"$tmp/serve$i.err" >/dev/null &
    pids+=($!)
    for _ in $(seq 1 100); do
        grep -q ' on ' "$tmp/serve$i.err" 2>/dev/null && break
        sleep 0.05
    done
    addr=$(sed -n 's/.* on \([^ ]*\).*/\1/p' "$tmp/serve$i.err" | head -1)
    [[ -n "$addr" ]] || { echo "bench/probe.sh: echo server $i did not start" >&2; exit 1; }
    printf '[[probe]]\nname = "%s-%d"\nkind = "%s-echo"\ntarget = "%s"\n' "$proto" "$i" "$proto" "$addr" >>"$config"
done

start=$(date -u +%Y-%m-%dT%H:%M:%SZ)
steal_mark
"$bin" --db "$tmp/soak.db" probe --config "$config" --duration "${soak}s" --json \
    >"$tmp/out.json" 2>"$tmp/probe.err" &
prober=$!
: >"$tmp/rss.txt"
while kill -0 "$prober" 2>/dev/null; do
    awk '/^VmRSS/ { print $2 }' "/proc/$prober/status" 2>/dev/null >>"$tmp/rss.txt" || true
    sleep 1
done
wait "$prober"
steal=$(steal_since)
end=$(date -u +%Y-%m-%dT%H:%M:%SZ)
"$bin" --db "$tmp/soak.db" runs --json >"$tmp/runs.json"

python3 - "$tmp/out.json" "$tmp/runs.json" "$tmp/rss.txt" "$probes" "$soak" "$interval_ms" >"$tmp/figures.md" <<'PY'
import json, sys
out = json.load(open(sys.argv[1]))
runs = json.load(open(sys.argv[2]))["runs"]
rss = [int(x) for x in open(sys.argv[3]).read().split() if x.strip()]
probes, soak, interval_ms = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
stored = next(r["samples"] for r in runs if r["id"] == out["run_id"])
expected = out["rounds"] * probes
counted = sum(p["samples"] for p in out["probes"])
ok = sum(p["ok"] for p in out["probes"])
errors = sum(p["errors"] for p in out["probes"])
timeouts = sum(p["timeouts"] for p in out["probes"])
fill_s = 8192 * interval_ms / 1000
base_i = min(max(len(rss) // 10, int(fill_s) + 20), max(len(rss) - 1, 0))
early = rss[base_i] if rss else 0
last = rss[-1] if rss else 0
growth = 100.0 * (last - early) / early if early else float("nan")
short = base_i > len(rss) // 2
d = out["drift"]
ms = lambda ns: f"{ns / 1e6:.3f} ms"
verdict = "pass" if growth < 10 and stored == expected == counted else "FAIL"
print(f"| rounds x probes | {out['rounds']} x {probes} = {expected} ({expected / soak:.0f} probes/s) |")
print(f"| samples stored (store) / counted (document) | {stored} / {counted} |")
print(f"| lost samples | {expected - stored} |")
print(f"| ok / errors / timeouts | {ok} / {errors} / {timeouts} |")
quarters = " / ".join(f"{rss[min(len(rss) - 1, len(rss) * q // 4)] / 1024:.1f}" for q in range(5)) if rss else "n/a"
print(f"| RSS at 0, 25, 50, 75, 100% of the run | {quarters} MiB |")
print(f"| RSS after start-up ({base_i} s) / at the end / max | {early / 1024:.1f} / {last / 1024:.1f} / {max(rss) / 1024:.1f} MiB |")
print(f"| RSS growth after start-up | {growth:.2f} %{' (run shorter than twice the block fill time: growth includes buffers still filling)' if short else ''} |")
print(f"| schedule drift p50 / p99 / max | {ms(d['p50_ns'])} / {ms(d['p99_ns'])} / {ms(d['max_ns'])} |")
print(f"| rounds started late (> interval/10) | {d['late_rounds']} |")
print(f"| verdict (RSS growth < 10%, no lost sample) | {verdict} |")
PY

{
    echo "# Prober soak"
    echo
    echo "\`SOAK_SECS=$soak PROBES=$probes INTERVAL_MS=$interval_ms bench/probe.sh\`, $start to $end."
    echo "Goal from the issue: 10 minutes at 1,000 probes per second against local echo servers,"
    echo "flat memory (RSS growth < 10%) and no lost samples."
    echo
    machine_rows
    echo "| steal time during the run | $steal % of CPU time |"
    echo
    echo "## Figures"
    echo
    echo "| | |"
    echo "|---|---|"
    cat "$tmp/figures.md"
} >"$tmp/report.md"
publish probe
grep -q '| pass |' "$tmp/figures.md"
