//! One measured request.

use serde::{Deserialize, Serialize};

/// How a request ended. Timeouts and errors are samples too: they are counted, never dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// A complete, valid response.
    Ok,
    /// The request failed (connection refused, reset, malformed reply, ...).
    Error,
    /// No response within the client's timeout; `end_ns` is when the client gave up.
    Timeout,
}

impl Outcome {
    /// The stable one-byte code used in the store.
    pub fn code(self) -> u8 {
        match self {
            Outcome::Ok => 0,
            Outcome::Error => 1,
            Outcome::Timeout => 2,
        }
    }

    /// Inverse of [`Outcome::code`].
    pub fn from_code(code: u8) -> Option<Outcome> {
        match code {
            0 => Some(Outcome::Ok),
            1 => Some(Outcome::Error),
            2 => Some(Outcome::Timeout),
            _ => None,
        }
    }

    /// Parses the names used in imports: `ok`, `error`/`err`/`fail`, `timeout`, and HTTP-ish
    /// status numbers (2xx/3xx are ok, anything else an error).
    pub fn parse(text: &str) -> Option<Outcome> {
        let t = text.trim().to_ascii_lowercase();
        match t.as_str() {
            "ok" | "success" | "true" | "" => Some(Outcome::Ok),
            "error" | "err" | "fail" | "failed" | "failure" | "false" => Some(Outcome::Error),
            "timeout" | "timedout" | "timed_out" | "timed-out" => Some(Outcome::Timeout),
            _ => match t.parse::<u16>() {
                Ok(status) if (200..400).contains(&status) => Some(Outcome::Ok),
                Ok(_) => Some(Outcome::Error),
                Err(_) => None,
            },
        }
    }

    /// The lowercase name, as in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error => "error",
            Outcome::Timeout => "timeout",
        }
    }
}

/// One request as the client saw it.
///
/// `intended_ns` is when the schedule wanted the request sent, `start_ns` when it actually went
/// out, `end_ns` when the response (or the error, or the timeout) arrived; all on the run's
/// monotonic clock. Latency is measured from the *intended* time, so a stalled server or a
/// saturated client shows up as latency instead of as missing samples (no coordinated omission).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    /// Scheduled send time, ns.
    pub intended_ns: i64,
    /// Actual send time, ns; `>= intended_ns` for a well-behaved client.
    pub start_ns: i64,
    /// Completion time, ns.
    pub end_ns: i64,
    /// How the request ended.
    pub outcome: Outcome,
}

impl Sample {
    /// A sample with all three times.
    pub fn new(intended_ns: i64, start_ns: i64, end_ns: i64, outcome: Outcome) -> Sample {
        Sample {
            intended_ns,
            start_ns,
            end_ns,
            outcome,
        }
    }

    /// A latency known only as a number (an import without send times): intended and actual
    /// start are both `at_ns`, so send lag is zero and the latency is exact.
    pub fn from_latency(at_ns: i64, latency_ns: i64, outcome: Outcome) -> Sample {
        Sample::new(at_ns, at_ns, at_ns.saturating_add(latency_ns), outcome)
    }

    /// Latency from the intended send time, ns (the honest number).
    pub fn latency_ns(&self) -> i64 {
        self.end_ns.saturating_sub(self.intended_ns)
    }

    /// Latency from the actual send time, ns (what a closed-loop tool would report).
    pub fn service_ns(&self) -> i64 {
        self.end_ns.saturating_sub(self.start_ns)
    }

    /// How late the request went out, ns.
    pub fn send_lag_ns(&self) -> i64 {
        self.start_ns.saturating_sub(self.intended_ns)
    }
}

/// A part of each request's latency, kept as a series of its own beside the latency series
/// it comes from: sample for sample the same request, with that part as its latency (and no
/// send lag). Being a function of the parent's samples, a store can keep the derivation
/// instead of the samples ([`crate::SeriesSink::open_derived`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SamplePart {
    /// How late the client sent it: intended to actual send.
    ClientLateness,
    /// The service time after that: actual send to completion.
    Service,
}

impl SamplePart {
    /// Both parts, in the order their series are opened.
    pub const ALL: [SamplePart; 2] = [SamplePart::ClientLateness, SamplePart::Service];

    /// The series name of the part (and its name in the store).
    pub fn name(self) -> &'static str {
        match self {
            SamplePart::ClientLateness => "client_lateness",
            SamplePart::Service => "service",
        }
    }

    /// The part named `name`, if it is one.
    pub fn from_name(name: &str) -> Option<SamplePart> {
        SamplePart::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The part of `s`, as a sample of its own: at the same intended time, with the same
    /// outcome, the part's length as its latency.
    pub fn of(self, s: &Sample) -> Sample {
        let ns = match self {
            SamplePart::ClientLateness => s.start_ns - s.intended_ns,
            SamplePart::Service => s.end_ns - s.start_ns,
        };
        Sample::from_latency(s.intended_ns, ns, s.outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parts_add_up_to_the_latency_and_their_names_round_trip() {
        let s = Sample::new(100, 600, 1_100, Outcome::Timeout);
        let [late, service] = SamplePart::ALL.map(|p| p.of(&s));
        assert_eq!(late.latency_ns() + service.latency_ns(), s.latency_ns());
        assert_eq!((late.intended_ns, late.outcome), (100, Outcome::Timeout));
        assert_eq!(service.latency_ns(), 500);
        for p in SamplePart::ALL {
            assert_eq!(SamplePart::from_name(p.name()), Some(p));
        }
        assert_eq!(SamplePart::from_name("latency"), None);
    }

    #[test]
    fn latency_counts_from_intended_time() {
        let s = Sample::new(100, 600, 1_100, Outcome::Ok);
        assert_eq!(s.latency_ns(), 1_000);
        assert_eq!(s.service_ns(), 500);
        assert_eq!(s.send_lag_ns(), 500);
    }

    #[test]
    fn outcome_codes_round_trip() {
        for o in [Outcome::Ok, Outcome::Error, Outcome::Timeout] {
            assert_eq!(Outcome::from_code(o.code()), Some(o));
            assert_eq!(Outcome::parse(o.name()), Some(o));
        }
        assert_eq!(Outcome::from_code(9), None);
        assert_eq!(Outcome::parse("503"), Some(Outcome::Error));
        assert_eq!(Outcome::parse("204"), Some(Outcome::Ok));
        assert_eq!(Outcome::parse("maybe"), None);
    }
}
