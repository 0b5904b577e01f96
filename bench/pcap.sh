#!/usr/bin/env bash
# Capture analysis benchmark: `tailhunt pcap` against tshark and tcptrace on the same ~1 GB file.
#
#   bench/pcap.sh [--write] [--keep]   ROUNDS=N (3), SIZE_MB=N (1000), SMALL_MB=N (250),
#                                      CONNS=N (100000), CONNS_SECS=N (10), STREAM_MIN=N (30),
#                                      TSHARK_LIMIT=N (600, seconds for tshark's default run),
#                                      PRIORITY=0|1 (1: this session at nice -20 while it runs)
#
# 1. Generates two captures itself (bench/gen/capture.sh: a network namespace, loopback at MTU
#    1500 with offloads off, tcpdump -s 0; 2 paced bulk flows plus thousands of short
#    request/response connections): ~SIZE_MB MB and ~SMALL_MB MB; and with bench/gen/conns.py
#    (a synthetic pcap writer: the loopback generator opens only a few thousand connections a
#    second) three captures of the same length, CONNS_SECS s, holding CONNS/100, CONNS/10 and
#    CONNS short connections; and with bench/gen/stream.py two captures of one long TCP
#    connection (a segment and its ACK each millisecond), 1 and STREAM_MIN minutes long.
# 2. In one run, on the same file, each round in a shuffled order:
#    - tailhunt pcap FILE --threads 1 --link-rate 10gbit --db TMP (release build; full TCP
#      state), on both the big and the small capture (memory flat in file size), on a big and
#      a small capture of the bulk flows alone (same number of flows at both sizes), and on
#      the three many-connection captures (memory bounded by the connections open at once), and
#      on the two stream captures (memory against the capture's length on one connection); and
#      on a copy of the big capture as tcpdump left it in the page cache (th_written: every
#      other run reads its file cached as a file read from disk is, see "Captures" below);
#    - the same with --threads 2 on the big capture, the big bulk capture (speed-up on two
#      cores) and the fewest- and most-connection captures (memory with the split's batches
#      in flight), and the pass alone (crates/pcap/examples/pass.rs: from the first frame to the
#      report built, no store) with 1 and 2 threads on both, so the part that is split over
#      threads is seen apart from the end of the command (storing, diagnosing, printing);
#    - tshark -q -z io,stat,0.001 -r FILE -o tcp.analyze_sequence_numbers:FALSE
#      -o tcp.desegment_tcp_streams:FALSE (the light settings);
#    - tcptrace -l -n FILE;
#    - tshark -q -z io,stat,0.001 -r FILE with default settings (TCP sequence analysis), under
#      `timeout TSHARK_LIMIT`; once cut off, it is reported as such and left out of later rounds.
#    Each: wall time, user+sys CPU, MB/s and packets/s over CPU time, peak RSS (GNU time).
# Figures are medians of the rounds with min-max. Prints markdown; --write also stores it, with
# the machine description and steal time, in bench/results/pcap.md (keeping its hand-written
# "## Profile (by hand)" section). Captures live in a temp dir
# under /tmp, deleted at exit unless --keep. Needs root, cargo, tshark, tcptrace, tcpdump,
# ethtool, iproute2, python3, GNU time.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

write=0 keep=0
for arg in "$@"; do
    case "$arg" in
        --write) write=1 ;;
        --keep) keep=1 ;;
        -h | --help)
            awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *)
            echo "bench/pcap.sh: unknown argument '$arg' (use --write, --keep, or ROUNDS=N," \
                "SIZE_MB=N, SMALL_MB=N, TSHARK_LIMIT=N in the environment)" >&2
            exit 2
            ;;
    esac
done

rounds="${ROUNDS:-3}"
size_mb="${SIZE_MB:-1000}"
small_mb="${SMALL_MB:-250}"
tshark_limit="${TSHARK_LIMIT:-600}"
conns="${CONNS:-100000}"
conns_secs="${CONNS_SECS:-10}"
stream_min="${STREAM_MIN:-30}"
for pair in "ROUNDS=$rounds" "SIZE_MB=$size_mb" "SMALL_MB=$small_mb" "TSHARK_LIMIT=$tshark_limit" \
    "CONNS=$conns" "CONNS_SECS=$conns_secs" "STREAM_MIN=$stream_min"; do
    if ! [[ "${pair#*=}" =~ ^[1-9][0-9]*$ ]]; then
        echo "bench/pcap.sh: ${pair%%=*}='${pair#*=}' is not a positive whole number" >&2
        exit 2
    fi
done
if ((EUID != 0)); then
    echo "bench/pcap.sh: needs root (it creates a network namespace for the capture); run it" \
        "with sudo" >&2
    exit 2
fi
for tool in tshark tcptrace tcpdump ethtool ip python3 capinfos gzip zstd; do
    if ! command -v "$tool" >/dev/null; then
        echo "bench/pcap.sh: $tool is not installed; install it with 'sudo apt-get install" \
            "$(case $tool in ip) echo iproute2 ;; capinfos) echo tshark ;; *) echo "$tool" ;; esac)'" >&2
        exit 2
    fi
done
if ! [[ -x /usr/bin/time ]]; then
    echo "bench/pcap.sh: GNU time (/usr/bin/time, for CPU time and peak memory) is not" \
        "installed; install it with 'sudo apt-get install time'" >&2
    exit 2
fi

# PRIORITY=1 (default): this session's autogroup runs at nice -20 (restored at exit), so other
# work on a shared machine takes less of the measured tools' CPUs (CPU time is the main figure).
prio_old=""
if [[ "${PRIORITY:-1}" == 1 ]] && [[ -w /proc/self/autogroup ]]; then
    prio_old="$(awk '{ print $3 }' /proc/self/autogroup)"
    echo -20 2>/dev/null >/proc/self/autogroup || prio_old=""
fi

tmp="$(mktemp -d /tmp/th-bench-pcap.XXXXXX)"
cleanup() {
    [[ -n "$prio_old" ]] && echo "$prio_old" >/proc/self/autogroup 2>/dev/null
    if [[ "$keep" == 1 ]]; then
        echo "pcap.sh: kept $tmp" >&2
    else
        rm -rf "$tmp"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "building (release)..." >&2
cargo build --release --locked -p tailhunt >&2
cargo build --release --locked -p tailhunt-pcap --example pass >&2
tailhunt="${CARGO_TARGET_DIR:-target}/release/tailhunt"
pass="${CARGO_TARGET_DIR:-target}/release/examples/pass"
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"

log() { echo "pcap.sh: $*" >&2; }
# shellcheck source=bench/lib.sh
source bench/lib.sh

# ---------------------------------------------------------------------------------------------
# Captures

started="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
t_start=$(date +%s)
load_start="$(cut -d' ' -f1 /proc/loadavg)"
steal_mark
run_steal_a=$steal_a run_total_a=$total_a

big="$tmp/big.pcap" small="$tmp/small.pcap"
log "capturing ~$size_mb MB..."
bash bench/gen/capture.sh "$big" "$size_mb" 2>"$tmp/gen-big.log" || { cat "$tmp/gen-big.log" >&2; exit 1; }
log "capturing ~$small_mb MB..."
bash bench/gen/capture.sh "$small" "$small_mb" 2>"$tmp/gen-small.log" || { cat "$tmp/gen-small.log" >&2; exit 1; }
bulk="$tmp/bulk.pcap" bulk_small="$tmp/bulk-small.pcap"
log "capturing ~$size_mb MB and ~$small_mb MB of the bulk flows alone..."
RR_WORKERS=0 bash bench/gen/capture.sh "$bulk" "$size_mb" 2>"$tmp/gen-bulk.log" || { cat "$tmp/gen-bulk.log" >&2; exit 1; }
RR_WORKERS=0 bash bench/gen/capture.sh "$bulk_small" "$small_mb" 2>"$tmp/gen-bulk-small.log" || { cat "$tmp/gen-bulk-small.log" >&2; exit 1; }
conn_counts=("$((conns / 100))" "$((conns / 10))" "$conns")
for n in "${conn_counts[@]}"; do
    log "writing a ${conns_secs} s capture of $n connections..."
    python3 bench/gen/conns.py "$tmp/conns-$n.pcap" --connections "$n" --seconds "$conns_secs" \
        2>"$tmp/gen-conns-$n.log" || { cat "$tmp/gen-conns-$n.log" >&2; exit 1; }
done
stream_mins=(1 "$stream_min")
[[ "$stream_min" == 1 ]] && stream_mins=(1)
for m in "${stream_mins[@]}"; do
    log "writing a $m-minute capture of one TCP connection..."
    python3 bench/gen/stream.py "$tmp/stream-$m.pcap" --minutes "$m" \
        2>"$tmp/gen-stream-$m.log" || { cat "$tmp/gen-stream-$m.log" >&2; exit 1; }
done
log "compressing the big capture (gzip -1, zstd -3)..."
gzip -1 -c "$big" >"$big.gz"
zstd -q -3 -f "$big" -o "$big.zst"
cat "$tmp"/gen-*.log >&2
bytes_of() { stat -c %s "$1"; }
packets_of() { capinfos -M -c -T -r "$1" | awk -F'\t' 'NR == 1 { print $2 }'; }
big_bytes="$(bytes_of "$big")" small_bytes="$(bytes_of "$small")"
big_pkts="$(packets_of "$big")" small_pkts="$(packets_of "$small")"
# TCP connections opened (SYNs without ACK) in a capture.
syns_of() {
    tshark -r "$1" -T fields -e tcp.stream -Y 'tcp.flags.syn == 1 && tcp.flags.ack == 0' \
        -o tcp.analyze_sequence_numbers:FALSE 2>/dev/null | wc -l
}
big_flows="$(syns_of "$big")" small_flows="$(syns_of "$small")"
bulk_bytes="$(bytes_of "$bulk")" bulk_small_bytes="$(bytes_of "$bulk_small")"
bulk_pkts="$(packets_of "$bulk")" bulk_small_pkts="$(packets_of "$bulk_small")"
log "big: $big_bytes bytes, $big_pkts packets, $big_flows connections opened; small: $small_bytes bytes, $small_pkts packets"
# Every tool reads the captures from the page cache (23 GiB of memory holds them), cached as a
# file read from disk is: each file's pages are dropped once it is on disk, then it is read
# once. How a file sits in the cache changes what reading it costs: one written in small
# pieces (tcpdump's writes, the Python writers') is cached in 4 KiB pages, while the kernel's
# readahead caches a file read from disk in large folios (2 MiB on the host of the committed
# results), and copying the 1 GB capture out of 4 KiB pages cost tailhunt's command about 20%
# more CPU there. The big capture is also kept as tcpdump left it in the cache (renamed, so the
# same pages), and tailhunt alone runs on it too (th_written), to show that difference.
written="$tmp/big-written.pcap"
mv "$big" "$written"
cp "$written" "$big"
for f in "$big" "$big.gz" "$big.zst" "$small" "$bulk" "$bulk_small" "$tmp"/conns-*.pcap "$tmp"/stream-*.pcap; do
    # Only clean pages can be dropped: written to disk first.
    sync "$f"
    dd if="$f" iflag=nocache count=0 status=none
done
cat "$big" "$big.gz" "$big.zst" "$written" "$small" "$bulk" "$bulk_small" "$tmp"/conns-*.pcap "$tmp"/stream-*.pcap >/dev/null

# ---------------------------------------------------------------------------------------------
# Measurements

# measure KEY FILE LIMIT CMD...: runs CMD under `timeout LIMIT` and GNU time; records
# KEY_wall, KEY_cpu (user+sys s), KEY_rss (KiB), KEY_steal, and KEY_cut when cut off, KEY_fail
# when it failed otherwise.
measure() {
    local key="$1" file="$2" limit="$3" rc=0 wall user sys rss steal
    shift 3
    steal_mark
    /usr/bin/time -f 'TIME %e %U %S %M' -o "$tmp/time.txt" timeout "$limit" "$@" \
        >"$tmp/$key.out" 2>"$tmp/$key.err" || rc=$?
    steal="$(steal_since)"
    read -r _ wall user sys rss < <(grep '^TIME ' "$tmp/time.txt")
    record "${key}_steal" "$steal"
    if ((rc == 124)); then
        record "${key}_cut" "$wall"
        record "${key}_cutcpu" "$(calc '%.3f' "$user + $sys")"
        log "$key: cut off after $wall s (CPU $(calc '%.1f' "$user + $sys") s, RSS $((rss / 1024)) MiB)"
        return 0
    elif ((rc != 0)); then
        record "${key}_fail" "$rc"
        log "$key failed (exit $rc): $(tail -3 "$tmp/$key.err")"
        return 0
    fi
    record "${key}_wall" "$wall"
    record "${key}_cpu" "$(calc '%.3f' "$user + $sys")"
    record "${key}_rss" "$rss"
    log "$key: wall $wall s, CPU $(calc '%.2f' "$user + $sys") s (user $user, sys $sys), RSS $((rss / 1024)) MiB, steal $steal %"
}

run_tool() { # name round
    case "$1" in
        th)
            rm -f "$tmp/th.db"*
            measure th "$big" 600 "$tailhunt" pcap "$big" --threads 1 --link-rate 10gbit --db "$tmp/th.db" ;;
        th_written)
            rm -f "$tmp/th.db"*
            measure th_written "$written" 600 "$tailhunt" pcap "$written" --threads 1 --link-rate 10gbit --db "$tmp/th.db" ;;
        th2)
            rm -f "$tmp/th.db"*
            measure th2 "$big" 600 "$tailhunt" pcap "$big" --threads 2 --link-rate 10gbit --db "$tmp/th.db" ;;
        th_small)
            rm -f "$tmp/th.db"*
            measure th_small "$small" 600 "$tailhunt" pcap "$small" --threads 1 --link-rate 10gbit --db "$tmp/th.db" ;;
        th_gz | th_zst)
            rm -f "$tmp/th.db"*
            local f="$big.${1#th_}"
            measure "$1" "$f" 600 "$tailhunt" pcap "$f" --threads 1 --link-rate 10gbit --db "$tmp/th.db" ;;
        gunzip)
            measure gunzip "$big.gz" 600 sh -c 'gzip -dc "$1" >/dev/null' sh "$big.gz" ;;
        unzstd)
            measure unzstd "$big.zst" 600 sh -c 'zstd -q -dc "$1" >/dev/null' sh "$big.zst" ;;
        th_bulk)
            rm -f "$tmp/th.db"*
            measure th_bulk "$bulk" 600 "$tailhunt" pcap "$bulk" --threads 1 --link-rate 10gbit --db "$tmp/th.db" ;;
        th_bulk2)
            rm -f "$tmp/th.db"*
            measure th_bulk2 "$bulk" 600 "$tailhunt" pcap "$bulk" --threads 2 --link-rate 10gbit --db "$tmp/th.db" ;;
        th_bulk_small)
            rm -f "$tmp/th.db"*
            measure th_bulk_small "$bulk_small" 600 "$tailhunt" pcap "$bulk_small" --threads 1 --link-rate 10gbit --db "$tmp/th.db" ;;
        th_conns_* | th2_conns_*)
            rm -f "$tmp/th.db"*
            local n="${1#*_conns_}" threads=1
            [[ "$1" == th2_* ]] && threads=2
            measure "$1" "$tmp/conns-$n.pcap" 600 "$tailhunt" pcap "$tmp/conns-$n.pcap" \
                --threads "$threads" --link-rate 10gbit --db "$tmp/th.db" ;;
        th_stream_*)
            rm -f "$tmp/th.db"*
            local m="${1#th_stream_}"
            measure "$1" "$tmp/stream-$m.pcap" 600 "$tailhunt" pcap "$tmp/stream-$m.pcap" \
                --threads 1 --link-rate 10gbit --db "$tmp/th.db" ;;
        pass1 | pass2)
            measure "$1" "$big" 600 "$pass" "$big" --threads "${1#pass}" --link-rate 10000000000 ;;
        pass_bulk1 | pass_bulk2)
            measure "$1" "$bulk" 600 "$pass" "$bulk" --threads "${1#pass_bulk}" --link-rate 10000000000 ;;
        tshark_light)
            measure tshark_light "$big" 600 tshark -q -z io,stat,0.001 -r "$big" \
                -o tcp.analyze_sequence_numbers:FALSE -o tcp.desegment_tcp_streams:FALSE ;;
        tshark_default)
            measure tshark_default "$big" "$tshark_limit" tshark -q -z io,stat,0.001 -r "$big" ;;
        tcptrace)
            measure tcptrace "$big" 600 tcptrace -l -n "$big" ;;
    esac
}

for ((r = 1; r <= rounds; r++)); do
    tools=(th th_written th2 th_small th_bulk th_bulk2 th_bulk_small pass1 pass2 pass_bulk1 pass_bulk2 tshark_light tcptrace th_gz th_zst gunzip unzstd)
    for n in "${conn_counts[@]}"; do tools+=("th_conns_$n"); done
    # Two threads at the fewest and the most connections (what the split holds in flight).
    tools+=("th2_conns_${conn_counts[0]}" "th2_conns_$conns")
    for m in "${stream_mins[@]}"; do tools+=("th_stream_$m"); done
    [[ -z "$(agg tshark_default_cut)" ]] && tools+=(tshark_default)
    mapfile -t order < <(printf '%s\n' "${tools[@]}" | shuf)
    echo "$r: ${order[*]}" >>"$tmp/order.txt"
    log "round $r of $rounds: ${order[*]}"
    for t in "${order[@]}"; do
        run_tool "$t" "$r"
    done
done

finished="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
elapsed=$(($(date +%s) - t_start))
load_end="$(cut -d' ' -f1 /proc/loadavg)"
steal_a=$run_steal_a total_a=$run_total_a
run_steal="$(steal_since)"

# ---------------------------------------------------------------------------------------------
# Report

# One table row: tool, command, wall, CPU, MB/s and packets/s over CPU, peak RSS.
row() { # key label bytes packets
    local key="$1" cut
    if [[ -n "$(agg "${key}_fail")" ]]; then
        echo "| $2 | failed (exit $(median_of "${key}_fail")) | | | | |"
        return
    fi
    cut="$(agg "${key}_cut")"
    if [[ -n "$cut" && -z "$(agg "${key}_cpu")" ]]; then
        echo "| $2 | **did not finish in $(calc '%.0f' "$(median_of "${key}_cut")") s** | | | | |"
        return
    fi
    local cpu
    cpu="$(median_of "${key}_cpu")"
    echo "| $2 | $(fmt_agg "${key}_wall" '%.2f' 1) | $(fmt_agg "${key}_cpu" '%.2f' 1) |" \
        "$(calc '%.0f' "$3 / 1e6 / $cpu") | $(calc '%.2f' "$4 / 1e6 / $cpu") M |" \
        "$(fmt_agg "${key}_rss" '%.0f' 1024) |"
}
ratio() { # key [format]: tailhunt's CPU-time advantage over KEY ("n/a" when either is missing)
    local a b
    a="$(median_of th_cpu)" b="$(median_of "${1}_cpu")"
    if [[ "$a" == 0 || "$b" == 0 ]]; then echo "n/a"; return; fi
    calc "${2:-%.1f}" "$b / $a"
}
# Every target is judged on the unrounded figure (the *_raw ones): 2.995 GB/s is not "3.00,
# met", nor 1.204x "1.20x, met".
met() { # value target
    awk -v v="$1" -v t="$2" 'BEGIN { print (v != "n/a" && v + 0 >= t) ? "met" : "missed" }'
}

th_cpu="$(median_of th_cpu)"
th_gbps_raw="$(calc '%.6f' "$big_bytes / 1e9 / $th_cpu")"
th_written_gbps_raw="$(calc '%.6f' "$big_bytes / 1e9 / $(median_of th_written_cpu)")"
th_written_gbps="$(calc '%.2f' "$th_written_gbps_raw")"
r_written="$(calc '%.1f' "$(median_of tshark_light_cpu) / $(median_of th_written_cpu)")"
th2_gbps_raw="$(calc '%.6f' "$big_bytes / 1e9 / $(median_of th2_cpu)")"
th2_speedup_raw="$(calc '%.6f' "$(median_of th_wall) / $(median_of th2_wall)")"
pass2_speedup_raw="$(calc '%.6f' "$(median_of pass1_wall) / $(median_of pass2_wall)")"
th_gbps="$(calc '%.2f' "$th_gbps_raw")" th2_gbps="$(calc '%.2f' "$th2_gbps_raw")"
th2_speedup="$(calc '%.2f' "$th2_speedup_raw")" pass2_speedup="$(calc '%.2f' "$pass2_speedup_raw")"
r_light="$(ratio tshark_light)" r_default="$(ratio tshark_default)" r_tcptrace="$(ratio tcptrace)"
r_light_raw="$(ratio tshark_light '%.6f')" r_tcptrace_raw="$(ratio tcptrace '%.6f')"
rss_big="$(calc '%.0f' "$(median_of th_rss) / 1024")" rss_small="$(calc '%.0f' "$(median_of th_small_rss) / 1024")"
rss_growth_raw="$(calc '%.6f' "$(median_of th_rss) / $(median_of th_small_rss)")"
rss_growth="$(calc '%.2f' "$rss_growth_raw")"
flat="$(awk -v g="$rss_growth_raw" 'BEGIN { print (g <= 1.25) ? "met" : "missed" }')"
conns_lo_rss="$(calc '%.0f' "$(median_of "th_conns_${conn_counts[0]}_rss") / 1024")"
conns_hi_rss="$(calc '%.0f' "$(median_of "th_conns_${conns}_rss") / 1024")"
# Three decimals (the target is close).
conns_ratio="$(calc '%.6f' "$(median_of "th_conns_${conns}_rss") / $(median_of "th_conns_${conn_counts[0]}_rss")")"
conns_growth="$(calc '%.3f' "$conns_ratio")"
conns_flat="$(awk -v g="$conns_ratio" 'BEGIN { print (g <= 1.2) ? "met" : "missed" }')"
conns2_lo_rss="$(calc '%.0f' "$(median_of "th2_conns_${conn_counts[0]}_rss") / 1024")"
conns2_hi_rss="$(calc '%.0f' "$(median_of "th2_conns_${conns}_rss") / 1024")"
conns2_ratio="$(calc '%.6f' "$(median_of "th2_conns_${conns}_rss") / $(median_of "th2_conns_${conn_counts[0]}_rss")")"
conns2_growth="$(calc '%.3f' "$conns2_ratio")"
conns2_flat="$(awk -v g="$conns2_ratio" 'BEGIN { print (g <= 1.2) ? "met" : "missed" }')"
stream_lo_rss="$(calc '%.0f' "$(median_of th_stream_1_rss) / 1024")"
stream_hi_rss="$(calc '%.0f' "$(median_of "th_stream_${stream_min}_rss") / 1024")"
stream_growth="$(calc '%.2f' "$(median_of "th_stream_${stream_min}_rss") / $(median_of th_stream_1_rss)")"
default_text="tshark with default settings: ${r_default}x"
if [[ -n "$(agg tshark_default_cut)" ]]; then
    default_text="tshark with default settings did not finish in $(calc '%.0f' "$(median_of tshark_default_cut)") s (it had used $(calc '%.0f' "$(median_of tshark_default_cutcpu)") s of CPU), so tailhunt uses more than $(calc '%.0f' "$(median_of tshark_default_cutcpu) / $th_cpu")x less CPU"
fi

prio_text="this session ran at nice -20 (autogroup)"
[[ -z "$prio_old" ]] && prio_text="normal priority"
# Notes: what grows with what.
{
    echo
    echo "## What this means"
    echo
    b_rss="$(median_of th_bulk_rss)" bs_rss="$(median_of th_bulk_small_rss)"
    if [[ "$b_rss" != 0 && "$bs_rss" != 0 ]]; then
        echo "- Memory follows the number of connections, not the bytes: on the bulk flows alone"
        echo "  (2 connections at both sizes) peak RSS is $(calc '%.0f' "$bs_rss / 1024") MiB at $(calc '%.0f' "$bulk_small_bytes / 1e6") MB and"
        echo "  $(calc '%.0f' "$b_rss / 1024") MiB at $(calc '%.0f' "$bulk_bytes / 1e6") MB ($(calc '%.2f' "$b_rss / $bs_rss")x). With the short connections it grows by about"
        echo "  $(calc '%.1f' "($(median_of th_rss) - $(median_of th_small_rss)) / ($big_flows - $small_flows)") KiB per connection ($small_flows -> $big_flows connections): tailhunt"
        echo "  frees a connection's live state 20 ms after a clean end (a second after any other"
        echo "  close) and stores its summary then; what stays per connection is its upstream delays"
        echo "  (packed, about 6 bytes a bin and direction, made into \`queue_delay\` samples at the"
        echo "  end) and its share of its hosts' channel bins (packed once 100 ms old, about 8-10"
        echo "  bytes a bin), both in the pass's scratch file on disk, and the report keeps the first"
        echo "  1,000 flows. More bytes on the same connections need hardly more memory; more"
        echo "  connections at once still do."
    fi
    b_cpu="$(median_of th_bulk_cpu)"
    if [[ "$b_cpu" != 0 ]]; then
        echo "- CPU likewise: $(calc '%.2f' "$bulk_bytes / 1e9 / $b_cpu") GB/s per core on the bulk flows alone against $th_gbps GB/s"
        echo "  with $big_flows short connections in the file: beyond its bytes' share at the bulk rate,"
        echo "  each short connection costs about $(calc '%.0f' "1e6 * ($th_cpu - $big_bytes / ($bulk_bytes / $b_cpu)) / $big_flows") µs of CPU."
    fi
    echo "- Wall times include waiting for the CPU: other work kept the load average at"
    echo "  $load_start-$load_end on $(nproc) CPUs, so CPU time (user + system) is the figure to compare;"
    echo "  each tool here runs on one core, except tailhunt with --threads 2 (Threads)."
    echo "- tshark builds 1 ms bins (io,stat) like tailhunt; with default settings it also runs its"
    echo "  TCP sequence analysis$([[ -n "$(agg tshark_default_rss)" ]] && echo " and holds $(calc '%.0f' "$(median_of tshark_default_rss) / 1024") MiB"). tcptrace \`-l\` gives per-connection"
    echo "  statistics only (no time bins, no request latencies): it does less work than tailhunt."
} >"$tmp/notes.md"

model="$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
mem_gib="$(awk '/^MemTotal/ { printf "%.1f", $2 / 1048576 }' /proc/meminfo)"
steal_list=""
for k in th th_written th2 th_gz th_zst gunzip unzstd th_small th_bulk th_bulk2 th_bulk_small pass1 pass2 pass_bulk1 pass_bulk2 tshark_light tcptrace tshark_default "${conn_counts[@]/#/th_conns_}" "th2_conns_${conn_counts[0]}" "th2_conns_$conns" "${stream_mins[@]/#/th_stream_}"; do
    steal_list+="$k $(fmt_agg "${k}_steal" '%.2f' 1) %; "
done

report="$tmp/report.md"
cat >"$report" <<EOF
# Capture analysis benchmark

\`ROUNDS=$rounds SIZE_MB=$size_mb SMALL_MB=$small_mb CONNS=$conns CONNS_SECS=$conns_secs STREAM_MIN=$stream_min TSHARK_LIMIT=$tshark_limit bench/pcap.sh\`, $started to $finished ($elapsed s),
tailhunt built from commit $commit. Targets: >= 1 GB/s per core with full TCP state (issue
18: >= 3 GB/s), >= 20x tshark, >= 2x tcptrace, memory flat in file size, and (issue 18) peak
memory within 1.2x between $((conns / 100)) and $conns connections in captures of the same length, and
(issue 18) >= 1.7x faster on 2 threads than on 1 (wall clock). Every figure is one thread
(\`--threads 1\`) except in "Threads" and the columns marked \`--threads 2\`.

## Machine

| | |
|---|---|
| CPU | $model, $(nproc) CPUs |
| memory | $mem_gib GiB |
| kernel | $(uname -r) |
| rustc | $(rustc --version) |
| tshark | $(tshark --version 2>/dev/null | head -1) |
| tcptrace | $(tcptrace -v 2>&1 | grep -m1 -o 'version [0-9.]*' || echo unknown) |
| steal time during the run | $run_steal % of CPU time (per tool, median (min-max) of rounds: ${steal_list%; }) |
| other work on the machine | load average $load_start at the start, $load_end at the end (the benchmark itself keeps about 1 busy); $prio_text |

## Captures

Generated by \`bench/gen/capture.sh\` in a network namespace: loopback at MTU 1500 with
TSO/GSO/GRO off (wire-sized frames), \`tcpdump -i lo -s 0\` (pcap, microsecond timestamps), two
bulk flows paced at 400 Mbit/s each and 4 workers opening short request/response connections
(200 B, 2 KB, 20 KB, 60 KB replies) until the file reaches the size.

| capture | bytes | packets | TCP connections opened |
|---|--:|--:|--:|
| big | $big_bytes | $big_pkts | $big_flows |
| small | $small_bytes | $small_pkts | $small_flows |
| bulk flows alone, big | $bulk_bytes | $bulk_pkts | 2 |
| bulk flows alone, small | $bulk_small_bytes | $bulk_small_pkts | 2 |

Every tool reads the files from the page cache, cached as a file read from disk is: each
file's cached pages are dropped once it is on disk, then it is read once, so the kernel's
readahead holds it in large folios. The big capture is also kept as tcpdump left it in the
cache (written in small pieces: 4 KiB pages), and tailhunt runs on that copy too ("as written"
below): copying a file out of 4 KiB pages costs more.

## Results (big capture)

Each round runs the tools in a shuffled order
($(sed 's/$/;/' "$tmp/order.txt" | tr '\n' ' ' | sed 's/; $//')); tshark with default
settings runs under \`timeout $tshark_limit\` and is left out of later rounds once cut off. Figures are the median of the
rounds with the range (min-max); throughput is over CPU time (user + system), so it is per core.

| tool and command | wall s | CPU s | MB/s (CPU) | packets/s (CPU) | peak RSS MiB |
|---|--:|--:|--:|--:|--:|
$(row th "\`tailhunt pcap FILE --link-rate 10gbit --db TMP\`" "$big_bytes" "$big_pkts")
$(row th_written "\`tailhunt pcap FILE --link-rate 10gbit --db TMP\` on the big capture as tcpdump left it in the page cache" "$big_bytes" "$big_pkts")
$(row tshark_light "\`tshark -q -z io,stat,0.001 -r FILE -o tcp.analyze_sequence_numbers:FALSE -o tcp.desegment_tcp_streams:FALSE\`" "$big_bytes" "$big_pkts")
$(row tshark_default "\`tshark -q -z io,stat,0.001 -r FILE\` (default settings)" "$big_bytes" "$big_pkts")
$(row tcptrace "\`tcptrace -l -n FILE\`" "$big_bytes" "$big_pkts")

Memory against file size, \`tailhunt pcap\` (same command):

| capture | bytes | wall s | CPU s | peak RSS MiB |
|---|--:|--:|--:|--:|
| small | $small_bytes | $(fmt_agg th_small_wall '%.2f' 1) | $(fmt_agg th_small_cpu '%.2f' 1) | $(fmt_agg th_small_rss '%.0f' 1024) |
| big | $big_bytes | $(fmt_agg th_wall '%.2f' 1) | $(fmt_agg th_cpu '%.2f' 1) | $(fmt_agg th_rss '%.0f' 1024) |
| bulk flows alone, small | $bulk_small_bytes | $(fmt_agg th_bulk_small_wall '%.2f' 1) | $(fmt_agg th_bulk_small_cpu '%.2f' 1) | $(fmt_agg th_bulk_small_rss '%.0f' 1024) |
| bulk flows alone, big | $bulk_bytes | $(fmt_agg th_bulk_wall '%.2f' 1) | $(fmt_agg th_bulk_cpu '%.2f' 1) | $(fmt_agg th_bulk_rss '%.0f' 1024) |

Memory against the number of connections, \`tailhunt pcap\` (same command), on captures of
the same length (${conns_secs} s) written by \`bench/gen/conns.py\`: short connections (handshake, a 200 B
request, a 1-3 kB reply, FINs; about 2 ms each, so a few dozen are open at once) from 250
client hosts to one server:

| connections | bytes | wall s | CPU s | MB/s (CPU) | peak RSS MiB | with --threads 2: wall s | peak RSS MiB |
|--:|--:|--:|--:|--:|--:|--:|--:|
$(for n in "${conn_counts[@]}"; do
    b="$(bytes_of "$tmp/conns-$n.pcap")"
    two="- | -"
    [[ -n "$(agg "th2_conns_${n}_rss")" ]] && two="$(fmt_agg "th2_conns_${n}_wall" '%.2f' 1) | $(fmt_agg "th2_conns_${n}_rss" '%.0f' 1024)"
    echo "| $n | $b | $(fmt_agg "th_conns_${n}_wall" '%.2f' 1) | $(fmt_agg "th_conns_${n}_cpu" '%.2f' 1) | $(calc '%.0f' "$b / 1e6 / $(median_of "th_conns_${n}_cpu")") | $(fmt_agg "th_conns_${n}_rss" '%.0f' 1024) | $two |"
done)

Memory against the capture's length, \`tailhunt pcap\` (same command), on one TCP connection
open from the first packet to the last, written by \`bench/gen/stream.py\`: a 1,000 B segment
each millisecond and its ACK 100 us later, both with timestamps:

| minutes | bytes | packets | wall s | CPU s | MB/s (CPU) | peak RSS MiB |
|--:|--:|--:|--:|--:|--:|--:|
$(for m in "${stream_mins[@]}"; do
    b="$(bytes_of "$tmp/stream-$m.pcap")"
    echo "| $m | $b | $((m * 120000 + 1)) | $(fmt_agg "th_stream_${m}_wall" '%.2f' 1) | $(fmt_agg "th_stream_${m}_cpu" '%.2f' 1) | $(calc '%.0f' "$b / 1e6 / $(median_of "th_stream_${m}_cpu")") | $(fmt_agg "th_stream_${m}_rss" '%.0f' 1024) |"
done)

## Compressed

The big capture compressed with \`gzip -1\` ($(bytes_of "$big.gz") bytes) and \`zstd -3\`
($(bytes_of "$big.zst") bytes): \`tailhunt pcap FILE.gz --threads 1 --link-rate 10gbit --db TMP\`
(one analysis thread; the file is decompressed on a thread of its own beside it), and the
decompressor alone into /dev/null (\`gzip -dc\`, \`zstd -dc\`). The command's wall time against
the plain file's shows how much of the decompressing is hidden beside the analysis; its CPU time
less the plain file's is what decompressing cost it. (GNU gzip's inflate, the one a user would
time by hand, is much slower than the one tailhunt links, flate2's.)

| input | tailhunt wall s | tailhunt CPU s | gzip -dc / zstd -dc alone, wall s | the same, CPU s |
|---|--:|--:|--:|--:|
| plain | $(fmt_agg th_wall '%.2f' 1) | $(fmt_agg th_cpu '%.2f' 1) | | |
| gzip -1 | $(fmt_agg th_gz_wall '%.2f' 1) | $(fmt_agg th_gz_cpu '%.2f' 1) | $(fmt_agg gunzip_wall '%.2f' 1) | $(fmt_agg gunzip_cpu '%.2f' 1) |
| zstd -3 | $(fmt_agg th_zst_wall '%.2f' 1) | $(fmt_agg th_zst_cpu '%.2f' 1) | $(fmt_agg unzstd_wall '%.2f' 1) | $(fmt_agg unzstd_cpu '%.2f' 1) |

## Threads

\`tailhunt pcap FILE --threads N --link-rate 10gbit --db TMP\` (the whole command), and the pass
alone (\`crates/pcap/examples/pass.rs FILE --threads N\`: from the first frame to the report
built, series and flow rows handed to a sink that drops them, as the command stores them; until
2026-12-01 07:45 UTC the pass kept every flow's summary to its end instead). Of N threads one
reads, decodes and stores what the others made; with 2 the other analyses every frame, with
more N-1 analyse the connections (until 2026-11-30 N counted the analysing threads alone, so 2
meant three; until 2026-12-01 the storing had a thread of its own, and until that day's 09:00
UTC 2 split the work as more do, the reader keeping the channels' bins); the
rest of the command (the report's end, the detectors, printing) runs on one thread whatever N
is. N is one per CPU by default (2 here; until 2026-12-01, 1 below three CPUs). Throughput is over CPU
time (all threads), so it is per core; speed-up is over wall time, against 1 thread in the
same rounds.

| capture | threads | command wall s | command CPU s | GB/s per core | command speed-up | pass wall s | pass CPU s | pass speed-up | peak RSS MiB |
|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|
$(for c in "big th pass $big_bytes" "bulk th_bulk pass_bulk $bulk_bytes"; do
    read -r name cmd pas bytes <<<"$c"
    for n in 1 2; do
        k="$cmd" p="$pas$n"
        [[ "$n" == 2 ]] && k="${cmd}2"
        echo "| $name | $n | $(fmt_agg "${k}_wall" '%.2f' 1) | $(fmt_agg "${k}_cpu" '%.2f' 1) | $(calc '%.2f' "$bytes / 1e9 / $(median_of "${k}_cpu")") | $(calc '%.2f' "$(median_of "${cmd}_wall") / $(median_of "${k}_wall")")x | $(fmt_agg "${p}_wall" '%.2f' 1) | $(fmt_agg "${p}_cpu" '%.2f' 1) | $(calc '%.2f' "$(median_of "${pas}1_wall") / $(median_of "${p}_wall")")x | $(fmt_agg "${k}_rss" '%.0f' 1024) |"
    done
done)

## Against the targets

- Throughput with full TCP state: $th_gbps GB/s per core (CPU time): **$(met "$th_gbps_raw" 1)** (target >= 1 GB/s);
  issue 18's >= 3 GB/s per core: **$(met "$th_gbps_raw" 3)**. On the copy as tcpdump left it in the
  page cache (4 KiB pages): $th_written_gbps GB/s per core: **$(met "$th_written_gbps_raw" 3)**, and
  ${r_written}x less CPU than tshark's light settings took on the file cached from disk.
- tshark: with the light settings tailhunt uses ${r_light}x less CPU: **$(met "$r_light_raw" 20)** (target >= 20x);
  $default_text.
- tcptrace: ${r_tcptrace}x less CPU: **$(met "$r_tcptrace_raw" 2)** (target >= 2x).
- Memory: $rss_small MiB on the small capture, $rss_big MiB on the big one ($(calc '%.1f' "$big_bytes / $small_bytes")x the bytes, ${rss_growth}x the memory): **$flat** (flat: at most 1.25x).
- Two threads against one (wall clock, target >= 1.7x): the whole command on the big capture
  ${th2_speedup}x: **$(met "$th2_speedup_raw" 1.7)**; the pass alone ${pass2_speedup}x: **$(met "$pass2_speedup_raw" 1.7)**.
  Per core with 2 threads: $th2_gbps GB/s (CPU time of all threads): **$(met "$th2_gbps_raw" 3)** (target >= 3 GB/s).
- Memory against connections: $conns_lo_rss MiB at ${conn_counts[0]} connections, $conns_hi_rss MiB at $conns (${conns_growth}x): **$conns_flat** (target: at most 1.2x).
  With \`--threads 2\` (the default on 2 CPUs): $conns2_lo_rss MiB and $conns2_hi_rss MiB (${conns2_growth}x): **$conns2_flat**.
- Memory against the capture's length on one open connection (no numeric target; issue 18
  asks for memory bounded by the open connections and the bins): $stream_lo_rss MiB at 1 minute,
  $stream_hi_rss MiB at $stream_min minutes (${stream_growth}x).
EOF

if [[ -e "$tmp/notes.md" ]]; then cat "$tmp/notes.md" >>"$report"; fi
# A "## Profile (by hand)" section at the end of the stored results (written by a person, with
# the commit it describes) is carried over to the new file.
if [[ -e bench/results/pcap.md ]] && grep -q '^## Profile (by hand)' bench/results/pcap.md; then
    echo >>"$report"
    sed -n '/^## Profile (by hand)/,$p' bench/results/pcap.md >>"$report"
fi
cat "$report"
if [[ "$write" == 1 ]]; then
    mkdir -p bench/results
    cp "$report" bench/results/pcap.md
    echo "wrote bench/results/pcap.md" >&2
fi
