//! From matched packets to the [`MatchReport`]: flow pairs, hop directions, the clock offset,
//! delays, losses and close origins. See the parent module for the method.

use std::collections::HashMap;

use super::{
    CloseOrigin, Collected, DelayStats, FlowPair, HopStats, MatchConfig, MatchReport, Side,
};
use crate::decode::flags;

/// One paired flow while it is being summarised.
struct Pair {
    a_flow: u32,
    b_flow: u32,
    /// `b_dir[a_dir]`: the side of B's key that sends what A's side `a_dir` sends.
    b_dir: [u8; 2],
    /// Raw `t_B - t_A` per A direction.
    raw: [Vec<i64>; 2],
    /// The A direction that passes A first; decided once the offset is known.
    a_first: Option<u8>,
    /// Close packets: (a_dir, kind, seen in A, seen in B).
    closes: Vec<(u8, u8, Option<i64>, Option<i64>)>,
    /// Unmatched packets in A, B per A direction, with time.
    only_a: [Vec<i64>; 2],
    only_b: [Vec<i64>; 2],
}

fn close_kind(f: u8) -> Option<u8> {
    if f & flags::RST != 0 {
        Some(flags::RST)
    } else if f & flags::FIN != 0 {
        Some(flags::FIN)
    } else {
        None
    }
}

/// Pairs flows greedily by matched packets, most first, one partner each.
fn pair_flows(c: &Collected) -> Vec<Pair> {
    let mut votes: HashMap<(u32, u32), (u64, [u8; 2])> = HashMap::new();
    for m in &c.matched {
        let e = &c.index.entries[m.b as usize];
        let v = votes.entry((m.a_flow, e.flow)).or_insert((0, [0, 1]));
        v.0 += 1;
        v.1[m.a_dir as usize] = e.dir;
        v.1[1 - m.a_dir as usize] = 1 - e.dir;
    }
    let mut ranked: Vec<_> = votes.into_iter().collect();
    ranked.sort_by(|x, y| y.1 .0.cmp(&x.1 .0).then(x.0.cmp(&y.0)));
    let (mut a_taken, mut b_taken) = (HashMap::new(), HashMap::new());
    let mut pairs = Vec::new();
    for ((a, b), (_, dirs)) in ranked {
        if a_taken.contains_key(&a) || b_taken.contains_key(&b) {
            continue;
        }
        a_taken.insert(a, ());
        b_taken.insert(b, ());
        pairs.push(Pair {
            a_flow: a,
            b_flow: b,
            b_dir: dirs,
            raw: [Vec::new(), Vec::new()],
            a_first: None,
            closes: Vec::new(),
            only_a: [Vec::new(), Vec::new()],
            only_b: [Vec::new(), Vec::new()],
        });
    }
    pairs
}

/// Files every packet under its pair.
fn distribute(c: &Collected, pairs: &mut [Pair], cfg: MatchConfig) {
    let by_a: HashMap<u32, usize> = pairs
        .iter()
        .enumerate()
        .map(|(i, p)| (p.a_flow, i))
        .collect();
    let by_b: HashMap<u32, usize> = pairs
        .iter()
        .enumerate()
        .map(|(i, p)| (p.b_flow, i))
        .collect();
    for m in &c.matched {
        let e = &c.index.entries[m.b as usize];
        let Some(&i) = by_a.get(&m.a_flow) else {
            continue;
        };
        let p = &mut pairs[i];
        if p.b_flow != e.flow {
            continue; // a stray match with a flow paired elsewhere
        }
        p.raw[m.a_dir as usize].push(e.ts_ns - m.a_ts);
        if let Some(k) = close_kind(m.flags) {
            if p.closes.len() < cfg.max_closes_per_flow {
                p.closes.push((m.a_dir, k, Some(m.a_ts), Some(e.ts_ns)));
            }
        }
    }
    for u in &c.unmatched_a {
        let Some(&i) = by_a.get(&u.a_flow) else {
            continue;
        };
        let p = &mut pairs[i];
        p.only_a[u.a_dir as usize].push(u.a_ts);
        if let Some(k) = close_kind(u.flags) {
            if p.closes.len() < cfg.max_closes_per_flow {
                p.closes.push((u.a_dir, k, Some(u.a_ts), None));
            }
        }
    }
    for e in c.index.entries.iter().filter(|e| !e.matched) {
        let Some(&i) = by_b.get(&e.flow) else {
            continue;
        };
        let p = &mut pairs[i];
        let a_dir = if p.b_dir[0] == e.dir { 0 } else { 1 };
        p.only_b[a_dir].push(e.ts_ns);
        if let Some(k) = close_kind(e.flags) {
            if p.closes.len() < cfg.max_closes_per_flow {
                p.closes.push((a_dir as u8, k, None, Some(e.ts_ns)));
            }
        }
    }
}

fn median(v: &[i64]) -> Option<i64> {
    let mut s = v.to_vec();
    s.sort_unstable();
    s.get(s.len() / 2).copied()
}

/// Decides each pair's A-to-B direction and estimates the offset (see the module docs).
fn offset(pairs: &mut [Pair]) -> Option<i64> {
    let (mut min_ab, mut min_ba) = (i64::MAX, i64::MAX);
    for p in pairs.iter_mut() {
        let (Some(m0), Some(m1)) = (median(&p.raw[0]), median(&p.raw[1])) else {
            continue;
        };
        // t_B - t_A is delay + offset one way and -delay + offset the other: larger is A-to-B.
        let first = if m0 >= m1 { 0 } else { 1 };
        p.a_first = Some(first);
        let ab = p.raw[first as usize]
            .iter()
            .min()
            .copied()
            .unwrap_or(i64::MAX);
        let ba = p.raw[1 - first as usize]
            .iter()
            .map(|r| -r)
            .min()
            .unwrap_or(i64::MAX);
        min_ab = min_ab.min(ab);
        min_ba = min_ba.min(ba);
    }
    if min_ab == i64::MAX || min_ba == i64::MAX {
        return None;
    }
    let off = (min_ab - min_ba).div_euclid(2);
    // Pairs matched one way only: that way passes A first when its delay comes out positive.
    for p in pairs.iter_mut().filter(|p| p.a_first.is_none()) {
        let d = if p.raw[0].is_empty() { 1 } else { 0 };
        let m = median(&p.raw[d]).unwrap_or(off);
        let d_first = m - off >= 0;
        p.a_first = Some(if d_first { d as u8 } else { 1 - d as u8 });
    }
    Some(off)
}

fn stats(mut v: Vec<i64>) -> Option<DelayStats> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    let n = v.len();
    // Nearest rank: the smallest value with at least q of the samples at or below it.
    let q = |q: f64| tailhunt_model::quantile::of_sorted(&v, q).unwrap_or(v[n - 1]);
    Some(DelayStats {
        min_ns: v[0],
        p50_ns: q(0.5),
        p90_ns: q(0.9),
        p99_ns: q(0.99),
        max_ns: v[n - 1],
        mean_ns: (v.iter().map(|&x| x as i128).sum::<i128>() / n as i128) as i64,
    })
}

/// Times are in A's clock for `in_a`, B's otherwise; `win_a`/`win_b` are the other capture's
/// span in that clock.
fn hop(p: &Pair, a_dir: usize, a_first: bool, off: i64, win: &Windows, sender: String) -> HopStats {
    let inside = |t: &&i64, w: (i64, i64)| **t >= w.0 && **t <= w.1;
    let only_a = p.only_a[a_dir]
        .iter()
        .filter(|t| inside(t, win.b_in_a))
        .count() as u64;
    let only_b = p.only_b[a_dir]
        .iter()
        .filter(|t| inside(t, win.a_in_b))
        .count() as u64;
    let matched = p.raw[a_dir].len() as u64;
    let (lost, appeared) = if a_first {
        (only_a, only_b)
    } else {
        (only_b, only_a)
    };
    let delays: Vec<i64> = p.raw[a_dir]
        .iter()
        .map(|r| if a_first { r - off } else { off - r })
        .collect();
    HopStats {
        sender,
        sent: matched + lost,
        matched,
        lost,
        appeared,
        delay: stats(delays),
    }
}

struct Windows {
    b_in_a: (i64, i64),
    a_in_b: (i64, i64),
}

fn closes(p: &Pair, a_first: u8, off: i64, name: &dyn Fn(u8) -> String) -> Vec<CloseOrigin> {
    let mut out: Vec<(i64, CloseOrigin)> = p
        .closes
        .iter()
        .map(|&(a_dir, kind, in_a, in_b)| {
            let upstream = if a_dir == a_first { Side::A } else { Side::B };
            let first_seen = match (in_a, in_b) {
                (Some(_), Some(_)) => upstream,
                (Some(_), None) => Side::A,
                _ => Side::B,
            };
            let when = in_a.unwrap_or_else(|| in_b.unwrap_or(0) - off);
            let c = CloseOrigin {
                kind: if kind == flags::RST { "rst" } else { "fin" }.into(),
                sender: name(a_dir),
                seen_in_a_ns: in_a,
                seen_in_b_ns: in_b,
                first_seen,
                from_middlebox: (in_a.is_none() || in_b.is_none()) && first_seen != upstream,
            };
            (when, c)
        })
        .collect();
    out.sort_by_key(|(t, _)| *t);
    out.into_iter().map(|(_, c)| c).collect()
}

pub(super) fn summarise(c: Collected, cfg: MatchConfig) -> MatchReport {
    let mut pairs = pair_flows(&c);
    distribute(&c, &mut pairs, cfg);
    let off = offset(&mut pairs);
    let o = off.unwrap_or(0);
    let win = Windows {
        b_in_a: (c.span_b.0 - o, c.span_b.1 - o),
        a_in_b: (c.span_a.0 + o, c.span_a.1 + o),
    };
    let mut notes = c.notes.clone();
    if off.is_none() {
        notes.push("no flow matched in both directions: clock offset unknown, taken as 0 and directions guessed; delays include the offset".into());
    }
    let mut flows: Vec<FlowPair> = pairs
        .iter()
        .map(|p| {
            let ka = c.flows_a.keys[p.a_flow as usize];
            let kb = c.flows_b.keys[p.b_flow as usize];
            let name = |d: u8| ka.endpoint(d as usize).to_string();
            let first = p.a_first.unwrap_or(0);
            let nat = (0..2u8)
                .any(|d| ka.endpoint(d as usize) != kb.endpoint(p.b_dir[d as usize] as usize));
            FlowPair {
                a: c.flows_a.name(p.a_flow),
                b: c.flows_b.name(p.b_flow),
                nat,
                matched_packets: (p.raw[0].len() + p.raw[1].len()) as u64,
                a_to_b: hop(p, first as usize, true, o, &win, name(first)),
                b_to_a: hop(p, 1 - first as usize, false, o, &win, name(1 - first)),
                closes: closes(p, first, o, &name),
            }
        })
        .collect();
    flows.sort_by_key(|f| std::cmp::Reverse(f.matched_packets));
    MatchReport {
        clock_offset_ns: off,
        clock_offset_method:
            "(min_ab - min_ba) / 2: the smallest one-way delay taken as equal both ways".into(),
        packets_a: c.packets_a,
        packets_b: c.index.len() as u64,
        matched_packets: c.matched.len() as u64,
        unmatched_flows_a: (c.flows_a.keys.len() - flows.len()) as u64,
        unmatched_flows_b: (c.flows_b.keys.len() - flows.len()) as u64,
        flows,
        notes,
    }
}
