#!/usr/bin/env bash
# The demo: a trimodal latency set whose p90 sits on a gap between modes, then the same set
# with 2% of the mass moved to the fast mode. tailhunt names the modes, warns that p90 is
# fragile, and explains why p90 "improved" 14x when almost nothing changed. Then a sweep that
# shows Nagle, the HTML report of it all with its screenshot, and (as root) the lab.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=target/release/tailhunt
out=demo-out
rm -rf "$out"
mkdir -p "$out"
export TAILHUNT_DB="$out/tailhunt.db"

if [[ -t 1 ]]; then bold=$'\033[1m' plain=$'\033[0m'; else bold='' plain=''; fi
step() { printf '\n%s$ %s%s\n' "$bold" "$*" "$plain"; "$@"; }

step "$bin" lab synth trimodal --count 100000 --seed 1 -o "$out/before.csv"
step "$bin" lab synth trimodal --count 100000 --seed 2 --shift 0.02 -o "$out/after.csv"
printf '\n%s$ %s%s\n' "$bold" "before=\$($bin import --quiet $out/before.csv)" "$plain"
before=$("$bin" import --quiet "$out/before.csv")
echo "$before"
step "$bin" analyze latest --expect-floor 450us
printf '\n%s$ %s%s\n' "$bold" "after=\$($bin import --quiet $out/after.csv)" "$plain"
after=$("$bin" import --quiet "$out/after.csv")
echo "$after"
step "$bin" analyze latest --percentiles 50,90,99 --compare "$before"
# Root cause #2: latency that gets worse when load drops (Nagle + delayed ACK).
"$bin" serve tcp --listen 127.0.0.1:0 --nodelay=false --think-time 500us 2> "$out/serve.log" &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
for _ in $(seq 50); do grep -q "serving" "$out/serve.log" && break; sleep 0.1; done
addr=$(sed -n 's/^serving tcp on \([^ ]*\).*/\1/p' "$out/serve.log")
step "$bin" load "tcp://$addr" --split-writes --conns 1 --sweep 50,500,5000 --duration 2s --order asc
kill "$server" 2>/dev/null || true
step "$bin" runs
# The pictures: the findings first, then the histograms (before and after drawn together),
# latency against rate, and a screenshot of the page as a browser shows it.
step "$bin" report "$before" "$after" latest --label before --label after --label sweep -o "$out/report.html"
step bash scripts/render-report.sh "$out/report.html" "$out/report.png"
# As root: every root cause reproduced, diagnosed without being told, fixed and measured again
# (`make test` sets TAILHUNT_DEMO_LAB=skip: its own tests run the scenarios).
if [[ $(id -u) == 0 && ${TAILHUNT_DEMO_LAB:-run} != skip ]]; then
    step "$bin" lab run all --scale quick --store "$out/lab.db" --report "$out/lab-report.html" ||
        echo "(not every scenario passed: the verdict column says why)"
    if [[ -e "$out/lab-report.html" ]]; then
        step bash scripts/render-report.sh "$out/lab-report.html" "$out/lab-report.png"
    fi
elif [[ $(id -u) != 0 ]]; then
    printf '\n(as root the demo also runs: %s lab run all --scale quick)\n' "$bin"
fi
printf '\nThe store is %s; try: sqlite3 %s "SELECT * FROM runs"\n' "$TAILHUNT_DB" "$TAILHUNT_DB"
printf 'The report is %s (open it in a browser), its screenshot %s\n' "$out/report.html" "$out/report.png"
