//! Per-holder concurrency caps: how many of something one holder (an account, a key) may
//! hold at once on this process (open streams, connector calls in flight), and optionally how
//! many all holders together may. One counter per holder, taken without waiting and given
//! back when the slot drops; a holder holding nothing has no entry, so the map never grows
//! with holders that came once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The slots of every holder, `max` each and `total` in all. Cheap to clone (the clones share
/// the counts).
#[derive(Debug, Clone)]
pub struct KeySlots {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    max: usize,
    /// All holders together; `None`: no bound beyond each holder's.
    total: Option<usize>,
    held: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    by: HashMap<String, usize>,
    total: usize,
}

/// One slot of a holder, held until dropped.
#[derive(Debug)]
pub struct KeySlot {
    slots: KeySlots,
    key_id: String,
}

/// Why no slot was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// The holder holds all of its own.
    Holder,
    /// The process holds its total.
    Process,
}

impl KeySlots {
    pub fn new(max: usize) -> Self {
        Self::bounded(max, None)
    }

    /// `max` slots per holder and at most `total` for all holders together.
    pub fn bounded(max: usize, total: Option<usize>) -> Self {
        KeySlots {
            inner: Arc::new(Inner {
                max,
                total,
                held: Mutex::default(),
            }),
        }
    }

    /// How many slots each holder has.
    pub fn max(&self) -> usize {
        self.inner.max
    }

    /// The bound on all holders together, if any.
    pub fn total(&self) -> Option<usize> {
        self.inner.total
    }

    /// One of `key_id`'s slots; `None` when it holds all of them, or the process its total
    /// (never waits).
    pub fn take(&self, key_id: &str) -> Option<KeySlot> {
        self.try_take(key_id).ok()
    }

    /// One of `key_id`'s slots, or which bound refused it (never waits).
    pub fn try_take(&self, key_id: &str) -> Result<KeySlot, Full> {
        let mut held = self.inner.held.lock().expect("key slots");
        if self.inner.total.is_some_and(|t| held.total >= t) {
            return Err(Full::Process);
        }
        let n = held.by.get(key_id).copied().unwrap_or(0);
        if n >= self.inner.max {
            return Err(Full::Holder);
        }
        held.by.insert(key_id.to_owned(), n + 1);
        held.total += 1;
        Ok(KeySlot {
            slots: self.clone(),
            key_id: key_id.to_owned(),
        })
    }

    /// Slots held now, all holders together.
    pub fn held(&self) -> usize {
        self.inner.held.lock().expect("key slots").total
    }
}

impl Drop for KeySlot {
    fn drop(&mut self) {
        let mut held = self.slots.inner.held.lock().expect("key slots");
        if let Some(n) = held.by.get_mut(&self.key_id) {
            *n -= 1;
            if *n == 0 {
                held.by.remove(&self.key_id);
            }
            held.total -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_holds_at_most_its_slots_gets_them_back_and_leaves_no_entry_when_idle() {
        let slots = KeySlots::new(2);
        let a = slots.take("k1").unwrap();
        let b = slots.take("k1").unwrap();
        assert!(slots.take("k1").is_none(), "a third is refused");
        let other = slots.take("k2").expect("another key has its own");
        assert_eq!(slots.held(), 3);
        drop(a);
        let c = slots.take("k1").expect("a dropped slot is given back");
        drop((b, c, other));
        assert_eq!(slots.held(), 0);
        assert!(
            slots.inner.held.lock().unwrap().by.is_empty(),
            "no entry for idle keys"
        );
        let none = KeySlots::new(0);
        assert!(none.take("k").is_none());
        assert!(none.inner.held.lock().unwrap().by.is_empty());
    }

    #[test]
    fn a_process_total_bounds_all_holders_together() {
        let slots = KeySlots::bounded(2, Some(3));
        let held: Vec<_> = ["a", "a", "b"]
            .iter()
            .map(|k| slots.try_take(k).unwrap())
            .collect();
        assert_eq!(slots.try_take("c").unwrap_err(), Full::Process);
        assert_eq!(slots.held(), 3);
        drop(held);
        let a: Vec<_> = (0..2).map(|_| slots.try_take("a").unwrap()).collect();
        assert_eq!(slots.try_take("a").unwrap_err(), Full::Holder);
        assert!(slots.try_take("c").is_ok(), "the slot is dropped at once");
        drop(a);
        assert_eq!(slots.held(), 0);
    }
}
