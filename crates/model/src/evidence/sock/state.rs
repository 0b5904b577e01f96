//! TCP states by name.
//!
//! In: the kernel's state number (`include/net/tcp_states.h`, as inet_diag and TCP_INFO give
//! it). Out: a [`TcpState`] that reads and serialises as the kernel's name without its `TCP_`
//! prefix (`ESTABLISHED`, `TIME_WAIT`), and deserialises from a name or, for runs stored
//! before states were named, from the bare number.

use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A TCP state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct TcpState(pub u8);

/// The kernel's names, indexed by state number (0 is unused).
const NAMES: [&str; 13] = [
    "",
    "ESTABLISHED",
    "SYN_SENT",
    "SYN_RECV",
    "FIN_WAIT1",
    "FIN_WAIT2",
    "TIME_WAIT",
    "CLOSE",
    "CLOSE_WAIT",
    "LAST_ACK",
    "LISTEN",
    "CLOSING",
    "NEW_SYN_RECV",
];

impl TcpState {
    /// `TIME_WAIT` (6).
    pub const TIME_WAIT: TcpState = TcpState(6);

    /// The kernel's name (`TIME_WAIT`), or `STATE_<n>` for a number it does not define.
    pub fn name(self) -> String {
        match NAMES.get(usize::from(self.0)) {
            Some(n) if !n.is_empty() => (*n).to_string(),
            _ => format!("STATE_{}", self.0),
        }
    }

    /// Reads a name given by [`TcpState::name`].
    pub fn from_name(name: &str) -> Option<TcpState> {
        if let Some(i) = NAMES.iter().position(|n| !n.is_empty() && *n == name) {
            return Some(TcpState(i as u8));
        }
        name.strip_prefix("STATE_")?.parse().ok().map(TcpState)
    }

    /// Whether the kernel keeps no TCP_INFO for sockets in this state: TIME_WAIT and request
    /// sockets (SYN_RECV, NEW_SYN_RECV) are mini sockets without one, so inet_diag reports
    /// their addresses and state only.
    pub fn has_no_tcp_info(self) -> bool {
        matches!(self.0, 3 | 6 | 12)
    }
}

impl fmt::Display for TcpState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl Serialize for TcpState {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

impl<'de> Deserialize<'de> for TcpState {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<TcpState, D::Error> {
        struct NameOrNumber;
        impl Visitor<'_> for NameOrNumber {
            type Value = TcpState;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a TCP state name such as ESTABLISHED, or its number")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<TcpState, E> {
                u8::try_from(v)
                    .map(TcpState)
                    .map_err(|_| E::custom(format!("TCP state {v} is out of range")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<TcpState, E> {
                TcpState::from_name(v)
                    .ok_or_else(|| E::custom(format!("'{v}' is not a TCP state name")))
            }
        }
        d.deserialize_any(NameOrNumber)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_serialise_by_name_and_read_back_from_names_and_old_numbers() {
        let json = serde_json::to_string(&[TcpState(1), TcpState(6), TcpState(42)]).unwrap();
        assert_eq!(json, r#"["ESTABLISHED","TIME_WAIT","STATE_42"]"#);
        let back: Vec<TcpState> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, vec![TcpState(1), TcpState(6), TcpState(42)]);
        let old: Vec<TcpState> = serde_json::from_str("[1, 6, 8]").unwrap();
        assert_eq!(old, vec![TcpState(1), TcpState::TIME_WAIT, TcpState(8)]);
        assert!(serde_json::from_str::<TcpState>(r#""ESTAB""#).is_err());
        assert!(TcpState::TIME_WAIT.has_no_tcp_info() && !TcpState(1).has_no_tcp_info());
    }
}
