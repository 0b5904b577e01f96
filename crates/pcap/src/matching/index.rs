//! Packet signatures and the index of the second capture.
//!
//! In: decoded TCP packets. Out: for each packet of capture A, the first not yet matched packet
//! of capture B with the same signature (FIFO, so the k-th copy of a retransmitted or duplicate
//! segment in A pairs with the k-th copy in B).
//!
//! Two flow-agnostic signatures, because a NAT rewrites addresses and ports but rarely touches
//! what TCP says about the bytes:
//! - primary: sequence number, acknowledgement number, flags, payload length, window and the
//!   TCP timestamp value (RFC 7323 TSval; it tells a retransmission from the original);
//! - fallback, for middleboxes that rewrite sequence numbers (e.g. ISN randomisation in some
//!   firewalls): IPv4 identification, flags, payload length and a hash of the first payload
//!   bytes. IPv6 has no identification field, so IPv6 packets have no fallback signature.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use crate::decode::{Decoded, Tcp};

/// Payload bytes hashed into the fallback signature: enough to tell segments apart, few
/// enough that captures with different snap lengths (>= 96 bytes) still agree.
const HASHED_PAYLOAD: usize = 16;

/// No entry (end of a chain).
const NONE: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct SeqSig {
    seq: u32,
    ack: u32,
    flags: u8,
    len: u32,
    window: u16,
    tsval: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct IdSig {
    ip_id: u16,
    flags: u8,
    len: u32,
    payload_hash: u64,
}

pub(crate) fn seq_sig(t: &Tcp<'_>) -> SeqSig {
    SeqSig {
        seq: t.seq,
        ack: t.ack,
        flags: t.flags,
        len: t.payload_len,
        window: t.window,
        tsval: t.options.timestamps.map_or(0, |(v, _)| v),
    }
}

pub(crate) fn id_sig(d: &Decoded<'_>, t: &Tcp<'_>) -> Option<IdSig> {
    if !d.src.is_ipv4() {
        return None;
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    t.payload[..t.payload.len().min(HASHED_PAYLOAD)].hash(&mut h);
    Some(IdSig {
        ip_id: d.ip_id,
        flags: t.flags,
        len: t.payload_len,
        payload_hash: h.finish(),
    })
}

/// One packet of capture B.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry {
    pub ts_ns: i64,
    /// Flow index in B's flow table.
    pub flow: u32,
    /// Side of the flow key that sent it.
    pub dir: u8,
    pub flags: u8,
    pub matched: bool,
    next_seq: u32,
    next_id: u32,
}

/// Heads and tails of the chains of entries sharing a signature.
struct Chains<K> {
    map: HashMap<K, (u32, u32)>,
}

impl<K: Hash + Eq> Chains<K> {
    fn new() -> Self {
        Chains {
            map: HashMap::new(),
        }
    }
}

/// Capture B, indexed by both signatures.
pub(crate) struct Index {
    pub entries: Vec<Entry>,
    by_seq: Chains<SeqSig>,
    by_id: Chains<IdSig>,
}

impl Index {
    pub fn new() -> Index {
        Index {
            entries: Vec::new(),
            by_seq: Chains::new(),
            by_id: Chains::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn insert(&mut self, e: Entry, s: SeqSig, i: Option<IdSig>) {
        let at = self.entries.len() as u32;
        self.entries.push(Entry {
            next_seq: NONE,
            next_id: NONE,
            ..e
        });
        match self.by_seq.map.get_mut(&s) {
            Some((_, tail)) => {
                let old = std::mem::replace(tail, at);
                self.entries[old as usize].next_seq = at;
            }
            None => {
                self.by_seq.map.insert(s, (at, at));
            }
        }
        if let Some(i) = i {
            match self.by_id.map.get_mut(&i) {
                Some((_, tail)) => {
                    let old = std::mem::replace(tail, at);
                    self.entries[old as usize].next_id = at;
                }
                None => {
                    self.by_id.map.insert(i, (at, at));
                }
            }
        }
    }

    /// Takes the first unmatched entry with signature `s`, else with `i`; marks it matched.
    pub fn take(&mut self, s: &SeqSig, i: Option<&IdSig>) -> Option<u32> {
        if let Some(at) = self.take_seq(s) {
            return Some(at);
        }
        i.and_then(|i| self.take_id(i))
    }

    fn take_seq(&mut self, s: &SeqSig) -> Option<u32> {
        let (head, _) = self.by_seq.map.get_mut(s)?;
        pop_unmatched(&mut self.entries, head, |e| e.next_seq)
    }

    fn take_id(&mut self, i: &IdSig) -> Option<u32> {
        let (head, _) = self.by_id.map.get_mut(i)?;
        pop_unmatched(&mut self.entries, head, |e| e.next_id)
    }
}

/// Takes the first unmatched entry of the chain starting at `head` (linked by `next`) and marks
/// it matched. Matched entries at the head are skipped for good: later lookups start past them.
fn pop_unmatched(
    entries: &mut [Entry],
    head: &mut u32,
    next: impl Fn(&Entry) -> u32,
) -> Option<u32> {
    while *head != NONE && entries[*head as usize].matched {
        *head = next(&entries[*head as usize]);
    }
    if *head == NONE {
        return None;
    }
    let at = *head;
    entries[at as usize].matched = true;
    *head = next(&entries[at as usize]);
    Some(at)
}

pub(crate) fn entry(ts_ns: i64, flow: u32, dir: u8, flags: u8) -> Entry {
    Entry {
        ts_ns,
        flow,
        dir,
        flags,
        matched: false,
        next_seq: NONE,
        next_id: NONE,
    }
}
