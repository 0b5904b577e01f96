//! Compiles src/bpf/runq.bpf.c with clang and generates its libbpf-rs skeleton.
//!
//! Needs `clang` (Debian's clang 14 works) and `libelf-dev`; `scripts/setup.sh` installs both.
//! The kernel types come from the committed src/bpf/vmlinux.h (which starts from
//! crates/bpf/include/tailhunt_bpf_types.h), not from the build machine.
//! `-mcpu=v3` for the compare-and-swap that claims a histogram's inline attribution slot
//! (BPF atomics: Linux 5.12+).

use std::env;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

const SRC: &str = "src/bpf/runq.bpf.c";

fn main() {
    let out =
        PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("runq.skel.rs");
    if let Err(e) = SkeletonBuilder::new()
        .source(SRC)
        .clang_args([
            "-Wall",
            "-Werror",
            "-mcpu=v3",
            "-Isrc/bpf",
            "-I../bpf/include",
        ])
        .build_and_generate(&out)
    {
        // The chain holds clang's own message (a missing header, a type error).
        panic!("building {SRC} failed (is clang installed? run scripts/setup.sh): {e:#}");
    }
    println!("cargo:rerun-if-changed=src/bpf");
    println!("cargo:rerun-if-changed=../bpf/include");
}
