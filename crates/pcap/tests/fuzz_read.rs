//! Property tests over mutated captures: reading and decoding never panic, always end, and the
//! reader's buffer stays under its cap whatever the lengths in the file say.

mod read_support;

use proptest::prelude::*;
use read_support::*;
use tailhunt_pcap::read::MAX_BUFFER;
use tailhunt_pcap::{decode, open_reader, PacketSource};

fn pcapng_sample(order: Order) -> Vec<u8> {
    let mut f = shb(order);
    f.extend(idb(order, 1, Some(0x80 | 30), Some(-5)));
    f.extend(idb(order, 113, Some(9), None));
    for (i, (ts, wire, data)) in small_frames(4).into_iter().enumerate() {
        f.extend(epb(order, 0, ts as u64, wire, &data));
        let mut sll = vec![0, 0, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0, 0x08, 0x00];
        sll.extend_from_slice(&data[14..]);
        if i % 2 == 0 {
            f.extend(pb(order, 1, ts as u64, wire, &sll));
        } else {
            f.extend(spb(order, wire, &data));
        }
    }
    f.extend(block(order, 5, &[0; 20]));
    f
}

fn samples() -> Vec<Vec<u8>> {
    vec![
        pcap_file(Order::Little, false, 1, &small_frames(6)),
        pcap_file(Order::Big, true, 1, &small_frames(6)),
        pcapng_sample(Order::Little),
        pcapng_sample(Order::Big),
    ]
}

/// Reads and decodes everything; returns the number of packets. Panics are the failure.
fn drain(bytes: Vec<u8>) -> usize {
    let Ok(mut r) = open_reader("fuzz", Box::new(std::io::Cursor::new(bytes))) else {
        return 0;
    };
    let mut n = 0;
    loop {
        assert!(r.buffer_capacity() <= MAX_BUFFER);
        match r.next_packet() {
            Ok(Some(p)) => {
                let _ = decode(&p);
                n += 1;
            }
            Ok(None) | Err(_) => return n,
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10000, ..ProptestConfig::default() })]

    #[test]
    fn mutated_captures_never_panic(
        which in 0usize..4,
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..12),
        cut in any::<prop::sample::Index>(),
        do_cut in any::<bool>(),
    ) {
        let mut f = samples().swap_remove(which);
        for (at, v) in edits {
            let i = at.index(f.len());
            f[i] = v;
        }
        if do_cut {
            let c = cut.index(f.len() + 1);
            f.truncate(c);
        }
        drain(f);
    }

    #[test]
    fn length_fields_set_to_extremes_never_allocate_past_the_cap(
        which in 0usize..4,
        at in any::<prop::sample::Index>(),
        v in prop::sample::select(vec![0u32, 1, 11, 12, 13, 0x7fff_ffff, 0xffff_fff0, 0xffff_ffff, 16 << 20, (16 << 20) + 4]),
    ) {
        let mut f = samples().swap_remove(which);
        let i = at.index(f.len() - 3);
        f[i..i + 4].copy_from_slice(&v.to_le_bytes());
        drain(f.clone());
        f[i..i + 4].copy_from_slice(&v.to_be_bytes());
        drain(f);
    }

    #[test]
    fn random_frames_decode_without_panic(
        link in prop::sample::select(vec![0u32, 1, 101, 113, 276, 147]),
        data in prop::collection::vec(any::<u8>(), 0..200),
        wire in any::<u32>(),
    ) {
        let p = tailhunt_pcap::RawPacket {
            ts_ns: 0,
            iface: 0,
            link: tailhunt_pcap::LinkType::from_number(link),
            wire_len: wire,
            data: &data,
        };
        let _ = decode(&p);
    }
}

#[test]
fn samples_are_valid_before_mutation() {
    let counts: Vec<usize> = samples().into_iter().map(drain).collect();
    assert_eq!(counts, vec![6, 6, 8, 8]);
}
