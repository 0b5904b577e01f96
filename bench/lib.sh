# Helpers shared by the benchmark scripts (sourced; they set $tmp first).
#
# Results are "key value" lines in $tmp/results.txt; agg KEY prints "median min max n" of a
# key's values (nothing when there are none).

# Steal and total ticks of the aggregate cpu line of /proc/stat.
cpu_ticks() { awk '/^cpu / { print $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat; }
steal_mark() { read -r steal_a total_a < <(cpu_ticks); }
# Steal % since steal_mark.
steal_since() {
    local s t
    read -r s t < <(cpu_ticks)
    awk -v s=$((s - steal_a)) -v t=$((t - total_a)) 'BEGIN { printf "%.2f", (t > 0 ? 100 * s / t : 0) }'
}
record() { echo "$1 $2" >>"$tmp/results.txt"; }
# Prints $tmp/report.md and, with --write, stores it as bench/results/NAME.md.
publish() {
    cat "$tmp/report.md"
    if ((write)); then
        mkdir -p bench/results
        cp "$tmp/report.md" "bench/results/$1.md"
        echo "wrote bench/results/$1.md" >&2
    fi
}
# The "## Machine" heading and the rows every machine table starts with: CPU, memory, kernel.
machine_rows() {
    printf '## Machine\n\n| | |\n|---|---|\n'
    echo "| CPU | $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo), $(nproc) CPUs |"
    echo "| memory | $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo) |"
    echo "| kernel | $(uname -r) |"
}
agg() {
    [[ -e "$tmp/results.txt" ]] || return 0
    awk -v k="$1" '$1 == k { print $2 }' "$tmp/results.txt" | sort -g |
        awk '{ a[NR] = $1 } END { if (NR == 0) exit;
            m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2;
            print m, a[1], a[NR], NR }'
}
# (The parentheses keep a '>' in the expression from being read as a redirection.)
calc() { awk "BEGIN { printf \"$1\", ($2) }"; }
# Formats an aggregate: "median (min-max)" with a printf format and a divisor.
fmt_agg() { # key format divisor
    local m lo hi n
    read -r m lo hi n < <(agg "$1") || true
    if [[ -z "${m:-}" ]]; then echo "n/a"; return; fi
    if [[ "$n" == 1 ]]; then calc "$2" "$m / $3"; return; fi
    echo "$(calc "$2" "$m / $3") ($(calc "$2" "$lo / $3")-$(calc "$2" "$hi / $3"))"
}
median_of() { local m; read -r m _ < <(agg "$1") || true; echo "${m:-0}"; }

# The flags every benchmark takes: --write (sets write=1) and -h/--help (prints the script's
# header comment). Usage: bench_flags NAME "KNOB=N, ..." "$@".
bench_flags() {
    local name=$1 knobs=$2 arg
    shift 2
    write=0
    for arg in "$@"; do
        case "$arg" in
            --write) write=1 ;;
            -h | --help)
                awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'
                exit 0
                ;;
            *)
                echo "$name: unknown argument '$arg' (use --write, or $knobs in the environment)" >&2
                exit 2
                ;;
        esac
    done
}

# Exits with a message unless every KNOB=VALUE given has a positive whole number.
# Usage: positive_whole NAME "ROUNDS=$rounds" ...
positive_whole() {
    local name=$1 pair
    shift
    for pair in "$@"; do
        if ! [[ "${pair#*=}" =~ ^[1-9][0-9]*$ ]]; then
            echo "$name: ${pair%%=*}='${pair#*=}' is not a positive whole number" >&2
            exit 2
        fi
    done
}
