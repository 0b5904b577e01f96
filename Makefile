# `make demo` and `make test` each install what they need first (scripts/setup.sh).
CARGO ?= cargo
export CARGO_TERM_COLOR ?= never

.PHONY: all setup build demo test lint bench clean

all: build

setup:
	bash scripts/setup.sh

build: setup
	$(CARGO) build --release --locked -p tailhunt

demo: build
	bash scripts/demo.sh

lint: setup
	$(CARGO) fmt --all --check
	bash scripts/crate-graph.sh --check
	$(CARGO) clippy --locked --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --locked --no-deps --workspace

test: lint
	$(CARGO) test --release --locked --workspace
	$(CARGO) build --release --locked -p tailhunt
	TAILHUNT_DEMO_LAB=skip bash scripts/demo.sh > /dev/null
	@echo "make test: all checks passed (fmt, clippy, rustdoc, tests, demo smoke run)"

bench: build
	bash bench/store.sh
	bash bench/load.sh
	bash bench/pcap.sh

clean:
	$(CARGO) clean
	rm -rf demo-out
