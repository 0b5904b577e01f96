#!/usr/bin/env bash
# Robustness over a corpus of captures: `tailhunt pcap` on every capture in a directory.
#
#   bench/corpus.sh DIR [--write]     LIMIT=N (20: seconds allowed per file),
#                                     SOURCE='TEXT' (where the captures came from, for the results)
#
# DIR holds captures (*.pcap*, *.cap*), for instance the test captures of the tcpdump project
# (its tests/*.pcap*, some 830 files: odd link types, cut packets, crafted headers). They are
# not committed here; get them with a checkout of that project. Without DIR, or with a
# directory holding no capture, the script says so and exits 2.
#
# 1. Each file alone: `tailhunt pcap FILE --json` under `timeout LIMIT`, with a store of its
#    own per run. Recorded per file: exit status, the run's status, frames read, frames of
#    link types not read and whether the output names them, the stderr message.
# 2. Every file at once as one set (`tailhunt pcap DIR/*`): exit status, what became of each
#    file, wall time and peak RSS (GNU time): files are opened one at a time, so memory should
#    not grow with the number of files.
# Checked: no panic (exit 101 or "panicked"), no run cut off by the time limit, every exit 2
# with a one-line message starting "tailhunt: ", every frame of an unknown link type named by
# link type in the JSON and the text, and no exit 0 with frames read and none analysed.
# Prints markdown; --write also stores it, with the machine description, in
# bench/results/corpus.md. Needs cargo, python3, GNU time.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
source bench/lib.sh

dir="" write=0
for arg in "$@"; do
    case "$arg" in
        --write) write=1 ;;
        -h | --help)
            awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        -*)
            echo "bench/corpus.sh: unknown argument '$arg' (use DIR [--write], LIMIT=N in the environment)" >&2
            exit 2
            ;;
        *) dir=$arg ;;
    esac
done
limit=${LIMIT:-20}
positive_whole bench/corpus.sh "LIMIT=$limit"
if [[ -z "$dir" || ! -d "$dir" ]]; then
    echo "bench/corpus.sh: give a directory of captures, e.g. the tests/ directory of a checkout of the tcpdump project (got '${dir}')" >&2
    exit 2
fi
mapfile -t files < <(find "$dir" -maxdepth 1 -type f \( -name '*.pcap*' -o -name '*.cap*' \) | LC_ALL=C sort)
if [[ ${#files[@]} -eq 0 ]]; then
    echo "bench/corpus.sh: no *.pcap* or *.cap* file in '$dir'" >&2
    exit 2
fi

cargo build --release --locked -p tailhunt >&2
tailhunt=$PWD/target/release/tailhunt
commit=$(git rev-parse --short HEAD)
tmp=$(mktemp -d /tmp/tailhunt-corpus.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
started=$(date -u +%FT%TZ)
t0=$(date +%s)

# 1. One file at a time: a line of JSON per file for the summary below.
for f in "${files[@]}"; do
    base=$(basename "$f")
    rm -f "$tmp/one.db" "$tmp/one.db-wal" "$tmp/one.db-shm"
    set +e
    timeout -s KILL "$limit" "$tailhunt" --db "$tmp/one.db" pcap "$f" --json >"$tmp/out.json" 2>"$tmp/err.txt"
    code=$?
    timeout -s KILL "$limit" "$tailhunt" --db "$tmp/one.db" pcap "$f" >"$tmp/out.txt" 2>/dev/null
    set -e
    python3 - "$base" "$code" "$tmp/out.json" "$tmp/err.txt" "$tmp/out.txt" >>"$tmp/files.jsonl" <<'EOF'
import json, sys
name, code, out, err, text = sys.argv[1], int(sys.argv[2]), *sys.argv[3:]
stderr = open(err, errors="replace").read()
try:
    doc = json.load(open(out))
except ValueError:
    doc = None
row = {"file": name, "code": code, "stderr": stderr.strip().splitlines()}
if doc:
    r = doc["report"]
    unknown = r["skipped"].get("unknown-link", 0)
    named = sum(l["frames"] for l in doc["link_types_not_analysed"])
    texts = open(text, errors="replace").read()
    row.update(status=doc["status"], frames=r["packets"], unknown=unknown,
               named_json=named == unknown,
               named_text=all(f"link type {l['link_type']}" in texts for l in doc["link_types_not_analysed"]),
               links=doc["link_types_not_analysed"], flows=len(r["flows"]),
               file_status=[f["status"] for f in doc["files"]])
print(json.dumps(row))
EOF
done
singles_s=$(($(date +%s) - t0))

# 2. Every file at once, as one set.
set +e
/usr/bin/time -f "%e %M" -o "$tmp/set.time" "$tailhunt" --db "$tmp/set.db" pcap "${files[@]}" --json >"$tmp/set.json" 2>"$tmp/set.err"
set_code=$?
set -e
read -r set_wall set_rss < <(tail -n 1 "$tmp/set.time") || true

summary=$(python3 - "$tmp/files.jsonl" "$tmp/set.json" "$set_code" "$tmp/set.err" "${set_wall:-?}" "${set_rss:-0}" "$limit" <<'EOF'
import collections, json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
set_path, set_code, set_err, set_wall, set_rss, limit = sys.argv[2:]
n = len(rows)
codes = collections.Counter(r["code"] for r in rows)
panics = [r["file"] for r in rows if r["code"] == 101 or any("panicked" in l for l in r["stderr"])]
hangs = [r["file"] for r in rows if r["code"] in (124, 137)]
bad_msg = [r["file"] for r in rows if r["code"] == 2 and (len(r["stderr"]) != 1 or not r["stderr"][0].startswith("tailhunt: "))]
unnamed = [r["file"] for r in rows if r.get("unknown") and not (r["named_json"] and r["named_text"])]
silent = [r["file"] for r in rows if r["code"] == 0 and r.get("frames", 0) > 0 and r.get("unknown") == r.get("frames")]
def reason(r):
    if r["code"] == 0:
        return "analysed (exit 0)"
    msg = r["stderr"][0] if r["stderr"] else ""
    for key, what in [("nothing analysed", "exit 2: nothing analysed (every frame of a link type not read)"),
                      ("is truncated", "exit 2: cut short (truncated; the frames before it kept)"),
                      ("is corrupt", "exit 2: corrupt record (the frames before it kept)"),
                      ("is empty", "exit 2: empty file"),
                      ("not a pcap", "exit 2: not a capture")]:
        if key in msg:
            return what
    return f"exit {r['code']}: other ({msg[:80]})"
reasons = collections.Counter(reason(r) for r in rows)
links = {}
for r in rows:
    for l in r.get("links", []):
        e = links.setdefault(l["link_type"], [l["name"], 0, 0])
        e[1] += 1
        e[2] += l["frames"]
print("## Each file alone\n")
print(f"{n} files, `tailhunt pcap FILE --json` each (and the text output, to check the names), "
      f"at most {limit} s each.\n")
print("| check | files |\n|---|--:|")
print(f"| panicked (exit 101 or \"panicked\" on stderr) | {len(panics)} |")
print(f"| cut off by the time limit | {len(hangs)} |")
print(f"| exit 2 without a one-line `tailhunt: ...` message | {len(bad_msg)} |")
print(f"| frames of an unknown link type not named in the JSON and the text | {len(unnamed)} |")
print(f"| exit 0 although every frame read was of a link type not read | {len(silent)} |")
for label, names in [("panicked", panics), ("cut off", hangs), ("bad message", bad_msg),
                     ("unnamed link type", unnamed), ("silent", silent)]:
    if names:
        print(f"\n{label}: " + ", ".join(names[:30]))
print("\n| outcome | files |\n|---|--:|")
for k, v in sorted(reasons.items(), key=lambda kv: -kv[1]):
    print(f"| {k} | {v} |")
frames = sum(r.get("frames", 0) for r in rows)
unknown = sum(r.get("unknown", 0) for r in rows)
flows = sum(r.get("flows", 0) for r in rows)
print(f"\nFrames read: {frames:,}; of link types not read: {unknown:,}; flows found: {flows:,}.\n")
print("Link types not read (files holding any, frames):\n")
print("| link type | name | files | frames |\n|--:|---|--:|--:|")
for k in sorted(links):
    name, files, fr = links[k]
    print(f"| {k} | {name or '(unnamed)'} | {files} | {fr} |")
print("\n## Every file at once, as one set\n")
try:
    doc = json.load(open(set_path))
    st = collections.Counter(f["status"] for f in doc["files"])
    print(f"`tailhunt pcap DIR/*` ({len(doc['files'])} files): exit {set_code}, run `{doc['status']}`, "
          f"{doc['report']['packets']:,} frames, {len(doc['report']['flows']):,} flows, "
          f"{set_wall} s, peak RSS {int(set_rss) / 1024:.0f} MiB.\n")
    print("| file status | files |\n|---|--:|")
    for k, v in sorted(st.items(), key=lambda kv: -kv[1]):
        print(f"| {k} | {v} |")
    err = open(set_err, errors="replace").read().strip()
    print(f"\nstderr ({len(err.splitlines())} line(s)), first 400 characters:\n")
    print("```\n" + err[:400] + ("..." if len(err) > 400 else "") + "\n```")
except (ValueError, KeyError) as e:
    print(f"no JSON document from the set run (exit {set_code}): {e}")
EOF
)

report=$(cat <<EOF
# Capture corpus run

\`LIMIT=$limit bench/corpus.sh $dir\`, $started ($singles_s s for the single files), tailhunt
built from commit $commit. Captures: ${SOURCE:-$dir}.

## Machine

| | |
|---|---|
| CPU | $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo), $(nproc) CPUs |
| kernel | $(uname -r) |
| rustc | $(rustc --version) |

$summary
EOF
)
echo "$report"
if [[ $write == 1 ]]; then
    mkdir -p bench/results
    echo "$report" >bench/results/corpus.md
    echo "written to bench/results/corpus.md" >&2
fi
