//! Identity answers: which CIKs a ticker named at an instant (an unknown ticker is an identity
//! hole), and which tickers a CIK carried.

use super::Corpus;
use crate::model::clock::Instant;
use crate::model::identity::{Mapping, ticker_hole_key};

impl Corpus {
    /// Intervals placing `ticker` at `as_of`; `Err(key)` is an identity hole.
    pub fn mapping_ticker(
        &self,
        ticker: &str,
        as_of: Instant,
    ) -> std::result::Result<Vec<Mapping>, String> {
        let m = self.identity.ticker_at(ticker, as_of);
        if m.is_empty() {
            Err(ticker_hole_key(ticker, as_of))
        } else {
            Ok(m)
        }
    }

    /// Intervals placing any ticker on `cik` at `as_of` (may be empty: a CIK with no ticker).
    pub fn mapping_cik(&self, cik: &str, as_of: Instant) -> Vec<Mapping> {
        self.identity.cik_at(cik, as_of)
    }
}
