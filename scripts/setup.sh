#!/usr/bin/env bash
# Installs what tailhunt needs to build, test and benchmark on a fresh Debian 12 machine.
# Idempotent: installs only what is missing; safe to run before every `make`.
set -euo pipefail

log() { printf 'setup: %s\n' "$*" >&2; }

# Debian packages: a C compiler for the bundled SQLite and zstd, the sqlite3 CLI (store
# inspection, benchmark peer), GNU time (benchmarks' memory figures), iproute2 (network
# namespaces in tests), Redis and memcached (real servers the load tests start themselves on
# loopback), wrk and sockperf (the load benchmark's peers), python3 (benchmark scripts and the
# lab's traffic clients), tcpdump and ethtool (the capture tests write real captures in network
# namespaces, with offloads off), libpcap-dev (`tailhunt capture`), tshark and tcptrace (the
# capture tests' and benchmark's peers), iputils-ping (lab reachability checks), nftables (the
# NAT between two captures in the --match test), clang and libelf-dev (the eBPF programs of
# crates/sched are compiled at build time by libbpf-cargo; libbpf itself is vendored),
# zlib1g-dev (libbpf links it), libbpf-tools and linux-perf (bench/runq.sh's peer `runqlat` and
# its `perf bench sched` workload), chromium and fonts-dejavu-core (scripts/render-report.sh
# opens the HTML report headless: the report tests read its DOM and console, `make demo` keeps
# its screenshot; without a font the text is drawn as boxes), postgresql, mariadb-server and
# dnsmasq-base (the prober's tests start private instances on free loopback ports and stop
# them by PID; dnsmasq-base is the program without a system service), prometheus and
# victoria-metrics (the agent crate's tests start private instances on free loopback ports
# with their own data directories; the system services the packages install are stopped and
# disabled below), openssl (the HTTPS load test makes its CA and certificate with it),
# libssl-dev (the agent's HTTPS endpoints: tiny_http's TLS links the system OpenSSL), gzip and
# zstd (bench/pcap.sh compresses its big capture and times the decompressors alone).
packages=(build-essential pkg-config sqlite3 time ca-certificates iproute2 redis-server memcached wrk sockperf python3 openssl libssl-dev
    tcpdump ethtool libpcap-dev tshark tcptrace iputils-ping nftables clang libelf-dev zlib1g-dev libbpf-tools
    linux-perf chromium fonts-dejavu-core postgresql mariadb-server dnsmasq-base prometheus victoria-metrics
    gzip zstd)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    if [[ $(id -u) -ne 0 ]]; then
        log "missing Debian packages: ${missing[*]}; run as root or: sudo apt-get install ${missing[*]}"
        exit 1
    fi
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The metrics servers' packages start system services on the default ports (9090, 8428): the
# tests never use them, so stop and disable them where systemd runs.
if [[ $(id -u) -eq 0 ]] && command -v systemctl >/dev/null 2>&1 && [[ -d /run/systemd/system ]]; then
    for svc in prometheus victoria-metrics; do
        if systemctl is-enabled --quiet "$svc" 2>/dev/null || systemctl is-active --quiet "$svc" 2>/dev/null; then
            log "stopping and disabling the $svc system service (tests start their own)"
            systemctl disable --now "$svc" >/dev/null 2>&1 || true
        fi
    done
fi

# Rust: stable toolchain with rustfmt and clippy (rust-version in Cargo.toml).
if ! command -v cargo >/dev/null 2>&1; then
    [[ -x "$HOME/.cargo/bin/cargo" ]] && export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
    log "no Rust toolchain found: install stable Rust (rustup) >= 1.89 and re-run"
    exit 1
fi
need_minor=89
have_minor=$(rustc --version | sed -E 's/^rustc 1\.([0-9]+).*/\1/')
if ((have_minor < need_minor)); then
    log "rustc $(rustc --version) is older than 1.$need_minor: run 'rustup update stable'"
    exit 1
fi
for component in rustfmt clippy; do
    if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1; then
        if command -v rustup >/dev/null 2>&1; then
            log "adding rustup component $component"
            rustup component add "$component"
        else
            log "cargo $component is missing: install the $component component"
            exit 1
        fi
    fi
done

# Crates: fetch once so builds work offline afterwards.
cd "$(dirname "$0")/.."
cargo fetch --locked >/dev/null 2>&1 || cargo fetch --locked
log "ok ($(rustc --version | cut -d' ' -f2), $(sqlite3 --version | cut -d' ' -f1) sqlite3)"
