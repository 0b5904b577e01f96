#!/usr/bin/env bash
# Run-queue tracer overhead: `tailhunt runq` against libbpf-tools `runqlat` under the same
# scheduler-heavy workloads, in one run.
#
#   bench/runq.sh [--write]   ROUNDS=N (3), PIPE_LOOPS=N (200000), MSG_LOOPS=N (1000)
#
# Workloads (perf bench, linux-perf): `sched pipe -l PIPE_LOOPS` (two tasks ping-ponging over a
# pipe: a context switch and a wakeup per message, the worst case for a sched_switch hook) and
# `sched messaging -g 2 -l MSG_LOOPS` (80 tasks sending to each other: wakeups and run-queue
# waits across both CPUs). Each round, in a shuffled order, each workload runs under:
#   - none: no tracer;
#   - tailhunt: `tailhunt runq` with its defaults (tp_btf, the pid-indexed array, per-cgroup
#     histograms, preemption and wait attribution, outlier events), and with
#     `--store task-storage`, `--store hash` and `--attach raw-tp` (the choices the timestamp
#     store comment cites);
#   - runqlat: libbpf-tools `runqlat` (one global log2 histogram).
# Reported per tracer: the workload's slowdown against `none` (pipe: usecs/op; messaging: total
# time), and the kernel's own BPF statistics: mean ns per hook run (run_time_ns / run_cnt over
# all of the tracer's programs). BPF statistics are on for every traced run (tailhunt turns
# them on itself; for runqlat the sysctl kernel.bpf_stats_enabled is set, and restored at exit,
# and its programs are read from /proc/PID/fdinfo), so both pay the same few ns for them.
# Figures are medians of the rounds with min-max. Prints markdown; --write also stores it with
# the machine description in bench/results/runq.md. Needs root, perf, runqlat (libbpf-tools).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_flags bench/runq.sh "ROUNDS=N, PIPE_LOOPS=N, MSG_LOOPS=N" "$@"
rounds="${ROUNDS:-3}"
pipe_loops="${PIPE_LOOPS:-200000}"
msg_loops="${MSG_LOOPS:-1000}"
positive_whole bench/runq.sh "ROUNDS=$rounds" "PIPE_LOOPS=$pipe_loops" "MSG_LOOPS=$msg_loops"
if ((EUID != 0)); then
    echo "bench/runq.sh: needs root (it loads BPF programs); run it with sudo" >&2
    exit 2
fi
runqlat=$(command -v runqlat || echo /usr/sbin/runqlat)
if ! [[ -x "$runqlat" ]]; then
    echo "bench/runq.sh: runqlat is not installed; install it with 'sudo apt-get install libbpf-tools'" >&2
    exit 2
fi
if ! perf bench sched pipe -l 10 >/dev/null 2>&1; then
    echo "bench/runq.sh: 'perf bench' does not run; install it with 'sudo apt-get install linux-perf'" >&2
    exit 2
fi

cargo build --release --locked -p tailhunt >&2
bin="$PWD/target/release/tailhunt"
tmp="$(mktemp -d /tmp/tailhunt-bench-runq.XXXXXX)"
stats_old="$(cat /proc/sys/kernel/bpf_stats_enabled)"
tracer_pid=""
cleanup() {
    [[ -n "$tracer_pid" ]] && kill -INT "$tracer_pid" 2>/dev/null && wait "$tracer_pid" 2>/dev/null || true
    echo "$stats_old" >/proc/sys/kernel/bpf_stats_enabled
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Waits until a tracer's stderr (file $1) shows it has attached.
wait_attached() {
    for _ in $(seq 200); do
        grep -q -e "tracing run-queue latency" -e "Tracing run queue latency" "$1" 2>/dev/null && return 0
        sleep 0.05
    done
    echo "bench/runq.sh: the tracer did not start: $(cat "$1")" >&2
    exit 1
}

# Sums run_time_ns and run_cnt over the BPF programs a process holds open.
fdinfo_cost() {
    local pid=$1 ns=0 cnt=0 f
    for f in /proc/"$pid"/fdinfo/*; do
        if grep -q '^prog_type:' "$f" 2>/dev/null; then
            ns=$((ns + $(awk '/^run_time_ns:/ { print $2 }' "$f")))
            cnt=$((cnt + $(awk '/^run_cnt:/ { print $2 }' "$f")))
        fi
    done
    echo "$ns $cnt"
}

workload() { # name -> prints the figure (pipe: usecs/op; messaging: seconds)
    case "$1" in
        pipe) perf bench sched pipe -l "$pipe_loops" 2>/dev/null | awk '/usecs\/op/ { print $1 }' ;;
        messaging) perf bench sched messaging -g 2 -l "$msg_loops" 2>/dev/null | awk '/Total time/ { print $3 }' ;;
    esac
}

run_one() { # tracer workload
    local tracer=$1 w=$2 figure ns cnt
    case "$tracer" in
        none)
            echo 0 >/proc/sys/kernel/bpf_stats_enabled
            record "${w}_none" "$(workload "$w")"
            return
            ;;
        runqlat)
            echo 1 >/proc/sys/kernel/bpf_stats_enabled
            "$runqlat" >"$tmp/out" 2>"$tmp/err" &
            tracer_pid=$!
            # runqlat prints its banner on stdout
            for _ in $(seq 200); do grep -q "Tracing" "$tmp/out" && break; sleep 0.05; done
            figure=$(workload "$w")
            read -r ns cnt < <(fdinfo_cost "$tracer_pid")
            kill -INT "$tracer_pid"
            wait "$tracer_pid" || true
            ;;
        th_*)
            echo 0 >/proc/sys/kernel/bpf_stats_enabled
            local extra=()
            case "$tracer" in
                th_task) extra=(--store task-storage) ;;
                th_hash) extra=(--store hash) ;;
                th_raw) extra=(--attach raw-tp) ;;
            esac
            "$bin" --db "$tmp/b.db" runq --json -q "${extra[@]}" >"$tmp/out" 2>"$tmp/err" &
            tracer_pid=$!
            # The line appears only without -q; wait for the programs in fdinfo instead.
            for _ in $(seq 200); do
                [[ "$(fdinfo_cost "$tracer_pid")" != "0 0" ]] && break
                sleep 0.05
            done
            figure=$(workload "$w")
            kill -INT "$tracer_pid"
            wait "$tracer_pid" || true
            read -r ns cnt < <(python3 -c 'import json,sys
d=json.load(open(sys.argv[1]))["overhead"]["programs"]
print(sum(p["run_time_ns"] for p in d), sum(p["run_cnt"] for p in d))' "$tmp/out")
            ;;
    esac
    tracer_pid=""
    record "${w}_$tracer" "$figure"
    record "${w}_${tracer}_ns_per_hook" "$(calc %.1f "$ns / ($cnt > 0 ? $cnt : 1)")"
}

tracers=(none th_array th_task th_hash th_raw runqlat)
started="$(date -u +%FT%TZ)"
steal_mark
load_start="$(awk '{ print $1 }' /proc/loadavg)"
for r in $(seq "$rounds"); do
    for job in $(for w in pipe messaging; do for t in "${tracers[@]}"; do echo "$t:$w"; done; done | shuf); do
        echo "round $r: ${job%%:*} under ${job#*:}" >&2
        run_one "${job%%:*}" "${job#*:}"
    done
done
steal="$(steal_since)"
finished="$(date -u +%FT%TZ)"
load_end="$(awk '{ print $1 }' /proc/loadavg)"

label() {
    case "$1" in
        th_array) echo "tailhunt runq (defaults: tp_btf, array by pid)" ;;
        th_task) echo "tailhunt runq --store task-storage" ;;
        th_hash) echo "tailhunt runq --store hash" ;;
        th_raw) echo "tailhunt runq --attach raw-tp (array)" ;;
        runqlat) echo "libbpf-tools runqlat" ;;
    esac
}
report() {
    echo "# Run-queue tracer overhead"
    echo
    echo "\`ROUNDS=$rounds PIPE_LOOPS=$pipe_loops MSG_LOOPS=$msg_loops bench/runq.sh\`, $started to $finished,"
    echo "tailhunt built from commit $(git rev-parse --short HEAD). Targets from the issue: <= 300 ns per"
    echo "hook on average, and a slowdown no worse than runqlat's while producing per-cgroup"
    echo "histograms and attribution."
    echo
    machine_rows
    echo "| runqlat | $(dpkg-query -W -f='libbpf-tools ${Version}' libbpf-tools 2>/dev/null || echo unknown) |"
    echo "| steal time during the run | $steal % of CPU time |"
    echo "| other work on the machine | load average $load_start at the start, $load_end at the end |"
    echo
    echo "## Results"
    echo
    echo "Median (min-max) of $rounds rounds. Slowdown: the workload's figure under the tracer over its"
    echo "figure with no tracer (medians). ns per hook: the kernel's run_time_ns / run_cnt over all of"
    echo "the tracer's programs during the workload."
    echo
    echo "| tracer | pipe usecs/op | pipe slowdown | pipe ns/hook | messaging s | messaging slowdown | messaging ns/hook |"
    echo "|---|--:|--:|--:|--:|--:|--:|"
    local pn mn
    pn=$(median_of pipe_none)
    mn=$(median_of messaging_none)
    echo "| no tracer | $(fmt_agg pipe_none %.2f 1) | | | $(fmt_agg messaging_none %.3f 1) | | |"
    for t in th_array th_task th_hash th_raw runqlat; do
        echo "| $(label $t) | $(fmt_agg pipe_$t %.2f 1) | $(calc %.2fx "$(median_of pipe_$t) / $pn") | $(fmt_agg pipe_${t}_ns_per_hook %.0f 1) | $(fmt_agg messaging_$t %.3f 1) | $(calc %.2fx "$(median_of messaging_$t) / $mn") | $(fmt_agg messaging_${t}_ns_per_hook %.0f 1) |"
    done
    local lo hi
    echo
    for w in pipe messaging; do
        read -r _ lo hi _ < <(agg ${w}_none)
        echo "Run-to-run spread of $w with no tracer: $(calc %.0f "100 * ($hi - $lo) / $(median_of ${w}_none)")% of its median;" \
            "slowdowns smaller than that are within the noise."
    done
    echo
    echo "ns per hook is the steadier figure: the kernel times each program run itself, so other work"
    echo "on the machine changes it little; the workloads' own times move with the host's load."
}
report >"$tmp/report.md"
publish runq
