//! An answer as a value: the results and what they are about (the cut, the coverage, the next
//! page), before any front end renders it. A refusal is the [`crate::Error`] beside it.

use asof_engine::model::record::SharedRow;
use asof_engine::{Coverage, Instant, VisibleBy};

/// A successful answer of one route.
#[derive(Debug, Clone)]
#[must_use]
pub struct Answer<T> {
    pub results: Vec<T>,
    /// The instant answered (the end of the window on diff routes).
    pub as_of: Option<Instant>,
    /// The clock, on cut and diff routes.
    pub visible_by: Option<VisibleBy>,
    pub coverage: Coverage,
    /// The token of the next page; `None` on the last.
    pub next_cursor: Option<String>,
    /// Watermarked `sample: true` (the public sample tier).
    pub sample: bool,
}

impl<T> Answer<T> {
    /// An answer of `results`, about nothing yet.
    pub fn of(results: Vec<T>) -> Self {
        Answer {
            results,
            as_of: None,
            visible_by: None,
            coverage: Coverage::default(),
            next_cursor: None,
            sample: false,
        }
    }
    /// The instant answered (and the clock, on cut and diff routes).
    pub fn at(mut self, as_of: Option<Instant>, visible_by: Option<VisibleBy>) -> Self {
        self.as_of = as_of;
        self.visible_by = visible_by;
        self
    }
    pub fn coverage(mut self, coverage: Coverage) -> Self {
        self.coverage = coverage;
        self
    }
    pub fn next(mut self, cursor: Option<String>) -> Self {
        self.next_cursor = cursor;
        self
    }
    pub fn sample(mut self, sample: bool) -> Self {
        self.sample = sample;
        self
    }
    /// The same answer with its results made into others (a page's rows into records).
    pub fn map<U>(self, f: impl FnOnce(Vec<T>) -> Vec<U>) -> Answer<U> {
        Answer {
            results: f(self.results),
            as_of: self.as_of,
            visible_by: self.visible_by,
            coverage: self.coverage,
            next_cursor: self.next_cursor,
            sample: self.sample,
        }
    }
}

/// A page of `/v1/news` or `/v1/news/diff`: the rows the engine shares with its row cache.
pub type NewsPage = Answer<SharedRow>;
