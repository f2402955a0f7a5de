//! What the service keeps beyond one request: the state store (accounts, keys, receipts, rate
//! windows, secrets, billing) over SQLite or PostgreSQL, and the in-process layers in front of it (the
//! key cache, write-behind rate windows, the audit receipt queue). Nothing here knows HTTP.

pub mod audit;
pub mod billing;
pub mod flush;
pub mod key_cache;
pub mod rate;
pub mod refusals;
pub mod slots;
pub mod store;
pub mod usage;

pub use billing::{
    Attestation, BillingEffect, BillingEvent, BillingOutcome, PlanChange, SubscriptionRecord,
};
pub use store::{KeyRecord, StateStore, StoredReceipt, User, hash_key, open};

/// The hash map of the per-request tables (key cache, rate windows, refusal counts, usage):
/// foldhash, seeded per process, where the standard SipHash cost about a thousand instructions
/// on each keyed request for its three lookups by text. Their keys are hashes of credentials,
/// account ids and address buckets; a process's random seed keeps collisions unchosen.
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
