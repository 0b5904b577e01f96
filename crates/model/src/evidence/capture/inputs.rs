//! What became of each input of a pass: read whole, empty, cut short, not read, and the frames
//! of link types the decoder does not read.
//!
//! In: the capture reader (`tailhunt-pcap`'s `run::analyse`) fills one [`InputReport`] per
//! source as it reads. Out: the reports (stored with the run, shown by the binary) and
//! [`link_types_not_analysed`], their sum per link type across the set (`link type 147
//! (USER0): 12 files not analysed`).

use serde::{Deserialize, Serialize};

/// How far a source was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InputStatus {
    /// Read to its end.
    Read,
    /// No byte at all: skipped (a rotated set's newest file often is).
    Empty,
    /// Ended early at a truncated or corrupt record: the frames before it were read, then
    /// the next source.
    Cut,
    /// Could not be read at all (not a capture, its header cut, unreadable).
    Unread,
    /// The pass was stopped (Ctrl-C) while reading it.
    Stopped,
    /// The pass was stopped before its turn.
    NotReached,
}

impl InputStatus {
    /// The name used in JSON and text.
    pub fn name(self) -> &'static str {
        match self {
            InputStatus::Read => "read",
            InputStatus::Empty => "empty",
            InputStatus::Cut => "cut",
            InputStatus::Unread => "unread",
            InputStatus::Stopped => "stopped",
            InputStatus::NotReached => "not-reached",
        }
    }
}

/// Frames of one link type that were not analysed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkTypeFrames {
    /// The LINKTYPE_ number.
    pub link_type: u32,
    /// Its registry name (`USER0`), when it has one.
    pub name: Option<String>,
    /// Frames of this link type.
    pub frames: u64,
}

impl LinkTypeFrames {
    /// `link type 147 (USER0)`.
    pub fn describe(&self) -> String {
        match &self.name {
            Some(n) => format!("link type {} ({n})", self.link_type),
            None => format!("link type {}", self.link_type),
        }
    }
}

/// One input of a pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputReport {
    /// The file (or `live:IFACE`).
    pub name: String,
    /// How far it was read.
    pub status: InputStatus,
    /// Frames read from it (analysed or not).
    pub frames: u64,
    /// Why it was not read whole, when it was not.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub why: Option<String>,
    /// Frames of link types the decoder does not read (counted, not analysed).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub link_types_not_analysed: Vec<LinkTypeFrames>,
}

impl InputReport {
    /// A source about to be read.
    pub fn new(name: String) -> InputReport {
        InputReport {
            name,
            status: InputStatus::Read,
            frames: 0,
            why: None,
            link_types_not_analysed: Vec::new(),
        }
    }

    /// Frames of this input that were analysed (read, and of a link type the decoder reads).
    pub fn frames_of_known_link_types(&self) -> u64 {
        let unknown: u64 = self.link_types_not_analysed.iter().map(|l| l.frames).sum();
        self.frames - unknown
    }

    /// Whether the input was not read to its end for a reason other than a stop request.
    pub fn is_damaged(&self) -> bool {
        matches!(self.status, InputStatus::Cut | InputStatus::Unread)
    }
}

/// A link type not analysed, summed over a set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkTypeSummary {
    /// The link type and its frames in all inputs.
    #[serde(flatten)]
    pub link: LinkTypeFrames,
    /// Inputs that hold frames of it.
    pub inputs: u64,
    /// Of those, inputs that hold nothing else (no frame of them was analysed).
    pub inputs_only_this: u64,
}

impl LinkTypeSummary {
    /// `link type 147 (USER0): 12 files not analysed`, or with frames when the files held
    /// other frames too: `link type 147 (USER0): 40 frames in 2 files not analysed`.
    pub fn describe(&self) -> String {
        let files = |n: u64| if n == 1 { "file" } else { "files" };
        if self.inputs_only_this == self.inputs {
            format!(
                "{}: {} {} not analysed",
                self.link.describe(),
                self.inputs,
                files(self.inputs)
            )
        } else {
            format!(
                "{}: {} frame(s) in {} {} not analysed",
                self.link.describe(),
                self.link.frames,
                self.inputs,
                files(self.inputs)
            )
        }
    }
}

/// Every link type not analysed in `inputs`, with its frames and files, by link type number.
pub fn link_types_not_analysed(inputs: &[InputReport]) -> Vec<LinkTypeSummary> {
    let mut out: Vec<LinkTypeSummary> = Vec::new();
    for input in inputs {
        let only =
            input.link_types_not_analysed.len() == 1 && input.frames_of_known_link_types() == 0;
        for l in &input.link_types_not_analysed {
            let sum = match out.iter_mut().find(|s| s.link.link_type == l.link_type) {
                Some(s) => s,
                None => {
                    out.push(LinkTypeSummary {
                        link: LinkTypeFrames {
                            frames: 0,
                            ..l.clone()
                        },
                        inputs: 0,
                        inputs_only_this: 0,
                    });
                    out.last_mut().expect("just pushed")
                }
            };
            sum.link.frames += l.frames;
            sum.inputs += 1;
            sum.inputs_only_this += u64::from(only);
        }
    }
    out.sort_by_key(|s| s.link.link_type);
    out
}
