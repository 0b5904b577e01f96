//! Which part of the request path owns the tail.
//!
//! Given each request's total latency and its split into parts (client send lag, network,
//! server stack, server application: see `tailhunt_load::breakdown`), compare the parts' means
//! over all requests with their means over the slowest ones (at or above the `q`-quantile of the
//! total). The part whose mean grows most in the tail owns it: a server that is slow only
//! sometimes shows up in `server_app`; a congested link in `network`; an overloaded client in
//! `send_lag`.

use serde::Serialize;

/// One part of the path.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PartShare {
    /// Part name (`network`, `server_app`, ...).
    pub part: String,
    /// Mean over all requests, ns.
    pub mean_ns: f64,
    /// Mean over the tail requests, ns.
    pub tail_mean_ns: f64,
    /// Share of the tail's extra latency (tail mean − overall mean of the total) it explains.
    pub share_of_tail_excess: f64,
}

/// Tail attribution: parts sorted by their share of the tail excess, largest first. `totals`
/// and every part's values are per request, same order and length; `None` when they are not.
pub fn tail_owner(totals: &[i64], parts: &[(String, Vec<i64>)], q: f64) -> Option<Vec<PartShare>> {
    let n = totals.len();
    if n < 20 || parts.iter().any(|(_, v)| v.len() != n) {
        return None;
    }
    let mut sorted = totals.to_vec();
    sorted.sort_unstable();
    let threshold = tailhunt_histogram::quantile::of_sorted(&sorted, q)?;
    let tail: Vec<usize> = (0..n).filter(|&i| totals[i] >= threshold).collect();
    let mean = |v: &[i64], idx: &mut dyn Iterator<Item = usize>| {
        let (mut s, mut k) = (0f64, 0usize);
        for i in idx {
            s += v[i] as f64;
            k += 1;
        }
        s / k.max(1) as f64
    };
    let excess_total = mean(totals, &mut tail.iter().copied()) - mean(totals, &mut (0..n));
    let mut out: Vec<PartShare> = parts
        .iter()
        .map(|(name, v)| {
            let (all, in_tail) = (mean(v, &mut (0..n)), mean(v, &mut tail.iter().copied()));
            PartShare {
                part: name.clone(),
                mean_ns: all,
                tail_mean_ns: in_tail,
                share_of_tail_excess: if excess_total > 0.0 {
                    (in_tail - all) / excess_total
                } else {
                    0.0
                },
            }
        })
        .collect();
    out.sort_by(|a, b| b.share_of_tail_excess.total_cmp(&a.share_of_tail_excess));
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_part_that_spikes_owns_the_tail() {
        // Network steady at 100 us; the server app is 2 ms, but 40 ms for every 50th request.
        let n = 1000;
        let net: Vec<i64> = vec![100_000; n];
        let app: Vec<i64> = (0..n)
            .map(|i| if i % 50 == 0 { 40_000_000 } else { 2_000_000 })
            .collect();
        let totals: Vec<i64> = (0..n).map(|i| net[i] + app[i]).collect();
        let parts = vec![
            ("network".to_string(), net),
            ("server_app".to_string(), app),
        ];
        let owners = tail_owner(&totals, &parts, 0.99).unwrap();
        assert_eq!(owners[0].part, "server_app");
        assert!((owners[0].share_of_tail_excess - 1.0).abs() < 1e-9);
        assert!(owners[1].share_of_tail_excess.abs() < 1e-9);
        assert!(tail_owner(&totals[..10], &parts, 0.99).is_none());
    }
}
