//! A flow's two shapes: its JSON (names, the flow name flattened, no `tcp` for UDP) and its
//! stored row (postcard, positional).

use super::*;
use crate::evidence::{Row, RowEncoding};

/// A TCP flow with every optional field filled and no two numbers alike, so that a field
/// read into its neighbour's place shows.
fn tcp_flow() -> FlowSummary {
    let side = |k: u64| SideSummary {
        packets: k + 1,
        ip_bytes: k + 2,
        payload_bytes: k + 3,
        wscale: 7,
        last_window: Some(65_535 + k as u32),
        max_inflight: 1_000 + k as u32,
        retransmissions: Retransmissions {
            rto: k + 4,
            fast: k + 5,
            spurious: k + 6,
            other: k + 7,
            bytes: k + 8,
        },
        unseen_bytes: k + 9,
        acked_unseen: k + 10,
        duplicate_frames: k + 11,
        zero_windows: k + 12,
        zero_window_ns: k as i64 + 13,
        states: Some(StateFractions {
            receive_window_limited: 0.1,
            zero_window: 0.2,
            congestion_or_loss_limited: 0.3,
            application_limited: 0.25,
            idle: 0.15,
        }),
        first_data_ns: Some(k as i64 + 14),
        last_data_ns: Some(k as i64 + 15),
        resets: k + 16,
    };
    let rtt = |k: i64| RttSummary {
        count: k as u64,
        min_ns: k + 1,
        mean_ns: k + 2,
        max_ns: k + 3,
    };
    FlowSummary {
        id: 42,
        name: FlowName {
            proto: Proto::Tcp,
            client: "10.0.0.1:40000".into(),
            server: "[2001:db8::1]:443".into(),
        },
        first_ns: 1_700_000_000_000_000_000,
        last_ns: 1_700_000_001_000_000_000,
        client_to_server: Traffic {
            packets: 10,
            ip_bytes: 11,
            payload_bytes: 12,
        },
        server_to_client: Traffic {
            packets: 20,
            ip_bytes: 21,
            payload_bytes: 22,
        },
        tcp: Some(TcpSummary {
            handshake: Some(Handshake {
                syn_ns: 1_700_000_000_000_000_000,
                server_leg_ns: Some(30),
                client_leg_ns: Some(31),
            }),
            rtt_server_leg: Some(rtt(100)),
            rtt_client_leg: Some(rtt(200)),
            wscale_from_syn: true,
            client: side(300),
            server: side(400),
            main_sender: "server".into(),
            throughput_bps: Some(1.5e9),
            rwnd_limited_share: 0.125,
            mean_window: Some(65_536.5),
            path_rtt_ns: Some(500),
            sender_rtt: Some(SenderRtt {
                receiver_leg_ns: 501,
                sender_leg_ns: 502,
                sender_leg_from: "timestamps".into(),
                echo_samples: 503,
                echo_error_max_ns: 504,
            }),
            window_bound_bps: Some(2.5e8),
            exchanges: 600,
            nagle_stalls: 601,
            close: Some(CloseSummary {
                by: Role::Client,
                how: CloseKind::Rst,
                at_ns: 1_700_000_001_000_000_000,
                after_last_request_ns: Some(700),
                after_last_response_ns: Some(701),
                round_gap_s: Some(30.0),
                peer_sent_after_close: true,
                resets_after_close: 702,
                answer_bytes: Some(703),
                first_answer_after_ns: Some(704),
                peer_bytes_after_close: Some(705),
                peer_data_after_close_ns: Some(706),
                peer_close: Some(CloseKind::Fin),
                peer_close_after_ns: Some(707),
                abandoned: Some(Abandoned::Stalled),
                note: "client closed 30.0s after its request".into(),
            }),
            ports_reused: true,
        }),
    }
}

fn udp_flow() -> FlowSummary {
    FlowSummary {
        id: 7,
        name: FlowName {
            proto: Proto::Udp,
            client: "10.0.0.2:5353".into(),
            server: "10.0.0.3:53".into(),
        },
        tcp: None,
        ..tcp_flow()
    }
}

#[test]
fn a_flow_reads_back_from_its_stored_row() {
    let flows = [tcp_flow(), udp_flow()];
    let mut data = Vec::new();
    for f in &flows {
        data.extend(postcard::to_allocvec(f).unwrap());
    }
    let read = RowEncoding::Postcard
        .decode::<FlowSummary>(FlowSummary::VERSION, &data)
        .unwrap();
    assert_eq!(read, flows);
    // A row cut short is an error, not a flow with zeros.
    let e = RowEncoding::Postcard
        .decode::<FlowSummary>(FlowSummary::VERSION, &data[..data.len() - 3])
        .unwrap_err();
    assert!(e.contains("item 1"), "{e}");
}

#[test]
fn a_flows_json_keeps_its_names() {
    let tcp = serde_json::to_value(tcp_flow()).unwrap();
    assert_eq!(tcp["client"], "10.0.0.1:40000");
    assert_eq!(tcp["proto"], "tcp");
    assert!(tcp.get("name").is_none());
    assert_eq!(tcp["tcp"]["close"]["abandoned"], "stalled");
    let udp = serde_json::to_value(udp_flow()).unwrap();
    assert!(udp.get("tcp").is_none(), "{udp}");
    for f in [tcp_flow(), udp_flow()] {
        let line = serde_json::to_vec(&f).unwrap();
        let back = RowEncoding::JsonLines
            .decode::<FlowSummary>(FlowSummary::VERSION, &line)
            .unwrap();
        assert_eq!(back, [f]);
    }
}

/// The stored row of [`tcp_flow`], byte for byte. Postcard writes no field names: a field
/// added, removed, retyped or moved anywhere in a flow changes these bytes, and rows written
/// before would be read into the wrong fields. When this fails, raise
/// `<FlowSummary as Row>::VERSION` (older rows then say which tailhunt reads them) and paste
/// the new bytes here.
const TCP_FLOW_ROW: &str = concat!(
    "2a000e31302e302e302e313a3430303030115b323030313a6462383a3a315d3a3434338080d0e2c6",
    "bfce972f80a8a69ccebfce972f0a0b0c14151601018080d0e2c6bfce972f013c013e0164ca01cc01",
    "ce0101c80192039403960301ad02ae02af020701ab8204940ab002b102b202b302b402b502b602b7",
    "02b802f204019a9999999999b93f9a9999999999c93f333333333333d33f000000000000d03f3333",
    "33333333c33f01f40401f604bc0291039203930307018f8304f80a9403950396039703980399039a",
    "039b039c03ba06019a9999999999b93f9a9999999999c93f333333333333d33f000000000000d03f",
    "333333333333c33f01bc0601be06a0030673657276657201000000c00b5ad641000000000000c03f",
    "01000000000800f04001e80701ea07ec070a74696d657374616d7073f703f007010000000065cdad",
    "41d804d90401000180a8a69ccebfce972f01f80a01fa0a010000000000003e4001be0501bf050180",
    "0b01c10501840b010001860b010225636c69656e7420636c6f7365642033302e3073206166746572",
    "20697473207265717565737401",
);

#[test]
fn the_stored_shape_of_a_flow_is_pinned_to_its_version() {
    let hex: String = postcard::to_allocvec(&tcp_flow())
        .unwrap()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        (FlowSummary::VERSION, hex.as_str()),
        (1, TCP_FLOW_ROW),
        "the stored shape of a flow changed: raise FlowSummary's Row::VERSION and update \
         TCP_FLOW_ROW (and this test's version)"
    );
}
