//! Per-key concurrency caps: how many of something one API key may hold at once on this
//! process (open streams, connector calls in flight). One counter per key, taken without
//! waiting and given back when the slot drops; a key holding nothing has no entry, so the map
//! never grows with keys that came once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The slots of every key, `max` each. Cheap to clone (the clones share the counts).
#[derive(Debug, Clone)]
pub struct KeySlots {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    max: usize,
    held: Mutex<HashMap<String, usize>>,
}

/// One slot of a key, held until dropped.
#[derive(Debug)]
pub struct KeySlot {
    slots: KeySlots,
    key_id: String,
}

impl KeySlots {
    pub fn new(max: usize) -> Self {
        KeySlots {
            inner: Arc::new(Inner {
                max,
                held: Mutex::default(),
            }),
        }
    }

    /// How many slots each key has.
    pub fn max(&self) -> usize {
        self.inner.max
    }

    /// One of `key_id`'s slots; `None` when it holds all of them (never waits).
    pub fn take(&self, key_id: &str) -> Option<KeySlot> {
        let mut held = self.inner.held.lock().expect("key slots");
        let n = held.entry(key_id.to_owned()).or_default();
        if *n >= self.inner.max {
            if *n == 0 {
                held.remove(key_id);
            }
            return None;
        }
        *n += 1;
        Some(KeySlot {
            slots: self.clone(),
            key_id: key_id.to_owned(),
        })
    }

    /// Slots held now, all keys together.
    pub fn held(&self) -> usize {
        self.inner.held.lock().expect("key slots").values().sum()
    }
}

impl Drop for KeySlot {
    fn drop(&mut self) {
        let mut held = self.slots.inner.held.lock().expect("key slots");
        if let Some(n) = held.get_mut(&self.key_id) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.key_id);
            }
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
            slots.inner.held.lock().unwrap().is_empty(),
            "no entry for idle keys"
        );
        let none = KeySlots::new(0);
        assert!(none.take("k").is_none());
        assert!(none.inner.held.lock().unwrap().is_empty());
    }
}
