//! Data plans and their rate-limit allowances. Which plan a route needs is declared on the
//! route itself (`crate::routes::TABLE`).

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
    /// Live (neither revoked nor expired) keys a user of this plan may hold at once.
    pub fn max_live_keys(self) -> u32 {
        match self {
            Plan::Researcher => 3,
            Plan::Power => 10,
            Plan::Desk => 50,
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

/// Requests per minute allowed to one client address on the public rate-limited routes
/// (`/v1/meta`, `/v1/sample/*`) unless `asof serve --public-rate-limit` says otherwise.
pub const PUBLIC_REQUESTS_PER_MINUTE: u32 = 120;

/// MCP messages (`POST /mcp`) allowed per request a plan (or the public tier) allows per
/// minute. Why more than one: an agent's session sends `initialize`, `tools/list` and pings
/// around its tool calls, and the tool calls are limited again as the routes they become;
/// the message budget bounds what a client can send the endpoint (each up to 1 MiB), not the
/// data it can read.
pub const MCP_MESSAGES_PER_REQUEST: u32 = 4;

/// Refused credentials one client address may present per minute on one replica unless
/// `asof serve --bad-credential-limit` says otherwise. Why 20: a person mistyping a key or
/// an expired session retries a few times; a script cycling keys is past 20 in a second, and
/// each refusal before the limit is one state-store lookup.
pub const BAD_CREDENTIALS_PER_MINUTE: u32 = 20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_are_ordered_cheapest_first_and_parse_from_their_wire_names() {
        assert!(Plan::Desk > Plan::Power && Plan::Power > Plan::Researcher);
        for p in Plan::ALL {
            assert_eq!(p.as_str().parse::<Plan>(), Ok(p));
        }
        assert_eq!("gold".parse::<Plan>(), Err(()));
    }
}
