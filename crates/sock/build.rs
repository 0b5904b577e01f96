//! Compiles src/bpf/setsockopt.bpf.c with clang and generates its libbpf-rs skeleton.
//!
//! Needs `clang` and `libelf-dev` (`scripts/setup.sh` installs both). The kernel types come
//! from the committed src/bpf/vmlinux.h (which starts from crates/bpf/include/tailhunt_bpf_types.h),
//! not from the build machine.

use std::env;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

const SRC: &str = "src/bpf/setsockopt.bpf.c";

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("setsockopt.skel.rs");
    if let Err(e) = SkeletonBuilder::new()
        .source(SRC)
        .clang_args(["-Wall", "-Werror", "-Isrc/bpf", "-I../bpf/include"])
        .build_and_generate(&out)
    {
        panic!("building {SRC} failed (is clang installed? run scripts/setup.sh): {e:#}");
    }
    println!("cargo:rerun-if-changed=src/bpf");
    println!("cargo:rerun-if-changed=../bpf/include");
}
