#!/usr/bin/env bash
# Load generator benchmark: tailhunt against wrk and sockperf, same servers, same run.
#
#   bench/load.sh [--write]    ROUNDS=N (3), CONNS=N (32), SLO_P99_MS=N (10), QUICK=1 (~1 min),
#                              RES_PCT=N (2; the max-rate search stops within N %),
#                              TH_THREADS="1 2" (1), PIN=0|1 (1), PRIORITY=0|1 (1)
#
# 1. Max rate: one `tailhunt serve http --threads 1 --timestamps=false` per round; `wrk -t1 -cCONNS`
#    (closed loop) runs before and after every tailhunt run, so each tailhunt run has a wrk run
#    either side of it in the same half minute; tailhunt (open loop, --conns CONNS
#    --max-inflight 1: the same connections and requests in flight as wrk, the same request
#    bytes) searches for the highest multiple of the wrk run before it that it carries (a failed
#    step is tried once more), with --threads from TH_THREADS. A round's ratio: the highest, over
#    its carried steps, of a step's replies/s / the better of the wrk runs either side of it.
#    PIN=1 (2+ CPUs): the max-rate server on CPU 0, its clients (wrk, tailhunt) on CPU 1; the
#    ping-pong part is not pinned (a cross-CPU wake-up per message would dominate it).
#    PRIORITY=1 (root): this session's autogroup runs at nice -20 (restored at exit), so other
#    work on a shared machine (builds) takes less of the measured tools' CPUs.
# 2. Ping-pong: `sockperf ping-pong --tcp` against `sockperf server`, and `tailhunt load tcp://`
#    --conns 1 --max-inflight 1 against `tailhunt serve tcp`, at 1k and 10k messages/s, 64 bytes
#    each way: p50/p99 round trip, tailhunt's both from the intended send time and from the
#    actual send (service time, from `tailhunt export`).
# Every round shuffles the order of the tools; figures are medians of the rounds with min-max.
# Prints markdown; --write also stores it, with the machine description, in
# bench/results/load.md. Needs cargo, wrk, sockperf, python3, GNU time and ss (iproute2).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

write=0
for arg in "$@"; do
    case "$arg" in
        --write) write=1 ;;
        -h | --help)
            sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *)
            echo "bench/load.sh: unknown argument '$arg' (use --write, or ROUNDS=N, CONNS=N," \
                "SLO_P99_MS=N, QUICK=1 in the environment)" >&2
            exit 2
            ;;
    esac
done

quick="${QUICK:-0}"
if [[ "$quick" == 1 ]]; then
    rounds="${ROUNDS:-1}" http_secs=3 pp_secs=3 res_pct="${RES_PCT:-5}"
else
    rounds="${ROUNDS:-3}" http_secs=5 pp_secs=10 res_pct="${RES_PCT:-2}"
fi
conns="${CONNS:-32}"
slo_ms="${SLO_P99_MS:-10}"
for pair in "ROUNDS=$rounds" "CONNS=$conns" "SLO_P99_MS=$slo_ms"; do
    if ! [[ "${pair#*=}" =~ ^[1-9][0-9]*$ ]]; then
        echo "bench/load.sh: ${pair%%=*}='${pair#*=}' is not a positive whole number" >&2
        exit 2
    fi
done
for tool in wrk sockperf; do
    if ! command -v "$tool" >/dev/null; then
        echo "bench/load.sh: $tool (a peer tool) is not installed; run scripts/setup.sh or" \
            "'sudo apt-get install $tool'" >&2
        exit 2
    fi
done
for tool in python3 ss; do
    if ! command -v "$tool" >/dev/null; then
        echo "bench/load.sh: $tool is needed (JSON and percentiles; listening checks);" \
            "install it with 'sudo apt-get install ${tool/ss/iproute2}'" >&2
        exit 2
    fi
done
if ! [[ -x /usr/bin/time ]]; then
    echo "bench/load.sh: GNU time (/usr/bin/time, for client CPU) is not installed;" \
        "install it with 'sudo apt-get install time'" >&2
    exit 2
fi

# Scheduling: servers and clients on CPUs of their own, ahead of other work on the machine.
srv_pin=() cli_pin=()
if [[ "${PIN:-1}" == 1 ]] && (($(nproc) >= 2)); then
    srv_pin=(taskset -c 0) cli_pin=(taskset -c 1)
fi
prio_old=""
if [[ "${PRIORITY:-1}" == 1 ]] && [[ -w /proc/self/autogroup ]]; then
    prio_old="$(awk '{ print $3 }' /proc/self/autogroup)"
    echo -20 2>/dev/null >/proc/self/autogroup || prio_old=""
fi

tmp="$(mktemp -d)"
pids=()
cleanup() {
    local p
    [[ -n "$prio_old" ]] && echo "$prio_old" >/proc/self/autogroup 2>/dev/null
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT

echo "building (release)..." >&2
cargo build --release --locked -p tailhunt >&2
tailhunt="${CARGO_TARGET_DIR:-target}/release/tailhunt"
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"

# ---------------------------------------------------------------------------------------------
# Helpers

log() { echo "load.sh: $*" >&2; }
# shellcheck source=bench/lib.sh
source bench/lib.sh
# Nearest-rank p50 and p99 (the ceil(q n)-th smallest, as tailhunt's analysis) of the numbers
# on standard input.
pcts() {
    sort -n | awk '{ a[NR] = $1 } END {
        if (NR == 0) { print 0, 0; exit }
        i50 = int((50 * NR + 99) / 100); i99 = int((99 * NR + 99) / 100);
        print a[i50], a[i99] }'
}
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
wait_listening() { # port
    local i
    for i in $(seq 50); do
        if [[ -n "$(ss -ltnH "sport = :$1")" ]]; then return 0; fi
        sleep 0.1
    done
    log "nothing listens on 127.0.0.1:$1 after 5 s"
    return 1
}
stop() { # pid: stops one process this script started
    kill "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}
# Starts `tailhunt serve PROTO ARGS...` on a free port for at most $2 seconds; sets srv_pid and
# srv_port.
start_tailhunt_server() { # proto seconds args...
    local proto="$1" secs="$2" i
    shift 2
    local log_file="$tmp/serve-$proto-$RANDOM.log"
    "${srv_pin[@]}" "$tailhunt" --db "$tmp/serve.db" serve "$proto" --listen 127.0.0.1:0 --duration "${secs}s" \
        "$@" 2>"$log_file" >/dev/null &
    srv_pid=$!
    pids+=("$srv_pid")
    srv_port=""
    for i in $(seq 50); do
        srv_port="$(sed -n 's/^serving .* on 127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$log_file")"
        [[ -n "$srv_port" ]] && return 0
        sleep 0.1
    done
    log "tailhunt serve $proto did not start: $(cat "$log_file")"
    exit 1
}
# One tailhunt load step's numbers from its --json output:
# status ok errors timeouts unsent achieved_rate p50 p99 send_lag_p99 steal% run_id series sent
# lateness_p50
step_fields() {
    python3 - "$1" <<'EOF'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
    s = d["steps"][0]
except (OSError, ValueError, KeyError, IndexError):
    print("failed 0 0 0 0 0 0 0 0 0 none none 0 0")
    sys.exit(0)
lat = s["latency_ns"] or {"p50": 0, "p99": 0}
print(d["status"], s["ok"], s["errors"], s["timeouts"], s["unsent"], round(s["achieved_rate"]),
      lat["p50"], lat["p99"], s["send_lag_p99_ns"], "%.2f" % (100 * s["steal"]), d["run_id"],
      s["series"], s["sent"], (s.get("client_lateness_ns") or {"p50": 0})["p50"])
EOF
}
# Exact p50/p99 (ns) of latency from intended, service time (end - start) and send lag
# (start - intended) of a run's ok samples, and the rate they were answered at (ok samples over
# first intended send to last answer): "lat50 lat99 svc50 svc99 lag50 lag99 answered_per_s".
export_pcts() { # run series
    "$tailhunt" --db "$tmp/load.db" export "$1" --series "$2" >"$tmp/export.csv"
    local col
    for col in lat svc lag; do
        awk -F, -v c="$col" 'NR > 1 && $6 == "ok" {
            print ((c == "lat") ? $4 - $2 : (c == "svc") ? $4 - $3 : $3 - $2) }' "$tmp/export.csv" | pcts
    done | tr '\n' ' '
    awk -F, 'NR > 1 && $6 == "ok" { n++; if (!lo || $2 < lo) lo = $2; if ($4 > hi) hi = $4 }
        END { printf "%.0f\n", (hi > lo ? n * 1e9 / (hi - lo) : 0) }' "$tmp/export.csv"
}
ratio() { calc '%.2f' "($2) > 0 ? ($1) / ($2) : 0"; }
# A wrk latency figure ("150.00us", "1.20ms", "2.00s") in µs.
to_us() {
    awk -v v="$1" 'BEGIN { n = v + 0; u = v; sub(/^[0-9.]+/, "", u);
        printf "%.1f", (u == "ms") ? n * 1000 : (u == "s") ? n * 1e6 : (u == "m") ? n * 6e7 : n }'
}

# ---------------------------------------------------------------------------------------------
# 1. Max rate: wrk against tailhunt, same server, same connections.

# Configurations of tailhunt load searched for a max rate: "name threads max_inflight".
th_configs=()
for t in ${TH_THREADS:-1}; do th_configs+=("th$t $t 1"); done
echo "| round | config | multiple of the wrk run before | offered rate | try | replies/s | wrk before / after | ratio to the better | ok | errors+timeouts+unsent | p50 | p99 | send lag p99 | client CPU/request | steal | carried |" >"$tmp/steps.md"
echo "|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|" >>"$tmp/steps.md"
: >"$tmp/steps.txt"

http_port=""
# A pair (a tailhunt run and the wrk runs either side) counts when those wrk runs are within
# steady_pct % of each other; a void pair is run again, up to void_max times a step.
steady_pct=10 void_max=4
# One wrk run; sets w_rate (Requests/sec), w_p50 and w_p99 (µs, from the actual send), w_ok (1
# when the acceptance rule tailhunt's steps meet takes it: no socket errors or non-2xx replies,
# p99 within the limit) and w_cpu (client CPU per request, µs). Every run is recorded.
wrk_once() { # round
    local out="$tmp/wrk-run.txt" n
    timeout $((http_secs + 30)) /usr/bin/time -f '%U %S' -o "$tmp/wrk-time.txt" \
        "${cli_pin[@]}" wrk -t1 -c"$conns" -d"${http_secs}s" --latency \
        "http://127.0.0.1:$http_port/" >"$out"
    w_rate="$(awk '/^Requests\/sec:/ { print $2 }' "$out")"
    if [[ -z "$w_rate" ]]; then
        log "wrk printed no Requests/sec: $(cat "$out")"
        exit 1
    fi
    w_p50="$(to_us "$(awk '$1 == "50%" { print $2 }' "$out")")"
    w_p99="$(to_us "$(awk '$1 == "99%" { print $2 }' "$out")")"
    w_ok=0
    if ! grep -qE 'Socket errors|Non-2xx' "$out" &&
        awk -v p="$w_p99" -v l="$slo_ms" 'BEGIN { exit !(p <= l * 1000) }'; then
        w_ok=1
    fi
    grep -qE 'Socket errors|Non-2xx' "$out" && record wrk_errors "$1"
    n="$(awk '/requests in/ { print $1 }' "$out")"
    w_cpu="$(awk -v n="${n:-0}" '{ printf "%.1f", (n > 0 ? 1e6 * ($1 + $2) / n : 0) }' "$tmp/wrk-time.txt")"
    record wrk_rate "$w_rate"
    record wrk_p50_us "$w_p50"
    record wrk_p99_us "$w_p99"
    record wrk_cpu_us "$w_cpu"
    ((w_ok == 0)) && record wrk_not_accepted "$1"
    log "round $1: wrk $w_rate req/s, p99 $w_p99 us, $([[ $w_ok == 1 ]] && echo accepted || echo "not accepted")"
}
# The pairing. Every tailhunt run of the max-rate part is flanked by wrk runs: the round starts
# with one (wrk_start), and each tailhunt run is followed by one (wrk_flank), which is also the
# run before the next. A tailhunt run is compared with the better of the two wrk runs either
# side of it (ref_rate: an accepted run beats one that was not, then the higher rate), so both
# tools are measured in the same half minute: the host's speed on this shared machine moves by
# a fifth within minutes, and a wrk figure from the start of a round said more about that than
# about the clients once tailhunt's search had run for two minutes.
wrk_start() { # round
    log "round $1: wrk -t1 -c$conns -d${http_secs}s before and after every tailhunt run"
    wrk_once "$1"
    wb_rate="$w_rate" wb_ok="$w_ok"
}
wrk_flank() { # round
    wrk_once "$1"
    if ((w_ok > wb_ok)) || { ((w_ok == wb_ok)) && awk "BEGIN { exit !($w_rate > $wb_rate) }"; }; then
        ref_rate="$w_rate" ref_ok="$w_ok"
    else
        ref_rate="$wb_rate" ref_ok="$wb_ok"
    fi
    step_wb="$wb_rate" step_wa="$w_rate"
    pair_steady="$(awk -v a="$wb_rate" -v b="$w_rate" -v p="$steady_pct" \
        'BEGIN { hi = (a > b ? a : b); lo = (a > b ? b : a); print ((hi - lo) * 100 <= p * hi) ? 1 : 0 }')"
    ((pair_steady == 0)) && record wrk_pairs_void 1
    wb_rate="$w_rate" wb_ok="$w_ok"
}
# Replies per second of a run's ok samples, measured like wrk's Requests/sec: replies over the
# time from the first intended send to the last reply.
answered_rate() { # run series
    "$tailhunt" --db "$tmp/load.db" export "$1" --series "$2" |
        awk -F, 'NR > 1 && $6 == "ok" { n++; if (!lo || $2 < lo) lo = $2; if ($4 > hi) hi = $4 }
            END { printf "%.0f\n", (hi > lo ? n * 1e9 / (hi - lo) : 0) }'
}
# One tailhunt step offered Q times the rate of the wrk run just before it, tried a second time
# (a new pair: the wrk run after the first try is the one before the second) if the first is not
# carried (a stall of the shared machine fails an open-loop step at any rate); sets carried=1
# when it was carried, step_answered to its replies/s and step_ratio to them over ref_rate. A
# pair whose wrk runs differ by more than $steady_pct % is void and run again (up to
# $void_max times a step): the host changed speed during it (this one moves between two speeds
# a fifth apart, for seconds at a time), so neither tool's figure there compares with the
# other's. The rule reads only wrk's two runs, never tailhunt's result.
th_step() { # round name threads inflight q
    local try=1 voids=0
    while ((try <= 2)); do
        th_once "$1" "$2" "$3" "$4" "$(calc '%.0f' "int($5 * $wb_rate / 100) * 100")" "$try" "$5"
        if [[ "$pair_steady" == 0 ]] && ((voids < void_max)); then
            voids=$((voids + 1))
            continue
        fi
        [[ "$carried" == 1 ]] && break
        try=$((try + 1))
    done
    return 0
}
# One `tailhunt load` of the max-rate part against the reference server, its user and system
# seconds written to $1, its JSON to $2 and its stderr to $3, stopped after $4 s; the flags that
# differ between a step and the saturated run follow.
th_run() { # times json err secs flags...
    local times="$1" json="$2" err="$3" secs="$4"
    shift 4
    # --request-bytes 0: no padding header, so the request is wrk's (GET / with a Host header).
    timeout "$secs" /usr/bin/time -f '%U %S' -o "$times" \
        "${cli_pin[@]}" "$tailhunt" --db "$tmp/load.db" load "http://127.0.0.1:$http_port/" \
        --duration "${http_secs}s" --warmup 0s --conns "$conns" --nodelay=true --spin 50us \
        --request-bytes 0 "$@" --json >"$json" 2>"$err" || true
}
th_once() { # round name threads inflight rate try q
    local round="$1" name="$2" threads="$3" inflight="$4" rate="$5" try="$6" q="$7"
    local json="$tmp/step.json"
    th_run "$tmp/time.txt" "$json" "$tmp/step.err" $((http_secs + 40)) \
        --rate "$rate" --threads "$threads" --max-inflight "$inflight"
    read -r st ok errs tos unsent achieved p50 p99 lag99 steal run series sent lag50 < <(step_fields "$json")
    # Client CPU per request (µs), warm-up included: user + system time over the requests sent.
    step_cpu="$(awk -v n="$sent" '{ printf "%.1f", (n > 0 ? 1e6 * ($1 + $2) / n : 0) }' "$tmp/time.txt" 2>/dev/null || echo 0)"
    carried=0
    if [[ "$st" == complete ]] && ((errs + tos + unsent == 0)) && ((ok > 0)) &&
        ((achieved * 100 >= rate * 95)) && ((p99 <= slo_ms * 1000000)); then
        carried=1
    fi
    [[ "$st" == failed ]] && log "tailhunt load failed: $(head -c 400 "$tmp/step.err")"
    step_answered=0
    [[ "$carried" == 1 ]] && step_answered="$(answered_rate "$run" "$series")"
    step_p50="$p50" step_p99="$p99" step_lag99="$lag99" step_lag50="$lag50" step_cpu_us="$step_cpu"
    wrk_flank "$round"
    step_ratio=0
    [[ "$carried" == 1 ]] && step_ratio="$(calc '%.3f' "$step_answered / $ref_rate")"
    local verdict
    verdict="$([[ $carried == 1 ]] && echo yes || echo no)"
    [[ "$pair_steady" == 0 ]] && verdict="$verdict, void: wrk moved $(calc '%.0f' "100 * ($step_wb > $step_wa ? $step_wb - $step_wa : $step_wa - $step_wb) / ($step_wb > $step_wa ? $step_wb : $step_wa)") %"
    echo "$round $name $rate $([[ $pair_steady == 1 ]] && echo "$carried" || echo v) $p99 $lag99 $step_cpu" >>"$tmp/steps.txt"
    echo "| $round | $name | $q | $(calc '%.1fk' "$rate / 1000") | $try | $([[ $carried == 1 ]] && calc '%.1fk' "$step_answered / 1000") | $(calc '%.1fk' "$step_wb / 1000") / $(calc '%.1fk' "$step_wa / 1000") | $([[ $carried == 1 ]] && echo "${step_ratio}x") | $ok | $((errs + tos + unsent)) | $(calc '%.0f us' "$p50 / 1000") | $(calc '%.2f ms' "$p99 / 1e6") | $(calc '%.2f ms' "$lag99 / 1e6") | $step_cpu us | $steal % | $verdict |" >>"$tmp/steps.md"
    log "round $round: $name at $rate/s (${q}x the wrk run before): p99 $(calc '%.2f' "$p99 / 1e6") ms, send lag p99 $(calc '%.2f' "$lag99 / 1e6") ms -> $([[ $carried == 1 ]] && echo "carried, ${step_ratio}x the better wrk run either side" || echo "not carried")$([[ $pair_steady == 0 ]] && echo " (void: the wrk runs either side differ by more than $steady_pct %)")"
}
# Saturated throughput, no latency criterion: offered 1.5x the rate of the wrk run before it,
# tailhunt's backlog keeps every connection busy as wrk's closed loop does, so its replies/s is
# the client + server capacity measured like wrk's (nothing times out: --timeout 60s); compared
# with the better wrk run either side, like a step.
th_sat() { # round
    local voids=0
    while :; do
        th_sat_once "$1"
        [[ "$pair_steady" == 1 ]] || ((voids >= void_max)) && break
        voids=$((voids + 1))
        log "round $1: the saturated run's pair is void (the wrk runs either side differ by more than $steady_pct %): again"
    done
    if ((sat_ans > 0)); then
        record sat_max "$sat_ans"
        record sat_cpu_us "$sat_cpu"
        echo "$1 sat $sat_ans $ref_rate" >>"$tmp/maxes.txt"
    fi
}
th_sat_once() { # round
    local rate json="$tmp/sat.json"
    rate="$(calc '%.0f' "int($wb_rate * 1.5 / 100) * 100")"
    log "round $1: tailhunt saturated, offered $rate/s"
    th_run "$tmp/sat-time.txt" "$json" "$tmp/sat.err" $((http_secs * 3 + 60)) \
        --rate "$rate" --timeout 60s --threads 1 --max-inflight 1
    read -r st ok errs tos unsent _ _ _ _ _ run series _ _ < <(step_fields "$json")
    sat_ans=0
    [[ "$st" == complete ]] && ((errs + tos + unsent == 0)) && sat_ans="$(answered_rate "$run" "$series")"
    wrk_flank "$1"
    if ((sat_ans == 0)); then
        log "round $1: saturated run: status $st, $errs errors, $tos timeouts, $unsent unsent"
        return 0
    fi
    # CPU per request when saturated, like wrk's (a closed loop is always saturated): every
    # connection busy, so polling finds work; the whole process over the requests answered.
    sat_cpu="$(awk -v n="$ok" '{ printf "%.2f", ($1 + $2) * 1e6 / n }' "$tmp/sat-time.txt")"
    log "round $1: tailhunt saturated: $sat_ans replies/s, $(ratio "$sat_ans" "$ref_rate")x the better wrk run either side"
}
# Highest carried multiple of wrk's rate: from a start multiple Q (the median of earlier rounds,
# else 1), x1.1 up (or /1.1 down) until the verdict flips (at most 12 steps), then bisection
# until the bracket is within $res_pct % of its low end. A step is offered Q times the wrk run
# before it; the round's figure is the replies/s of the highest carried Q's step over the
# better wrk run either side of that step.
# The round's figure is its best evidence: of the carried steps whose pair was not void, the
# one with the highest ratio to the better wrk run either side of it, as the unpaired search's
# figure was its highest carried rate (the highest Q carried need not be that step: the wrk run
# after it may have been faster than the one its rate was set from). Without such a step, the
# step of the highest Q carried. keep_best (called in th_search) sets th_search's best_*.
keep_best() {
    if [[ "$carried" == 1 && "$pair_steady" == 1 ]] && awk "BEGIN { exit !($step_ratio > $best_ratio) }"; then
        best_ratio="$step_ratio" best_p50="$step_p50" best_p99="$step_p99" best_lag="$step_lag99"
        best_cpu="$step_cpu_us" best_ans="$step_answered" best_lat50="$step_lag50" best_ref="$ref_rate"
    fi
}
th_search() { # round name threads inflight
    local round="$1" name="$2" threads="$3" inflight="$4"
    local q lo=0 hi=0 tries=0 lo_p50=0 lo_p99=0 lo_lag=0 lo_cpu=0 lo_ans=0 lo_lat50=0 lo_ref=0
    local best_ratio=0 best_p50 best_p99 best_lag best_cpu best_ans best_lat50 best_ref
    q="$(median_of "${name}_q")"
    [[ "$q" == 0 ]] && q=1.000
    steal_mark
    while ((tries < 12)); do
        tries=$((tries + 1))
        th_step "$round" "$name" "$threads" "$inflight" "$q"
        keep_best
        if [[ "$carried" == 1 ]]; then
            lo="$q" lo_p50="$step_p50" lo_p99="$step_p99" lo_lag="$step_lag99" lo_cpu="$step_cpu_us" lo_ans="$step_answered" lo_lat50="$step_lag50" lo_ref="$ref_rate"
            [[ "$hi" != 0 ]] && break
            q="$(calc '%.3f' "$q * 1.1")"
        else
            hi="$q"
            [[ "$lo" != 0 ]] && break
            q="$(calc '%.3f' "$q / 1.1")"
            awk "BEGIN { exit !($q < 0.05) }" && break
        fi
    done
    [[ "$lo" != 0 && "$hi" == 0 ]] && log "round $round: $name carried every multiple up to ${lo}x (12 steps): the search found no limit"
    local mid
    while [[ "$lo" != 0 && "$hi" != 0 ]] && awk "BEGIN { exit !(($hi - $lo) > $lo * $res_pct / 100) }"; do
        mid="$(calc '%.3f' "($lo + $hi) / 2")"
        th_step "$round" "$name" "$threads" "$inflight" "$mid"
        keep_best
        if [[ "$carried" == 1 ]]; then
            lo="$mid" lo_p50="$step_p50" lo_p99="$step_p99" lo_lag="$step_lag99" lo_cpu="$step_cpu_us" lo_ans="$step_answered" lo_lat50="$step_lag50" lo_ref="$ref_rate"
        else
            hi="$mid"
        fi
    done
    record "${name}_q" "$lo"
    if [[ "$best_ratio" != 0 ]]; then
        lo_p50="$best_p50" lo_p99="$best_p99" lo_lag="$best_lag" lo_cpu="$best_cpu"
        lo_ans="$best_ans" lo_lat50="$best_lat50" lo_ref="$best_ref"
    fi
    record "${name}_max" "$lo_ans"
    record "${name}_p50_us" "$(calc '%.1f' "$lo_p50 / 1000")"
    record "${name}_p99_us" "$(calc '%.1f' "$lo_p99 / 1000")"
    record "${name}_lag50_us" "$(calc '%.1f' "$lo_lat50 / 1000")"
    record "${name}_lag99_us" "$(calc '%.1f' "$lo_lag / 1000")"
    record "${name}_cpu_us" "$lo_cpu"
    record "steal_$round" "$(steal_since)"
    log "round $round: $name carried up to ${lo}x the wrk run before (bracket $lo-${hi}x); best: $lo_ans replies/s against wrk's $lo_ref"
    echo "$round $name $lo_ans $lo_ref" >>"$tmp/maxes.txt"
}

# ---------------------------------------------------------------------------------------------
# 2. Ping-pong: sockperf against tailhunt, 64-byte messages each way.

msg_bytes=64
frame_header=4 # tailhunt frames: 4-byte length + body (crates/load/src/wire.rs)
body_bytes=$((msg_bytes - frame_header))
sp_port="" th_tcp_port=""
run_sockperf() { # round mps
    local out="$tmp/sockperf-$1-$2.txt" steal cpu
    log "round $1: sockperf ping-pong --mps=$2 -t $pp_secs"
    steal_mark
    timeout $((pp_secs + 30)) /usr/bin/time -f '%U %S %e' -o "$tmp/time.txt" \
        sockperf ping-pong --tcp -i 127.0.0.1 -p "$sp_port" --mps="$2" -t "$pp_secs" \
        -m "$msg_bytes" --full-rtt >"$out" 2>&1 || true
    steal="$(steal_since)"
    cpu="$(awk '{ printf "%.0f", 100 * ($1 + $2) / $3 }' "$tmp/time.txt")"
    local p50 p99 n
    p50="$(awk '/percentile 50\.000 =/ { print $NF }' "$out")"
    p99="$(awk '/percentile 99\.000 =/ { print $NF }' "$out")"
    n="$(sed -n 's/.*Total \([0-9]*\) observations.*/\1/p' "$out" | head -1)"
    # Replies per second of the measured part ("[Valid Duration] RunTime=S sec; ...
    # ReceivedMessages=N").
    record "sp$2_answered" "$(sed -n 's/.*Valid Duration\] RunTime=\([0-9.]*\) sec;.*ReceivedMessages=\([0-9]*\).*/\2 \1/p' "$out" |
        awk '{ printf "%.0f", ($2 > 0 ? $1 / $2 : 0) }')"
    if [[ -z "$p50" || -z "$p99" ]]; then
        log "sockperf printed no percentiles: $(tail -5 "$out")"
        exit 1
    fi
    record "sp$2_p50_us" "$p50"
    record "sp$2_p99_us" "$p99"
    record "sp$2_n" "${n:-0}"
    record "sp$2_cpu" "$cpu"
    record "steal_$1" "$steal"
    log "round $1: sockperf $2/s: p50 $p50 us, p99 $p99 us, client CPU $cpu%"
}
run_tailhunt_pp() { # round rate
    local json="$tmp/pp.json" steal cpu
    log "round $1: tailhunt load tcp:// --rate $2 --duration ${pp_secs}s"
    steal_mark
    timeout $((pp_secs + 40)) /usr/bin/time -f '%U %S %e' -o "$tmp/time.txt" \
        "$tailhunt" --db "$tmp/load.db" load "tcp://127.0.0.1:$th_tcp_port" --rate "$2" \
        --duration "${pp_secs}s" --conns 1 --max-inflight 1 --nodelay=true \
        --request-bytes "$body_bytes" --json >"$json" 2>"$tmp/pp.err" || true
    steal="$(steal_since)"
    cpu="$(awk '{ printf "%.0f", 100 * ($1 + $2) / $3 }' "$tmp/time.txt")"
    read -r st ok errs tos unsent _ _ _ _ _ run series _ _ < <(step_fields "$json")
    if [[ "$st" == failed ]]; then
        log "round $1: tailhunt load tcp:// failed: $(head -c 400 "$tmp/pp.err")"
        exit 1
    fi
    if [[ "$st" != complete ]] || ((errs + tos + unsent > 0)); then
        log "round $1: tailhunt ping-pong at $2/s: status $st, $errs errors, $tos timeouts, $unsent unsent"
        record "th$2_failed" 1
    fi
    local lat50 lat99 svc50 svc99 lag50 lag99 answered
    read -r lat50 lat99 svc50 svc99 lag50 lag99 answered < <(export_pcts "$run" "$series")
    record "th$2_answered" "$answered"
    record "th$2_lat50_us" "$(calc '%.1f' "$lat50 / 1000")"
    record "th$2_lat99_us" "$(calc '%.1f' "$lat99 / 1000")"
    record "th$2_svc50_us" "$(calc '%.1f' "$svc50 / 1000")"
    record "th$2_svc99_us" "$(calc '%.1f' "$svc99 / 1000")"
    record "th$2_lag50_us" "$(calc '%.1f' "$lag50 / 1000")"
    record "th$2_lag99_us" "$(calc '%.1f' "$lag99 / 1000")"
    record "th$2_n" "$ok"
    record "th$2_cpu" "$cpu"
    record "steal_$1" "$steal"
    log "round $1: tailhunt $2/s: from intended p50 $((lat50 / 1000)) us p99 $((lat99 / 1000)) us; service p50 $((svc50 / 1000)) us p99 $((svc99 / 1000)) us"
}

# ---------------------------------------------------------------------------------------------
# The rounds.

read -r run_steal0 run_total0 < <(cpu_ticks)
load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
started="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
t_start="$(date +%s)"
: >"$tmp/order.txt"
# Upper bounds on how long one round's servers must live.
http_round_secs=$(((http_secs + 3) * 30 + 60))
pp_round_secs=$(((pp_secs + 15) * 4 + 60))

for ((round = 1; round <= rounds; round++)); do
    # Max rate: a fresh server for the round, shared by every tool.
    start_tailhunt_server http "$http_round_secs" --threads 1 --timestamps=false
    http_pid="$srv_pid" http_port="$srv_port"
    mapfile -t order < <(printf '%s\n' sat "${th_configs[@]%% *}" | shuf)
    echo "$round max-rate: ${order[*]}" >>"$tmp/order.txt"
    wrk_start "$round"
    for item in "${order[@]}"; do
        if [[ "$item" == sat ]]; then
            th_sat "$round"
        else
            for c in "${th_configs[@]}"; do
                read -r name threads inflight <<<"$c"
                [[ "$name" == "$item" ]] && th_search "$round" "$name" "$threads" "$inflight"
            done
        fi
    done
    stop "$http_pid"

    # Ping-pong: both servers idle (blocked) while the other tool runs.
    sp_port="$(free_port)"
    timeout "$pp_round_secs" sockperf server --tcp -i 127.0.0.1 -p "$sp_port" \
        >"$tmp/sockperf-server.log" 2>&1 &
    sp_pid=$!
    pids+=("$sp_pid")
    wait_listening "$sp_port"
    srv_pin_saved=("${srv_pin[@]}") srv_pin=()
    start_tailhunt_server tcp "$pp_round_secs" --reply-bytes "$body_bytes"
    srv_pin=("${srv_pin_saved[@]}")
    th_tcp_pid="$srv_pid" th_tcp_port="$srv_port"
    mapfile -t order < <(printf '%s\n' sockperf:1000 sockperf:10000 tailhunt:1000 tailhunt:10000 | shuf)
    echo "$round ping-pong: ${order[*]}" >>"$tmp/order.txt"
    for item in "${order[@]}"; do
        case "$item" in
            sockperf:*) run_sockperf "$round" "${item#*:}" ;;
            tailhunt:*) run_tailhunt_pp "$round" "${item#*:}" ;;
        esac
    done
    stop "$th_tcp_pid"
    stop "$sp_pid"
done

read -r run_steal1 run_total1 < <(cpu_ticks)
load_end="$(cut -d' ' -f1-3 /proc/loadavg)"
if ((${#srv_pin[@]} > 0)); then
    pin_text="max rate: the server pinned to CPU 0 and the clients (wrk, tailhunt) to CPU 1 with taskset; ping-pong: not pinned, placed by the scheduler"
else
    pin_text="server and client share them, placed by the scheduler"
fi
if [[ -n "$prio_old" ]]; then
    prio_text="the benchmark's session ran at autogroup nice -20, ahead of other sessions' work"
else
    prio_text="no priority over other work (PRIORITY=0 or not root)"
fi
finished="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
elapsed=$(($(date +%s) - t_start))
run_steal="$(calc '%.2f' "100 * ($run_steal1 - $run_steal0) / (($run_total1 - $run_total0) > 0 ? ($run_total1 - $run_total0) : 1)")"

# ---------------------------------------------------------------------------------------------
# The report.

wrk_med="$(median_of wrk_rate)"
# A tailhunt config's ratios to wrk by round (its figure over the better wrk run either side of
# the run that gave it), as "key value" lines for agg: CONFIG_ratio.
awk '{ printf "%s_ratio %.4f\n", $2, ($4 > 0 ? $3 / $4 : 0) }' "$tmp/maxes.txt" >>"$tmp/results.txt"
# The same ratios as "min-max" (one round: the ratio).
round_ratios() {
    local m lo hi n
    read -r m lo hi n < <(agg "${1}_ratio") || true
    if [[ -z "${m:-}" ]]; then echo "n/a"; return; fi
    if ((n > 1)); then calc '%.2f-' "$lo"; fi
    calc '%.2f' "$hi"
}
best_name="" best_max=0
for c in "${th_configs[@]}"; do
    read -r name _ <<<"$c"
    m="$(median_of "${name}_max")"
    if awk "BEGIN { exit !($m > $best_max) }"; then best_name="$name" best_max="$m"; fi
done
rate_ratio="$(calc '%.2f' "$(median_of "${best_name}_ratio")")"
# Target: >= 1.2x wrk's rate in every round (the lowest round ratio decides).
best_rounds="$(round_ratios "$best_name")"
rate_met="$(awk -v r="${best_rounds%%-*}" 'BEGIN { print ((r + 0 >= 1.2) ? "met" : "not met") }')"
# Per-round ratios of tailhunt's ping-pong p99 from the intended send to sockperf's p99 at a
# rate: "min-max" (the n-th value of each key is round n).
pp_round_ratios() { # rate
    local r a b lo=999 hi=0 x
    for ((r = 1; r <= rounds; r++)); do
        a="$(awk -v k="th$1_lat99_us" -v n="$r" '$1 == k { i++; if (i == n) print $2 }' "$tmp/results.txt")"
        b="$(awk -v k="sp$1_p99_us" -v n="$r" '$1 == k { i++; if (i == n) print $2 }' "$tmp/results.txt")"
        [[ -z "$a" || -z "$b" ]] && continue
        x="$(ratio "$a" "$b")"
        lo="$(calc '%.2f' "$x < $lo ? $x : $lo")" hi="$(calc '%.2f' "$x > $hi ? $x : $hi")"
    done
    if ((rounds > 1)); then echo "$lo-$hi"; else echo "$hi"; fi
}
# Target: p99 from the intended send within 2x sockperf's p99 in every round.
pp_p99_verdict() { # rate
    local rr
    rr="$(pp_round_ratios "$1")"
    awk -v r="${rr##*-}" -v all="$rr" 'BEGIN { printf "%s (rounds %sx)", ((r + 0 <= 2 && r + 0 > 0) ? "met" : "not met"), all }'
}
# CPU per 1k requests, ms, from a client's CPU % of one CPU at a rate.
cpu_per_1k() { # key rate
    local c
    c="$(median_of "$1")"
    calc '%.1f' "1e6 * ($c / 100) / $2"
}

pp_row() { # rate
    local r="$1"
    echo "| $r/s | sockperf | $(fmt_agg "sp${r}_p50_us" '%.1f' 1) | $(fmt_agg "sp${r}_p99_us" '%.1f' 1) | — | $(fmt_agg "sp${r}_answered" '%.0f' 1) | $(fmt_agg "sp${r}_cpu" '%.0f' 1) % |"
    echo "| $r/s | tailhunt, from intended send | $(fmt_agg "th${r}_lat50_us" '%.1f' 1) | $(fmt_agg "th${r}_lat99_us" '%.1f' 1) | $(ratio "$(median_of "th${r}_lat50_us")" "$(median_of "sp${r}_p50_us")")x | $(fmt_agg "th${r}_answered" '%.0f' 1) | $(fmt_agg "th${r}_cpu" '%.0f' 1) % |"
    echo "| $r/s | tailhunt, service time (from actual send) | $(fmt_agg "th${r}_svc50_us" '%.1f' 1) | $(fmt_agg "th${r}_svc99_us" '%.1f' 1) | $(ratio "$(median_of "th${r}_svc50_us")" "$(median_of "sp${r}_p50_us")")x | | |"
    echo "| $r/s | (tailhunt send lag) | $(fmt_agg "th${r}_lag50_us" '%.1f' 1) | $(fmt_agg "th${r}_lag99_us" '%.1f' 1) | | | |"
}
# Target: p50 within 20% of sockperf's, i.e. a ratio in [0.8, 1.2]; faster counts as met too.
pp_verdict() { # key-prefix rate
    local a b
    a="$(median_of "th$2_$1")" b="$(median_of "sp$2_p50_us")"
    # Compared unrounded: 1.204 is not within 20 %, although it prints as 1.20.
    awk -v a="$a" -v b="$b" 'BEGIN { x = (b > 0 ? a / b : 0);
        printf "%s (%.2fx)", (x <= 1.2 ? "met" : "not met"), x }'
}

# The "why" behind the verdicts, from this run's numbers.
median_stdin() {
    sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) { print 0; exit }
        print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}
overlap() { # key-a key-b: "overlap" when the min-max ranges of two aggregates overlap
    local a_lo a_hi b_lo b_hi
    read -r _ a_lo a_hi _ < <(agg "$1") || true
    read -r _ b_lo b_hi _ < <(agg "$2") || true
    awk "BEGIN { print ((${a_lo:-0} <= ${b_hi:-0} && ${b_lo:-0} <= ${a_hi:-0}) ? \"overlap\" : \"do not overlap\") }"
}
us_or_ms() { calc "$(awk -v v="$1" 'BEGIN { print (v >= 10000 ? "%.1f ms" : "%.1f µs") }')" "$1 >= 10000 ? $1 / 1000 : $1"; }
{
    n_fail="$(awk '$4 == 0' "$tmp/steps.txt" | wc -l)"
    lag_share="$(awk '$4 == 0 && $5 > 0 { print 100 * $6 / $5 }' "$tmp/steps.txt" | median_stdin)"
    wrk_cpu="$(median_of wrk_cpu_us)"
    if [[ "$rate_met" == met ]]; then
        echo "- tailhunt carried at least wrk's rate with the same connections and requests in flight."
    else
        echo "- Why the max rate falls short: in the $n_fail step(s) tailhunt did not carry, send lag"
        echo "  p99 was a median $(calc '%.0f' "$lag_share") % of the p99 latency: the late requests waited in the client."
        echo "  With one request in flight per connection a request waits whenever all $conns connections"
        echo "  are busy, so this shows a backlog, whichever side slowed down. Saturated, tailhunt answered"
        echo "  $(calc '%.2f' "$(median_of sat_ratio)")x wrk's rate (rounds $(round_ratios sat)): compare it with the max-rate ratio above."
        echo "  Client CPU per request: tailhunt (\`$best_name\`, at its max rate, polling for due sends"
        echo "  included) $(fmt_agg "${best_name}_cpu_us" '%.1f' 1) µs, saturated $(fmt_agg sat_cpu_us '%.1f' 1) µs; wrk $(fmt_agg wrk_cpu_us '%.1f' 1) µs."
    fi
    th1_m="$(median_of th1_max)" th2_m="$(median_of th2_max)"
    if [[ -n "$(agg th2_max)" ]] && awk "BEGIN { exit !($th2_m < $th1_m) }"; then
        echo "- \`--threads 2\` carried less than \`--threads 1\` ($(calc '%.1fk' "$th2_m / 1000") against $(calc '%.1fk' "$th1_m / 1000")/s): with the"
        echo "  single-threaded server that is three busy threads on $(nproc) CPUs."
    fi
    echo "- Ping-pong: tailhunt's latency from the intended send time is its service time plus its"
    echo "  send lag (p50 $(us_or_ms "$(median_of th1000_lag50_us)") at 1k/s, $(us_or_ms "$(median_of th10000_lag50_us)") at 10k/s). At 1k/s the lag is wake-up"
    echo "  lag: tailhunt sleeps until each request is due (client CPU $(calc '%.0f' "$(median_of th1000_cpu)") %) and the host wakes it"
    echo "  that late. sockperf measures from its actual send (its client used $(calc '%.0f' "$(median_of sp1000_cpu)") % of a CPU at"
    echo "  1k/s), so its figures hold no such wait, and in a ping-pong a late reply delays its next"
    echo "  send instead of showing as latency. The service-time rows compare the round trips; the"
    echo "  from-intended rows are what a tailhunt user sees. Each tool runs against its own server"
    echo "  (the protocols differ), so a row compares a client + server pair, not the clients alone."
    for r in 1000 10000; do
        behind="$(awk -v k="th${r}_lag50_us" '$1 == k && $2 > 1000 { n++ } END { print n + 0 }' "$tmp/results.txt")"
        if ((behind > 0)); then
            read -r _ _ lag _ < <(agg "th${r}_lag50_us")
            echo "- At $r/s tailhunt fell behind its timetable in $behind of $rounds round(s) (send lag p50 up to"
            echo "  $(us_or_ms "$lag"); it answered"
            echo "  $(fmt_agg "th${r}_answered" '%.0f' 1)/s). One connection with one message in flight carries one"
            echo "  request per round trip, and tailhunt's round trip once requests go back to back (service"
            echo "  p50 $(us_or_ms "$(median_of "th${r}_svc50_us")") against $(us_or_ms "$(median_of th1000_svc50_us)") at 1k/s) is close to the $(calc '%.0f' "1e6 / $r") µs between"
            echo "  requests, so a slow stretch leaves a backlog the rest of the run cannot clear. The"
            echo "  from-intended figure then measures that backlog, which sockperf's closed loop cannot"
            echo "  show (its next send waits for the reply; it answered $(calc '%.0f' "$(median_of "sp${r}_answered")")/s with a p50 of"
            echo "  $(us_or_ms "$(median_of "sp${r}_p50_us")"))."
        fi
    done
    for k in wrk_errors th1000_failed th10000_failed; do
        if [[ -n "$(agg "$k")" ]]; then
            echo "- Some measurements were not clean ($k in $(agg "$k" | awk '{ print $4 }') round(s)): see the log on standard error."
        fi
    done
    echo "- Spread: the ranges over rounds of tailhunt's service-time p50 and sockperf's p50"
    echo "  $(overlap th1000_svc50_us sp1000_p50_us) at 1k/s and $(overlap th10000_svc50_us sp10000_p50_us) at 10k/s. Steal time was $run_steal % over the run."
} >"$tmp/notes.md"

model="$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
mem_gib="$(awk '/^MemTotal/ { printf "%.1f", $2 / 1048576 }' /proc/meminfo)"
steal_rounds=""
for ((r = 1; r <= rounds; r++)); do
    steal_rounds+="round $r: $(fmt_agg "steal_$r" '%.2f' 1) %; "
done

report="$tmp/report.md"
cat >"$report" <<EOF
# Load generator benchmark

\`$([[ "$quick" == 1 ]] && echo "QUICK=1 ")ROUNDS=$rounds CONNS=$conns SLO_P99_MS=$slo_ms bench/load.sh\`, $started to $finished ($elapsed s),
tailhunt built from commit $commit. Targets from the issue: max sustained rate >= 1.2x wrk's in every round;
ping-pong p99 from the intended send within 2x sockperf's p99 at 1k and 10k messages/s in every round.

## Machine

| | |
|---|---|
| CPU | $model, $(nproc) CPUs ($pin_text) |
| memory | $mem_gib GiB |
| kernel | $(uname -r) |
| rustc | $(rustc --version) |
| wrk | $(wrk --version 2>&1 | head -1 | awk '{ print $1, $2, $3 }') |
| sockperf | $(sockperf --version 2>&1 | sed -n 's/.*version \([^ ]*\).*/\1/p' | head -1) |
| steal time during the run | $run_steal % of CPU time (per measurement, by round: ${steal_rounds%; }) |
| other work on the machine | load average $load_start at the start, $load_end at the end (the benchmark itself keeps about 2 busy); $prio_text |

Each round starts fresh servers and runs the tools in a shuffled order
($(sed 's/$/;/' "$tmp/order.txt" | tr '\n' ' ' | sed 's/; $//')).
Figures are the median of $rounds round(s), with the range (min-max) in brackets.

## Max rate: tailhunt against wrk

Server: \`tailhunt serve http --listen 127.0.0.1:PORT --threads 1 --timestamps=false\`, one per
round, shared by both tools; 64-byte bodies, keep-alive. Without its timestamps (which only
\`load --breakdown\` reads) the server spends about 6% less CPU per request: it is the server
that must not be the bottleneck here.

- wrk (closed loop: each connection sends its next request when the previous one is answered):
  \`wrk -t1 -c$conns -d${http_secs}s --latency http://127.0.0.1:PORT/\`, Requests/sec (replies
  over its run time). **Paired with tailhunt:** wrk runs at the start of the round and after
  every tailhunt run, so every tailhunt run has a wrk run just before and just after it, and is
  compared with the better of the two: a run that meets the acceptance rule (no socket errors
  or non-2xx replies, p99 <= $slo_ms ms; its p99 is from the actual send) beats one that does
  not, then the higher rate counts. The host's speed moves by a fifth within minutes here, and
  tailhunt's search takes about two; a wrk figure from the start of the round then says more
  about the host's minute than about the clients. **Void pairs:** this host also moves between
  two speeds a fifth apart for seconds at a time; when the wrk runs either side of a tailhunt
  run differ by more than $steady_pct %, the host changed speed during the pair, neither figure
  compares with the other, and the pair is run again (up to $void_max times a step; the rule
  reads only wrk's runs, never tailhunt's result). $(agg wrk_pairs_void | awk '{ n = $4 } END { print n + 0 }') pair(s) of this run were void (the steps among them are in
  the step table below). The wrk row below is every wrk run of the benchmark
  ($(agg wrk_rate | awk '{ print $4 }') runs; $(agg wrk_not_accepted | awk '{ n = $4 } END { print n + 0 }') not accepted).
- tailhunt (open loop): \`tailhunt load http://127.0.0.1:PORT/ --rate R --duration ${http_secs}s
  --warmup 0s --conns $conns --max-inflight 1 --threads T --nodelay=true --spin 50us --request-bytes 0 --json\`,
  so it has the same $conns connections with at most one request in flight on each, as wrk
  (tailhunt's default \`--max-inflight 1000\` pipelines requests on a connection, which wrk does
  not), sends the same request (\`GET / HTTP/1.1\` and a Host header, no padding) and, like wrk,
  counts from its first request (no warm-up excluded).
- **The criterion.** A rate R is **carried** when a ${http_secs} s step at R has every request
  answered ok (no errors, timeouts or unsent requests), achieved rate >= 0.95 R, and **p99
  latency measured from the intended send time <= $slo_ms ms** (exact nearest-rank p99 of all
  R x ${http_secs} requests). A step that fails is run once more and counts if the second run
  passes (as a new pair: the wrk run after the first try is the one before the second).
  tailhunt's **max rate** is the replies/s of its highest carried step, measured like wrk's
  Requests/sec: ok replies over the time from the first intended send to the last reply (the
  offered R is in the step table). The search is over the multiple Q of the wrk run before the
  step (R = Q x that run's rate): it starts at the median carried Q of earlier rounds (round 1:
  1.0), goes up (or down) by 1.1x until the verdict flips, then bisects the bracket until it is
  within $res_pct % of its low end (the resolution of the figure). A round's ratio is its best
  evidence, as the figure of a search for a rate is its highest carried rate: of its carried
  steps whose pair was not void, the highest replies/s over the better wrk run either side of
  the step (the step of the highest Q carried need not be that one: the wrk run after it can be
  faster than the one its rate was set from). The saturated run is flanked and compared the
  same way. Both tools get the same retries.
  The p99 limit matters: \`achieved_rate\` alone is the completions per second of the
  scheduled window, so it equals R whenever every request is eventually answered — even when an
  overloaded client sends them hundreds of ms late. Offered a fraction e more than it can carry,
  an open-loop client falls behind by e seconds per second, so over ${http_secs} s a ${slo_ms} ms p99
  catches overload of about $(calc '%.1f' "100 * $slo_ms / ($http_secs * 1000)") %.

| tool | max rate | ratio to wrk | ratio per round | p50 | p99 | send lag p99 |
|---|--:|--:|--:|--:|--:|--:|
| wrk -t1 -c$conns (every run) | $(fmt_agg wrk_rate '%.1fk' 1000) | 1.00x | | $(fmt_agg wrk_p50_us '%.0f us' 1) | $(fmt_agg wrk_p99_us '%.0f us' 1) | (closed loop) |
$(for c in "${th_configs[@]}"; do read -r n t _ <<<"$c"; echo "| tailhunt --threads $t --conns $conns --max-inflight 1 | $(fmt_agg "${n}_max" '%.1fk' 1000) | $(calc '%.2f' "$(median_of "${n}_ratio")")x | $(round_ratios "$n") | $(fmt_agg "${n}_p50_us" '%.0f us' 1) | $(fmt_agg "${n}_p99_us" '%.0f us' 1) | $(fmt_agg "${n}_lag99_us" '%.0f us' 1) |"; done)
| tailhunt offered 1.5x wrk's rate (saturated, no latency criterion) | $(fmt_agg sat_max '%.1fk' 1000) | $(calc '%.2f' "$(median_of sat_ratio)")x | $(round_ratios sat) | | | |

wrk's latencies are from the actual send (closed loop: a slow answer delays the next request
instead of showing as latency); tailhunt's are from the intended send time at its max rate.

The saturated row is the like-for-like capacity check: offered more than it can carry, tailhunt
keeps all $conns connections busy as wrk's closed loop does, and its replies/s is measured like
wrk's with no latency criterion. When that ratio is about 1 and the max-rate ratio is lower, the
client is not slower than wrk; the difference is the criterion: an open-loop client at a rate R
close to the capacity C works off a stall of S ms in S x R / (C - R) ms, every request of that
stretch counts late, and 1 % of a ${http_secs} s step is $(calc '%.0f' "$http_secs * 10") ms, while a
stall only lowers wrk's average.

## Ping-pong latency: tailhunt against sockperf

One connection, one message in flight, $msg_bytes bytes each way on the wire, ${pp_secs} s per
measurement, TCP_NODELAY on both ends.

- sockperf: \`sockperf server --tcp -i 127.0.0.1 -p PORT\` and \`sockperf ping-pong --tcp -i
  127.0.0.1 -p PORT --mps=M -t $pp_secs -m $msg_bytes --full-rtt\` (\`--full-rtt\`: without it
  sockperf reports half the round trip; its default message is 14 bytes). Percentiles from
  its output, in µs.
- tailhunt: \`tailhunt serve tcp --listen 127.0.0.1:PORT2 --reply-bytes $body_bytes\` and
  \`tailhunt load tcp://127.0.0.1:PORT2 --rate M --duration ${pp_secs}s --conns 1 --max-inflight 1
  --nodelay=true --request-bytes $body_bytes --json\` (no \`--spin\`: on this host's CPU count the
  default does not poll, see \`tailhunt load --help\`; tailhunt frames add a 4-byte length, so
  both tools move $msg_bytes bytes each way). Exact nearest-rank percentiles of the run's ok
  samples from \`tailhunt export RUN --series SERIES\`: latency from the intended send time
  (what tailhunt reports; includes the client's own wake-up lag), service time
  \`end_ns - start_ns\` (from the actual send, like sockperf's round trip) and send lag
  \`start_ns - intended_ns\`.
- answered/s: replies per second actually received — sockperf's over its measured run time,
  tailhunt's over its first intended send to its last reply (an open-loop client that cannot
  keep up falls behind its timetable; sockperf's next send waits for the reply instead).
- Client CPU: user + system time of the client process over its wall time (GNU time; both
  include start-up and warm-up), in % of one CPU.

| rate | tool | p50 µs | p99 µs | p50 ratio to sockperf | answered/s | client CPU |
|---|---|--:|--:|--:|--:|--:|
$(pp_row 1000)
$(pp_row 10000)

## Self-overhead: what the client itself costs

CPU per 1k requests: the client process's user + system time (GNU time) per 1,000 requests; at
the max rate over the requests of its highest carried step (wrk: of its counted run; tailhunt
also saturated, offered 1.5x wrk's rate, as wrk's closed loop always is: below saturation its
polling for due sends fills the idle time), in
ping-pong from its CPU share at the rate. Lateness it adds: tailhunt's own send lag (intended to
actual send; the \`client_lateness\` series), p50 / p99. wrk and sockperf are closed loops: each
send waits for the previous reply, so they have no timetable to be late against and report no
such figure.

| tool | CPU per 1k requests at max rate | ping-pong 1k/s: CPU per 1k | 10k/s: CPU per 1k | lateness at max rate p50 / p99 | ping-pong 1k/s lateness p50 / p99 | 10k/s lateness p50 / p99 |
|---|--:|--:|--:|--:|--:|--:|
| tailhunt | $(fmt_agg "${best_name}_cpu_us" '%.1f ms' 1); saturated $(fmt_agg sat_cpu_us '%.1f ms' 1) | $(cpu_per_1k th1000_cpu 1000) ms | $(cpu_per_1k th10000_cpu 10000) ms | $(fmt_agg "${best_name}_lag50_us" '%.1f' 1) / $(fmt_agg "${best_name}_lag99_us" '%.0f µs' 1) | $(fmt_agg th1000_lag50_us '%.1f' 1) / $(fmt_agg th1000_lag99_us '%.1f µs' 1) | $(fmt_agg th10000_lag50_us '%.1f' 1) / $(fmt_agg th10000_lag99_us '%.1f µs' 1) |
| wrk | $(fmt_agg wrk_cpu_us '%.1f ms' 1) | | | not reported (closed loop) | | |
| sockperf | | $(cpu_per_1k sp1000_cpu 1000) ms | $(cpu_per_1k sp10000_cpu 10000) ms | | not reported (closed loop) | not reported (closed loop) |

## What this means

- Max rate: tailhunt's best configuration (\`$best_name\`) carried $(calc '%.1fk' "$best_max / 1000")/s
  against wrk's $(calc '%.1fk' "$wrk_med / 1000")/s on the same server: ${rate_ratio}x (rounds ${best_rounds}x), target (>= 1.2x in every round) **$rate_met**.
- Ping-pong p99 from the intended send within 2x sockperf's p99 in every round: 1k/s
  **$(pp_p99_verdict 1000)**, 10k/s **$(pp_p99_verdict 10000)**.
- (The previous target, p50 within 20% of sockperf's, for reference; service time, like for
  like): 1k/s **$(pp_verdict svc50_us 1000)**, 10k/s **$(pp_verdict svc50_us 10000)**; latency
  from the intended send time: 1k/s $(pp_verdict lat50_us 1000), 10k/s $(pp_verdict lat50_us 10000).
EOF

cat "$tmp/notes.md" >>"$report" 2>/dev/null || true
cat >>"$report" <<EOF

## Every tailhunt max-rate step

"carried": no errors, timeouts or unsent requests, achieved rate >= 0.95 R, p99 <= $slo_ms ms.
Client CPU per request: user + system time of the \`tailhunt load\` process over the requests it
sent (warm-up included). Steal is tailhunt's own figure for the step.

$(cat "$tmp/steps.md")
EOF

cat "$report"
if [[ "$write" == 1 ]]; then
    mkdir -p bench/results
    cp "$report" bench/results/load.md
    echo "wrote bench/results/load.md" >&2
fi
