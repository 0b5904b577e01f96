#!/usr/bin/env bash
# Agent soak: `tailhunt agent` probing local echo servers at 1,000 probes per second for
# SOAK_SECS (600) with run-queue tracing and the socket sampler on, its memory and CPU sampled
# every second, every sample counted three ways.
#
#   bench/agent.sh [--write]    SOAK_SECS=N (600), PROBES=N (20), INTERVAL_MS=N (20), WINDOW_S=N (60)
#
# Starts PROBES/2 `tailhunt serve tcp` and PROBES/2 `tailhunt serve udp` on loopback, writes an
# agent.toml with one tcp-echo or udp-echo probe per server (timeout INTERVAL_MS/4),
# probe_interval INTERVAL_MS, a run per WINDOW_S in a fresh store, and runs `tailhunt agent
# --duration SOAK_SECS`, scraping its /metrics every 10 s. Run-queue tracing ([runq], every
# RUNQ_MS=1000 ms, a runq run per window) needs root and kernel BTF; a CPU neighbour (busy 5 ms,
# asleep 15 ms: a quarter of a CPU) runs in a cgroup of its own so the tracer has waits and
# preemptions to attribute; the agent's run-queue summary line is reported, and without root
# or BTF the run says that tracing was off. Its resident memory (VmRSS) and CPU
# time (utime + stime) are read every second; growth = the peak RSS of the last whole window
# against the peak of the first whole window once start-up is over (the later of 10% of the run
# and two windows, since the store's sample blocks and the per-window state take a window to
# reach their size). Peaks, because each window's close runs the detectors over its samples, a
# transient a single reading may or may not catch; the single-reading figure is printed too.
# Lost samples: the
# prober's own count against the exported counters (both printed by the agent when it stops)
# and against the samples stored in the windows (`tailhunt runs --json`). Pass: RSS growth <
# 10% and the three counts equal. Prints markdown; --write also stores it, with the machine
# description, in bench/results/agent.md.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
source bench/lib.sh
bench_flags bench/agent.sh "SOAK_SECS=N, PROBES=N, INTERVAL_MS=N, WINDOW_S=N, RUNQ_MS=N" "$@"

soak="${SOAK_SECS:-600}"
probes="${PROBES:-20}"
interval_ms="${INTERVAL_MS:-20}"
window_s="${WINDOW_S:-60}"
runq_ms="${RUNQ_MS:-1000}"
positive_whole bench/agent.sh "SOAK_SECS=$soak" "PROBES=$probes" "INTERVAL_MS=$interval_ms" "WINDOW_S=$window_s" "RUNQ_MS=$runq_ms"
if ((interval_ms < 4)); then
    echo "bench/agent.sh: INTERVAL_MS=$interval_ms is below 4 (the timeout is a quarter of it)" >&2
    exit 2
fi
command -v python3 >/dev/null || { echo "bench/agent.sh: python3 is missing; run scripts/setup.sh" >&2; exit 1; }
command -v curl >/dev/null || { echo "bench/agent.sh: curl is missing; run scripts/setup.sh" >&2; exit 1; }

cargo build --release --locked -p tailhunt --bin tailhunt >&2
bin=target/release/tailhunt
tmp=$(mktemp -d)
pids=()
hog_dirs=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    for d in "${hog_dirs[@]}"; do
        for _ in $(seq 1 50); do rmdir "$d" 2>/dev/null && break; sleep 0.1; done
    done
    rm -rf "$tmp"
}
trap cleanup EXIT

config="$tmp/agent.toml"
printf 'listen = "127.0.0.1:0"\ninterval = "1s"\ninstance = "soak"\nstore = "%s"\nprobe_interval = "%sms"\ntimeout = "%sus"\nwindow = "%ss"\nretention = "24h"\nretention_bytes = 1073741824\n' \
    "$tmp/agent.db" "$interval_ms" "$((interval_ms * 250))" "$window_s" >"$config"
printf '[runq]\ninterval = "%sms"\n[sockets]\ninterval = "10s"\n' "$runq_ms" >>"$config"
# The CPU neighbour, in a group of its own in the cgroup2 hierarchy (and the v1 cpu
# controller's, on hybrid hosts) when this is root.
hog='import time
while True:
    t = time.perf_counter()
    while time.perf_counter() - t < 0.005:
        pass
    time.sleep(0.015)'
hog_dirs=()
if [[ $(id -u) == 0 ]]; then
    v2=$(awk '$0 ~ / - cgroup2 / { print $5; exit }' /proc/self/mountinfo)
    v1=$(awk '$0 ~ / - cgroup / && $NF ~ /(^|,)cpu(,|$)/ { print $5; exit }' /proc/self/mountinfo)
    for root in $v2 $v1; do
        hog_dirs+=("$root/tailhunt-soak-neighbour-$$")
    done
fi
join=""
for d in "${hog_dirs[@]}"; do
    mkdir "$d"
    join+="echo \$\$ > '$d/cgroup.procs' && "
done
sh -c "${join}exec python3 -c \"\$0\"" "$hog" &
pids+=($!)
# Echo servers on free ports: each prints "serving PROTO on ADDR" first on stderr.
for i in $(seq 1 "$probes"); do
    if ((i % 2)); then proto=tcp; else proto=udp; fi
    "$bin" serve "$proto" --listen 127.0.0.1:0 2>"$tmp/serve$i.err" >/dev/null &
    pids+=($!)
    for _ in $(seq 1 100); do
        grep -q ' on ' "$tmp/serve$i.err" 2>/dev/null && break
        sleep 0.05
    done
    addr=$(sed -n 's/.* on \([^ ]*\).*/\1/p' "$tmp/serve$i.err" | head -1)
    [[ -n "$addr" ]] || { echo "bench/agent.sh: echo server $i did not start" >&2; exit 1; }
    printf '[[probe]]\nname = "%s-%d"\nkind = "%s-echo"\ntarget = "%s"\n' "$proto" "$i" "$proto" "$addr" >>"$config"
done

start=$(date -u +%Y-%m-%dT%H:%M:%SZ)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
steal_mark
"$bin" agent --config "$config" --duration "${soak}s" 2>"$tmp/agent.err" &
agent=$!
pids+=("$agent")
for _ in $(seq 1 100); do
    grep -q 'http://' "$tmp/agent.err" 2>/dev/null && break
    sleep 0.05
done
listen=$(sed -n 's|.*http://\([^/]*\)/metrics.*|\1|p' "$tmp/agent.err" | head -1)
[[ -n "$listen" ]] || { echo "bench/agent.sh: the agent did not start:" >&2; cat "$tmp/agent.err" >&2; exit 1; }
: >"$tmp/rss.txt"
: >"$tmp/cpu.txt"
n=0
while kill -0 "$agent" 2>/dev/null; do
    awk '/^VmRSS/ { print $2 }' "/proc/$agent/status" 2>/dev/null >>"$tmp/rss.txt" || true
    # utime + stime, in clock ticks (fields 14 and 15; the command name has no spaces).
    awk '{ print $14 + $15 }' "/proc/$agent/stat" 2>/dev/null >>"$tmp/cpu.txt" || true
    if ((n % 10 == 0)); then
        curl -sf "http://$listen/metrics" >"$tmp/metrics.txt" 2>/dev/null || true
    fi
    n=$((n + 1))
    sleep 1
done
wait "$agent"
steal=$(steal_since)
end=$(date -u +%Y-%m-%dT%H:%M:%SZ)
"$bin" --db "$tmp/agent.db" runs --json >"$tmp/runs.json"
# The runq windows are in their own file beside the store.
if [[ -f "$tmp/agent-runq.db" ]]; then
    "$bin" --db "$tmp/agent-runq.db" runs --json >"$tmp/runq-runs.json"
else
    echo '{"runs": []}' >"$tmp/runq-runs.json"
fi

python3 - "$tmp/agent.err" "$tmp/runs.json" "$tmp/rss.txt" "$tmp/cpu.txt" "$tmp/metrics.txt" \
    "$probes" "$soak" "$interval_ms" "$window_s" "$(getconf CLK_TCK)" "$tmp/runq-runs.json" >"$tmp/figures.md" <<'PY'
import json, re, sys
err = open(sys.argv[1]).read()
runs = json.load(open(sys.argv[2]))["runs"]
rss = [int(x) for x in open(sys.argv[3]).read().split() if x.strip()]
cpu = [int(x) for x in open(sys.argv[4]).read().split() if x.strip()]
metrics = open(sys.argv[5]).read()
probes, soak, interval_ms, window_s, tck = (int(a) for a in sys.argv[6:11])
m = re.search(r"probe samples measured (\d+), exported (\d+); (\d+) window\(s\) stored, (\d+) failed, (\d+) deleted", err)
if not m:
    print(f"| agent summary | missing: {err[-500:]!r} |")
    sys.exit(0)
measured, exported, windows, failed, deleted = (int(g) for g in m.groups())
stored = sum(r["samples"] for r in runs if r.get("kind") == "probe")
def total(name):
    return sum(float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", metrics, re.M))
scraped_measured = total("tailhunt_agent_probe_measured_total")
scraped_exported = total("tailhunt_probe_samples_total")
by_outcome = {o: sum(float(v) for v in re.findall(rf'^tailhunt_probe_samples_total{{[^}}]*outcome="{o}"[^}}]*}} (\S+)$', metrics, re.M)) for o in ("ok", "error", "timeout")}
base_i = min(max(len(rss) // 10, 2 * window_s), max(len(rss) - 1, 0))
early = rss[base_i] if rss else 0
last = rss[-1] if rss else 0
point_growth = 100.0 * (last - early) / early if early else float("nan")
short = base_i > len(rss) // 2
# Peak RSS per whole window (one reading a second): each window's close runs the detectors
# over the window's samples, a transient allocation a single reading may or may not catch.
# Growth = the last whole window's peak against the peak of the first whole window after
# start-up; the shutdown (the last, partial window and its diagnosis) is left out.
peaks = [max(rss[i:i + window_s]) for i in range(0, len(rss) - window_s + 1, window_s)]
first_w = min(-(-base_i // window_s), max(len(peaks) - 1, 0))
growth = 100.0 * (peaks[-1] - peaks[first_w]) / peaks[first_w] if len(peaks) > first_w and peaks[first_w] else float("nan")
secs = max(len(cpu) - 1, 1)
cpu_pct = 100.0 * (cpu[-1] - cpu[0]) / tck / secs if len(cpu) > 1 else float("nan")
verdict = "pass" if growth < 10 and measured == exported == stored and failed == 0 else "FAIL"
print(f"| probes per round x rounds per second | {probes} x {1000 / interval_ms:.0f} = {probes * 1000 / interval_ms:.0f} probes/s |")
print(f"| samples measured (prober) / exported (counters) / stored (windows) | {measured} / {exported} / {stored} |")
print(f"| lost samples (measured - exported, measured - stored) | {measured - exported}, {measured - stored} |")
print(f"| measured per second over the run | {measured / soak:.0f} |")
print(f"| last scrape: measured / exported counters | {scraped_measured:.0f} / {scraped_exported:.0f} |")
print(f"| last scrape: ok / error / timeout | {by_outcome['ok']:.0f} / {by_outcome['error']:.0f} / {by_outcome['timeout']:.0f} |")
print(f"| windows stored / failed / deleted by retention | {windows} / {failed} / {deleted} |")
quarters = " / ".join(f"{rss[min(len(rss) - 1, len(rss) * q // 4)] / 1024:.1f}" for q in range(5)) if rss else "n/a"
print(f"| RSS at 0, 25, 50, 75, 100% of the run | {quarters} MiB |")
print(f"| RSS after start-up ({base_i} s) / at the end / max | {early / 1024:.1f} / {last / 1024:.1f} / {max(rss) / 1024:.1f} MiB |")
print(f"| RSS reading after start-up / last reading (during shutdown) | {point_growth:+.2f} % |")
print(f"| peak RSS per whole window | {' / '.join(f'{p / 1024:.1f}' for p in peaks)} MiB |")
print(f"| RSS growth after start-up (window {first_w + 1} peak to last whole window's peak) | {growth:.2f} %{' (run shorter than four windows: growth includes buffers still filling)' if short else ''} |")
rq = re.search(r"run-queue intervals (\d+), (\d+) window\(s\) stored, (\d+) failed; (\d+) cgroup label\(s\), (\d+) cgroup interval\(s\) folded", err)
off = re.search(r"run-queue tracing off: (.*)", err)
runq_runs = sum(1 for r in json.load(open(sys.argv[11]))["runs"] if r.get("kind") == "runq")
if rq:
    iv, rw, rf, labels, folded = (int(g) for g in rq.groups())
    print(f"| run-queue intervals traced / runq windows stored / failed / runq runs kept | {iv} / {rw} / {rf} / {runq_runs} |")
    print(f"| run-queue cgroup labels exported / cgroup intervals folded into other | {labels} / {folded} |")
else:
    print(f"| run-queue tracing | off: {off.group(1) if off else 'no summary line'} |")
preempt = total("tailhunt_runq_preempted_total")
waits = total("tailhunt_runq_latency_seconds_count")
print(f"| last scrape: run-queue waits / preemptions exported | {waits:.0f} / {preempt:.0f} |")
print(f"| last scrape: TCP sockets sampled (rounds) | {total('tailhunt_tcp_rounds_total'):.0f} |")
print(f"| agent CPU (utime + stime over wall time) | {cpu_pct:.1f} % of one core |")
if not rq or rf:
    verdict = "FAIL"
print(f"| verdict (RSS growth < 10%, none lost, no failed window, run-queue traced) | {verdict} |")
PY

{
    echo "# Agent soak"
    echo
    echo "\`SOAK_SECS=$soak PROBES=$probes INTERVAL_MS=$interval_ms WINDOW_S=$window_s RUNQ_MS=$runq_ms bench/agent.sh\`, $start to $end."
    echo "Goal from the issue: 10 minutes at 1,000 probes per second against local echo servers,"
    echo "RSS growth < 10%, no lost samples, the agent's own CPU reported, with run-queue tracing"
    echo "on (every ${runq_ms} ms, a runq run per window, a CPU neighbour at a quarter of a CPU) and"
    echo "the socket sampler on. Load average at the start: $load_start."
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
publish agent
grep -q '| pass |' "$tmp/figures.md"
