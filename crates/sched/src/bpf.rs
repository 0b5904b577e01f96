//! The kernel side: the skeleton libbpf-cargo generates from `src/bpf/runq.bpf.c` (raw pointers
//! into the loaded object: the only unsafe code of this crate).

#[allow(
    unsafe_code,
    missing_docs,
    dead_code,
    non_camel_case_types,
    clippy::all,
    clippy::pedantic
)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/runq.skel.rs"));
}

pub(crate) use skel::*;
