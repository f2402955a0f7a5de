//! Refused credentials per client address, counted in this process: what makes a flood of
//! made-up keys or session cookies cost the flooder, not the state store.
//!
//! Every refused credential (an unknown, revoked or expired key; an unknown, ended or expired
//! session) counts against the client's address bucket in the current minute. Past the limit,
//! the address's credentials are refused `429` with `Retry-After` before any lookup, until
//! the minute ends, except a key this replica verified within the key cache's TTL (no lookup
//! needed; a valid user behind the same NAT keeps working). So a flood of random
//! `svc_live_…` values costs at most the limit's worth of store queries per address, minute
//! and replica, and no `503 state_unavailable` for everyone else.
//!
//! Why in memory and not in the state store: counting in the store would spend, per refused
//! credential, the store write the counter exists to save. Each replica counts alone, so N
//! replicas let an address spend N limits a minute: still a few dozen queries, not thousands.

use std::sync::Mutex;

use asof_engine::Instant;

use crate::state::FastMap;

/// Address buckets tracked at most; past it, the ones of past windows are dropped (and all
/// when none is), so a flood from many addresses cannot grow the map without bound.
const MAX_ADDRESSES: usize = 100_000;

const WINDOW_MICROS: i64 = 60_000_000;

#[derive(Debug)]
pub struct Refusals {
    limit: u32,
    counts: Mutex<FastMap<String, (i64, u32)>>,
}

impl Refusals {
    pub fn new(limit: u32) -> Self {
        Refusals {
            limit: limit.max(1),
            counts: Mutex::new(FastMap::default()),
        }
    }

    fn window(now: Instant) -> i64 {
        now.micros().div_euclid(WINDOW_MICROS) * WINDOW_MICROS
    }

    fn retry_after(window: i64, now: Instant) -> u64 {
        ((window + WINDOW_MICROS - now.micros()) / 1_000_000).max(1) as u64
    }

    /// Seconds until `bucket` may present unverified credentials again, when it is past its
    /// limit in the current minute.
    pub fn blocked(&self, bucket: &str, now: Instant) -> Option<u64> {
        let window = Self::window(now);
        let counts = self.counts.lock().expect("refusals lock");
        match counts.get(bucket) {
            Some(&(w, n)) if w == window && n >= self.limit => Some(Self::retry_after(w, now)),
            _ => None,
        }
    }

    /// Counts one refused credential of `bucket`.
    pub fn count(&self, bucket: &str, now: Instant) {
        let window = Self::window(now);
        let mut counts = self.counts.lock().expect("refusals lock");
        if counts.len() >= MAX_ADDRESSES && !counts.contains_key(bucket) {
            counts.retain(|_, (w, _)| *w == window);
            if counts.len() >= MAX_ADDRESSES {
                counts.clear();
            }
        }
        let e = counts.entry(bucket.to_owned()).or_insert((window, 0));
        if e.0 != window {
            *e = (window, 0);
        }
        e.1 = e.1.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_blocked_once_its_refusals_reach_the_limit_until_the_minute_ends() {
        let r = Refusals::new(3);
        // 1_800_000_000 s is a multiple of 60: second 0 of a minute.
        let at = |s: i64| Instant::from_micros((1_800_000_000 + s) * 1_000_000);
        for _ in 0..2 {
            r.count("203.0.113.9", at(10));
        }
        assert_eq!(r.blocked("203.0.113.9", at(10)), None, "two of three");
        r.count("203.0.113.9", at(10));
        assert_eq!(r.blocked("203.0.113.9", at(10)), Some(50));
        assert_eq!(r.blocked("198.51.100.1", at(10)), None, "others are not");
        assert_eq!(r.blocked("203.0.113.9", at(60)), None, "a new minute");
        r.count("203.0.113.9", at(61));
        assert_eq!(r.blocked("203.0.113.9", at(61)), None, "counted afresh");
    }
}
