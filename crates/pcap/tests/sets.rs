//! Several files through one pass: each gets its turn and a status, whatever the one before it
//! held.

mod read_support;

use std::sync::atomic::AtomicBool;

use read_support::{pcap_file, small_frames, Order};
use tailhunt_model::evidence::capture::InputStatus;
use tailhunt_pcap::analysis::AnalysisConfig;
use tailhunt_pcap::run::{analyse, Outcome};
use tailhunt_pcap::{FileSet, ReadError};

fn write(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// One pass over `set` into a vector of series; `stop`: stop requested from the start.
fn pass(set: &mut FileSet, stop: bool) -> Outcome {
    let mut sink: Vec<tailhunt_model::Series> = Vec::new();
    let stop = AtomicBool::new(stop);
    let cfg = AnalysisConfig::default();
    analyse(set, cfg, &mut sink, &stop, &mut |_| {}).unwrap().0
}

#[test]
fn every_file_gets_its_turn_and_a_status() {
    let dir = tempfile::tempdir().unwrap();
    let whole = pcap_file(Order::Little, true, 1, &small_frames(5));
    let cut = &whole[..whole.len() - 3];
    let user0 = pcap_file(Order::Little, true, 147, &small_frames(2));
    let paths = vec![
        write(&dir, "cut.pcap", cut),
        write(&dir, "junk.pcap", b"not a capture at all"),
        write(&dir, "whole.pcap", &whole),
        write(&dir, "user0.pcap", &user0),
        write(&dir, "empty.pcap", b""),
    ];
    let mut set = FileSet::new(paths);
    set.open_first().unwrap();
    let out = pass(&mut set, false);
    let got: Vec<(InputStatus, u64)> = out.inputs.iter().map(|i| (i.status, i.frames)).collect();
    assert_eq!(
        got,
        vec![
            (InputStatus::Cut, 4),
            (InputStatus::Unread, 0),
            (InputStatus::Read, 5),
            (InputStatus::Read, 2),
            (InputStatus::Empty, 0),
        ]
    );
    assert_eq!(out.report.packets, 11);
    assert_eq!(out.damaged().count(), 2);
    assert!(!out.nothing_analysed());
    assert!(out.inputs[0].why.as_deref().unwrap().contains("truncated"));
    assert_eq!(out.inputs[3].link_types_not_analysed[0].frames, 2);
    assert!(out.stopped.is_none());
}

#[test]
fn a_set_with_nothing_readable_is_refused_with_every_reason() {
    let dir = tempfile::tempdir().unwrap();
    let paths = vec![
        write(&dir, "empty.pcap", b""),
        write(&dir, "junk.pcap", b"junk"),
    ];
    let mut set = FileSet::new(paths);
    let err = set.open_first().unwrap_err();
    assert!(matches!(err.0[0], ReadError::Empty { .. }));
    assert!(matches!(err.0[1], ReadError::NotACapture { .. }));
    assert!(
        err.to_string()
            .starts_with("none of the 2 files can be read: "),
        "{err}"
    );
}

#[test]
fn a_stop_request_marks_the_files_not_reached() {
    let dir = tempfile::tempdir().unwrap();
    let whole = pcap_file(Order::Little, true, 1, &small_frames(3));
    let paths = vec![write(&dir, "a.pcap", &whole), write(&dir, "b.pcap", &whole)];
    let mut set = FileSet::new(paths);
    let out = pass(&mut set, true);
    let got: Vec<InputStatus> = out.inputs.iter().map(|i| i.status).collect();
    assert_eq!(got, vec![InputStatus::Stopped, InputStatus::NotReached]);
    assert!(out.stopped.is_some());
}
