//! Plans, the plan-gating table (the one place that says which plan may call which route), and
//! rate-limit allowances.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

/// Data plans, cheapest first; a higher plan includes every route of a lower one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Plan {
    Researcher,
    Power,
    Desk,
}

impl Plan {
    pub const ALL: [Plan; 3] = [Plan::Researcher, Plan::Power, Plan::Desk];
    pub fn as_str(self) -> &'static str {
        match self {
            Plan::Researcher => "researcher",
            Plan::Power => "power",
            Plan::Desk => "desk",
        }
    }
    /// Requests per fixed one-minute window.
    pub fn requests_per_minute(self) -> u32 {
        match self {
            Plan::Researcher => 60,
            Plan::Power => 300,
            Plan::Desk => 1200,
        }
    }
}

impl FromStr for Plan {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        Plan::ALL.into_iter().find(|p| p.as_str() == s).ok_or(())
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// No credential; rate-limited per client address.
    Public,
    /// A Bearer key of at least this plan.
    Key(Plan),
}

/// The plan-gating table: every keyed route family and the least plan that may call it.
/// Files need Power; audit logs and the connector need Desk; everything else any plan.
/// `/health` is deliberately absent: load balancers poll it and it must never answer 429.
pub const GATES: &[(&str, Access)] = &[
    ("/v1/meta", Access::Public),
    ("/v1/sample/", Access::Public),
    ("/v1/news", Access::Key(Plan::Researcher)),
    ("/v1/coverage", Access::Key(Plan::Researcher)),
    ("/v1/mapping/", Access::Key(Plan::Researcher)),
    ("/v1/me", Access::Key(Plan::Researcher)),
    ("/v1/keys", Access::Key(Plan::Researcher)),
    ("/v1/stream", Access::Key(Plan::Researcher)),
    ("/v1/files", Access::Key(Plan::Power)),
    ("/v1/audit-log", Access::Key(Plan::Desk)),
    ("/v1/connectors/", Access::Key(Plan::Desk)),
];

/// The access rule of a path (longest matching prefix of [`GATES`]); `None` for paths the
/// table does not name (discovery documents, unknown paths), which need no credential.
pub fn access_for(path: &str) -> Option<Access> {
    GATES
        .iter()
        .filter(|(prefix, _)| {
            path == *prefix
                || (path.starts_with(prefix)
                    && (prefix.ends_with('/') || path[prefix.len()..].starts_with('/')))
        })
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, a)| *a)
}

/// Requests per minute allowed to one client address on the public rate-limited routes
/// (`/v1/meta`, `/v1/sample/*`) unless `asof serve --public-rate-limit` says otherwise.
pub const PUBLIC_REQUESTS_PER_MINUTE: u32 = 120;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gating_table_names_the_least_plan_per_route_family() {
        assert_eq!(access_for("/v1/news"), Some(Access::Key(Plan::Researcher)));
        assert_eq!(
            access_for("/v1/news/diff"),
            Some(Access::Key(Plan::Researcher))
        );
        assert_eq!(access_for("/v1/newsletter"), None);
        assert_eq!(access_for("/v1/files/abc"), Some(Access::Key(Plan::Power)));
        assert_eq!(
            access_for("/v1/audit-log/stats"),
            Some(Access::Key(Plan::Desk))
        );
        assert_eq!(access_for("/v1/sample/news"), Some(Access::Public));
        assert_eq!(access_for("/v1/openapi.json"), None);
        assert!(Plan::Desk > Plan::Power && Plan::Power > Plan::Researcher);
    }
}
