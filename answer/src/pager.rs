//! The one pager of every paged route: a cursor is opened and the next one minted here, bound
//! to the route's operation, its filter set and the corpus version, so a cursor is refused by
//! any other route, query or version (a moved corpus: `cursor_expired`).
//!
//! Cursors are `asof-cursor` tokens (HMAC-signed): any replica holding the key verifies them.

use asof_cursor::{CursorSigner, FilterDigest};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::Result;

/// The paged operations, each a name of its own in its cursors (a cursor of one is refused
/// by every other).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `/v1/news`.
    News,
    /// `/v1/news/diff`.
    Diff,
    /// `/v1/coverage`.
    Coverage,
    /// `/v1/sample/news` (its pages hold the whole example; a cursor is minted, never taken).
    SampleNews,
    /// `/v1/sample/diff` (as `SampleNews`).
    SampleDiff,
    /// `/v1/sample/coverage`.
    SampleCoverage,
    /// `/v1/files`.
    Files,
    /// `/v1/audit/log` (its cursors outlive corpus versions: bound to a version of its own).
    AuditLog,
}

impl Op {
    /// The name signed into the operation's cursors. Never change one: cursors in flight
    /// would be refused.
    pub const fn as_str(self) -> &'static str {
        match self {
            Op::News => "news",
            Op::Diff => "diff",
            Op::Coverage => "coverage",
            Op::SampleNews => "sample.news",
            Op::SampleDiff => "sample.diff",
            Op::SampleCoverage => "sample.coverage",
            Op::Files => "files",
            Op::AuditLog => "audit-log",
        }
    }
}

/// Opens and mints the cursors of every paged route.
#[derive(Debug, Clone)]
pub struct Pager {
    signer: CursorSigner,
}

impl Pager {
    /// A pager signing with `secret` (the server's cursor key; a process of its own for the
    /// in-process API).
    pub fn new(secret: &str) -> Self {
        Pager {
            signer: CursorSigner::new(secret),
        }
    }

    /// The signer itself, for tokens that are not page cursors (MCP sessions).
    pub fn signer(&self) -> &CursorSigner {
        &self.signer
    }

    /// One request's paging: `op` with this filter set, at `version`.
    pub fn bind<'a>(&'a self, op: Op, filters: &[(&str, String)], version: &'a str) -> Paging<'a> {
        let mut digest = FilterDigest::new();
        for (name, value) in filters {
            digest.field(name, value);
        }
        self.bind_digest(op, digest, version)
    }

    /// [`Self::bind`] with the filter set given as its digest, built from the values as they
    /// display (no text made for each).
    pub fn bind_digest<'a>(
        &'a self,
        op: Op,
        filters: FilterDigest,
        version: &'a str,
    ) -> Paging<'a> {
        Paging {
            signer: &self.signer,
            op,
            filters: filters.finish(),
            version,
        }
    }
}

/// The paging of one request: where its cursor resumes, and the cursor of its next page.
#[derive(Debug)]
pub struct Paging<'a> {
    signer: &'a CursorSigner,
    op: Op,
    filters: String,
    version: &'a str,
}

impl Paging<'_> {
    /// The position `cursor` resumes from (none without one): refused when another route,
    /// query or version minted it.
    pub fn open<P: DeserializeOwned>(&self, cursor: Option<&str>) -> Result<Option<P>> {
        Ok(cursor
            .map(|c| {
                self.signer
                    .open(c, self.op.as_str(), &self.filters, self.version)
            })
            .transpose()?)
    }

    /// The cursor of the page after `next` (none on the last page).
    pub fn mint<P: Serialize>(&self, next: Option<P>) -> Option<String> {
        next.map(|p| {
            self.signer
                .mint(self.op.as_str(), &self.filters, self.version, &p)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    #[test]
    fn a_cursor_opens_only_for_its_operation_filters_and_version() {
        let pager = Pager::new("k");
        let filters = [("lane", "certified_pit".to_owned())];
        let news = pager.bind(Op::News, &filters, "sha256:a");
        let cursor = news.mint(Some(7u64)).unwrap();
        assert_eq!(news.open::<u64>(Some(&cursor)).unwrap(), Some(7));
        assert_eq!(news.open::<u64>(None).unwrap(), None);
        let diff = pager.bind(Op::Diff, &filters, "sha256:a");
        assert!(matches!(
            diff.open::<u64>(Some(&cursor)),
            Err(Error::InvalidRequest { .. })
        ));
        let other = pager.bind(
            Op::News,
            &[("lane", "forward_first_seen".into())],
            "sha256:a",
        );
        assert!(matches!(
            other.open::<u64>(Some(&cursor)),
            Err(Error::InvalidRequest { .. })
        ));
        let moved = pager.bind(Op::News, &filters, "sha256:b");
        assert!(matches!(
            moved.open::<u64>(Some(&cursor)),
            Err(Error::CursorExpired)
        ));
        assert_eq!(news.mint::<u64>(None), None);
    }
}
