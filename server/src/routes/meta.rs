//! The plans of the meta record (`results[0]` of `/v1/meta`), derived from the route table;
//! the rest of the record is the answer layer's (`asof_answer::meta`).

pub use asof_answer::meta::{MetaRecord, PlanInfo, meta_record};

use crate::http::route::{Access, Route};
use crate::plan::Plan;

/// Each plan, with the routes it may call: keyed routes of its plan or below, and the account
/// routes every plan has.
pub fn plans(routes: &[Route]) -> Vec<PlanInfo> {
    Plan::ALL
        .iter()
        .map(|&p| PlanInfo {
            plan_id: p.as_str(),
            requests_per_minute: p.requests_per_minute(),
            max_live_keys: p.max_live_keys(),
            routes: {
                // Keyed routes of this plan or below, and the account routes every plan has
                // (one path may have several entries, one per method: listed once).
                let mut paths: Vec<String> = Vec::new();
                for r in routes.iter().filter(|r| match r.access {
                    Access::Key(min) => min <= p,
                    Access::KeyOrSession | Access::Session => true,
                    _ => false,
                }) {
                    let path = r.path();
                    if !paths.contains(&path) {
                        paths.push(path);
                    }
                }
                paths
            },
        })
        .collect()
}
