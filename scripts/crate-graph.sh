#!/usr/bin/env bash
# The workspace's crate graph, read from the Cargo.toml files (through `cargo metadata`), so the
# layout page (docs/layout.md) cannot drift from the code.
#
#   scripts/crate-graph.sh            print the graph (one line per crate: what it depends on)
#   scripts/crate-graph.sh --check    also fail when docs/layout.md's copy differs, or when a layer
#                                     rule of DESIGN.md is broken (analysis, detectors and
#                                     outputs depend on no source crate)
set -euo pipefail
cd "$(dirname "$0")/.."

graph=$(cargo metadata --format-version 1 --no-deps --offline 2>/dev/null | python3 -c '
import json, sys
meta = json.load(sys.stdin)
names = {p["name"] for p in meta["packages"]}
deps = {}
for p in meta["packages"]:
    short = p["name"].removeprefix("tailhunt-")
    deps[short] = sorted({d["name"].removeprefix("tailhunt-") for d in p["dependencies"]
                          if d["name"] in names and d.get("kind") is None})
# Bottom first: a crate comes after everything it depends on (ties by name).
order, placed = [], set()
while len(order) < len(deps):
    ready = sorted(c for c in deps if c not in placed and all(d in placed for d in deps[c]))
    if not ready:
        sys.exit("crate-graph: dependency cycle among " + ", ".join(sorted(set(deps) - placed)))
    order += ready
    placed |= set(ready)
width = max(len(c) for c in order)
for c in order:
    below = " ".join(deps[c]) if deps[c] else "(nothing of the workspace)"
    print(f"{c:<{width}}  <- {below}")
')

if [[ ${1:-} != --check ]]; then
    printf '%s\n' "$graph"
    exit 0
fi

fail=0
# DESIGN.md section 3: analysis, detectors and outputs read model types and the store, never a
# source crate.
sources=" import load probe pcap sched sock "
while read -r crate _ rest; do
    case $crate in analyze | diagnose | report)
        for d in $rest; do
            if [[ $sources == *" $d "* ]]; then
                echo "crate-graph: $crate depends on the source crate $d (DESIGN.md: downstream of the store reads model types only)" >&2
                fail=1
            fi
        done ;;
    esac
done <<<"$graph"

readme=$(sed -n '/<!-- crate-graph:begin -->/,/<!-- crate-graph:end -->/p' docs/layout.md | sed '1,2d;$d' | sed '$d')
if [[ "$readme" != "$graph" ]]; then
    echo "crate-graph: docs/layout.md's graph is out of date; paste this between its markers:" >&2
    printf '%s\n' "$graph" >&2
    fail=1
fi
exit $fail
