//! The as-of rule, written once: which revisions a cut sees, as a row predicate for the index
//! path, the walk and single-record lookups, and as a DataFusion filter and anti-join for the
//! reference scan, `news_asof` and the SQL other engines run (`crate::rule`).
//!
//! A row is visible at a cut when it is of the cut's lane (lanes are never mixed in one
//! answer), and its clock is non-null, at or before `as_of`, and (in a diff window) after
//! `start`. Of a record's revisions, the one in force follows the cut's [`Revisions`] policy.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{RecordBatch, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::dataframe::DataFrame;
use datafusion::logical_expr::JoinType;
use datafusion::prelude::{Expr, SessionContext, col, lit};

use crate::error::Result;
use crate::model::clock::{Instant, Lane, VisibleBy};
use crate::model::record::{NewsRow, ts};

/// One cut (or diff window): instant, clock, lane and revision policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    pub as_of: Instant,
    /// Exclusive start of a diff window.
    pub start: Option<Instant>,
    pub clock: VisibleBy,
    /// The one lane answered; `None` for a record lookup by id, which names its own lane.
    pub lane: Option<Lane>,
    pub revisions: Revisions,
}

/// Which of a record's revisions a cut sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revisions {
    /// The corpus version's best knowledge: the revision never superseded, whatever the
    /// instant (cuts on `published_at` and `available_at`).
    Latest,
    /// What the corpus held at the cut: revisions committed at or before it, and of those the
    /// one not yet superseded by a revision committed at or before it (cuts on
    /// `committed_at`).
    AsCommitted,
}

impl Revisions {
    /// The policy a clock implies: only `committed_at` replays the corpus's own history.
    pub fn of(clock: VisibleBy) -> Self {
        match clock {
            VisibleBy::CommittedAt => Revisions::AsCommitted,
            _ => Revisions::Latest,
        }
    }
}

/// Superseded revision id → the commit instant of the revision that superseded it.
///
/// Hashed with foldhash, not SipHash: the keys are the corpus's own revision ids (no caller
/// chooses them), and the map is looked up once per row a page considers.
pub type Superseded = HashMap<String, Instant, foldhash::fast::RandomState>;

impl Cut {
    /// A cut on `clock` at `as_of`, over every lane (a record lookup).
    pub fn at(as_of: Instant, clock: VisibleBy) -> Self {
        Cut {
            as_of,
            start: None,
            clock,
            lane: None,
            revisions: Revisions::of(clock),
        }
    }

    /// Whether the revision existed in the corpus at the cut: on `committed_at`, only
    /// revisions committed at or before it; on the other clocks, every revision of the
    /// version (its best knowledge).
    pub fn knows(&self, r: &NewsRow) -> bool {
        match self.revisions {
            Revisions::Latest => true,
            Revisions::AsCommitted => r.committed_at.is_some_and(|c| c <= self.as_of),
        }
    }

    /// The row is of the cut's lane and its clock lies in the cut: non-null, `<= as_of`,
    /// `> start`. Null is never visible (fail closed).
    pub fn sees(&self, r: &NewsRow) -> bool {
        self.lane.is_none_or(|l| l == r.lane)
            && r.clock(self.clock)
                .is_some_and(|c| c <= self.as_of && self.start.is_none_or(|s| c > s))
    }

    /// Whether a revision superseded at `superseded_at` (if ever) is the one in force.
    pub fn in_force(&self, superseded_at: Option<Instant>) -> bool {
        match self.revisions {
            Revisions::AsCommitted => superseded_at.is_none_or(|at| at > self.as_of),
            Revisions::Latest => superseded_at.is_none(),
        }
    }

    /// The row predicate: seen and in force.
    pub fn admits(&self, r: &NewsRow, superseded: &Superseded) -> bool {
        self.sees(r) && self.in_force(superseded.get(&r.revision_id).copied())
    }

    /// The row predicate but the revision rule ([`Self::sees`] and [`Self::knows`]) as a
    /// DataFusion expression over partition columns; [`Self::apply`] adds the revision rule.
    pub fn expr(&self) -> Expr {
        let c = col(self.clock.as_str());
        let mut pred = c.clone().is_not_null().and(c.clone().lt_eq(ts(self.as_of)));
        if let Some(start) = self.start {
            pred = pred.and(c.gt(ts(start)));
        }
        if let Some(lane) = self.lane {
            pred = pred.and(col("lane").eq(lit(lane.as_str())));
        }
        if self.revisions == Revisions::AsCommitted && self.clock != VisibleBy::CommittedAt {
            pred = pred.and(col("committed_at").lt_eq(ts(self.as_of)));
        }
        pred
    }

    /// This cut over one source-lane's record table, the rows of its lane alone (every
    /// partition holds its own source-lane's rows, which `asof verify` checks): the lane
    /// predicate is implied by the table and left out of the plan. What the rule exports to
    /// other engines runs over such tables, where the predicate would cost a string column
    /// read and compared for every row (a third of the rule's cost to Spark at 2M rows).
    pub fn over_lane_table(self) -> Cut {
        Cut { lane: None, ..self }
    }

    /// Which rows of a supersessions table take their superseded revision out of this cut:
    /// every one under [`Revisions::Latest`] (the version's best knowledge), and under
    /// [`Revisions::AsCommitted`] those whose superseding revision was committed at or before
    /// `as_of` ([`Self::in_force`] as an expression; a test holds the two equal). `None` where
    /// every row does.
    pub fn stale_expr(&self) -> Option<Expr> {
        match self.revisions {
            Revisions::Latest => None,
            Revisions::AsCommitted => Some(col(SUPERSEDED_AT).lt_eq(ts(self.as_of))),
        }
    }

    /// The whole rule over two tables, the one plan every reading of it runs or exports:
    /// `rows` (partition rows) filtered by [`Self::expr`], then the revisions a stale row of
    /// `supersessions` (columns [`SUPERSEDED`] and [`SUPERSEDED_AT`], the rule table of
    /// `crate::rule`) names taken out by an anti-join (a hash join, however many there are;
    /// an `IN` list of them would be an expression as large as the corpus's corrections).
    /// A revision superseded twice has two rows; it is out as soon as one of them is stale,
    /// which is the earliest superseding commit [`Superseded`] keeps.
    ///
    /// The reference scan and `news_asof` run it in DataFusion; other engines run
    /// [`Self::plan_by_position`], the same plan keyed by where the revision is stored.
    pub fn plan(&self, rows: DataFrame, supersessions: DataFrame) -> Result<DataFrame> {
        self.plan_on(rows, supersessions, &["revision_id"], &[SUPERSEDED])
    }

    /// [`Self::plan`] with the superseded revisions found by their place in the version's
    /// files rather than by id: `rows` carries each row's file name and row index in it
    /// ([`ROW_FILE`], [`ROW_INDEX`]; Spark's `_metadata.file_name` and `_metadata.row_index`,
    /// DuckDB's `filename` and `file_row_number`), the supersessions table the place of each
    /// superseded revision ([`SUPERSEDED_FILE`], [`SUPERSEDED_ROW`]; null where the source-lane
    /// holds no such revision, which then takes nothing out). Why: the engine computes a
    /// row's place without reading anything, where the revision id is a 40-byte column read
    /// and hashed for every row of the cut (1.2x of Spark's plain scan at 2M rows). The
    /// places are the version's own (its files never change), derived at publish and checked
    /// by `asof verify`; the tests hold both plans to the API's answers.
    pub fn plan_by_position(&self, rows: DataFrame, supersessions: DataFrame) -> Result<DataFrame> {
        self.plan_on(
            rows,
            supersessions,
            &[ROW_FILE, ROW_INDEX],
            &[SUPERSEDED_FILE, SUPERSEDED_ROW],
        )
    }

    fn plan_on(
        &self,
        rows: DataFrame,
        supersessions: DataFrame,
        row_key: &[&str],
        stale_key: &[&str],
    ) -> Result<DataFrame> {
        let stale_cols: Vec<String> = stale_key.iter().map(|k| format!("stale_{k}")).collect();
        let stale = match self.stale_expr() {
            Some(e) => supersessions.filter(e)?,
            None => supersessions,
        }
        .select(
            stale_key
                .iter()
                .zip(&stale_cols)
                .map(|(k, alias)| col(*k).alias(alias))
                .collect::<Vec<_>>(),
        )?;
        let stale_cols: Vec<&str> = stale_cols.iter().map(String::as_str).collect();
        // The filter is written above the anti-join (the optimizer pushes it below, into the
        // scan): DataFusion's unparser writes an anti-join as `WHERE NOT EXISTS (…)` and, with
        // a filter below it, drops that filter from the SQL it writes.
        Ok(rows
            .join(stale, JoinType::LeftAnti, row_key, &stale_cols, None)?
            .filter(self.expr())?)
    }

    /// [`Self::plan`] with the supersessions of a loaded version's map (the earliest
    /// superseding commit of each superseded revision).
    pub fn apply(&self, df: DataFrame, superseded: &Superseded) -> Result<DataFrame> {
        let (ids, at): (Vec<&str>, Vec<i64>) = superseded
            .iter()
            .map(|(rev, at)| (rev.as_str(), at.micros()))
            .unzip();
        let batch = RecordBatch::try_new(
            supersession_columns(),
            vec![
                Arc::new(StringArray::from(ids)),
                Arc::new(TimestampMicrosecondArray::from(at).with_timezone("UTC")),
            ],
        )?;
        let table = SessionContext::new().read_batch(batch)?;
        self.plan(df, table)
    }
}

/// The supersessions table's column of the superseded revision id.
pub const SUPERSEDED: &str = "revision_id";
/// The supersessions table's column of the superseding revision's `committed_at`.
pub const SUPERSEDED_AT: &str = "superseded_at";

/// The two columns of a supersessions table the rule reads.
pub fn supersession_columns() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new(SUPERSEDED, DataType::Utf8, false),
        Field::new(SUPERSEDED_AT, crate::model::record::ts_type(), false),
    ]))
}

/// The supersessions table's column of the superseded revision's partition file name.
pub const SUPERSEDED_FILE: &str = "superseded_file";
/// The supersessions table's column of the superseded revision's row index in that file.
pub const SUPERSEDED_ROW: &str = "superseded_row";
/// The column of a row's partition file name that [`Cut::plan_by_position`] reads.
pub const ROW_FILE: &str = "asof_file";
/// The column of a row's index in its partition file (from 0).
pub const ROW_INDEX: &str = "asof_row";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::clock::Day;
    use crate::model::record::tests::row;
    use datafusion::prelude::SessionContext;

    fn t(s: &str) -> Instant {
        Instant::parse(s).unwrap()
    }

    #[test]
    fn a_row_published_exactly_at_the_cut_is_visible_and_a_null_clock_never_is() {
        let r = row("a_1", "1", Some("2026-01-09T15:00:00Z"));
        assert!(Cut::at(t("2026-01-09T15:00:00Z"), VisibleBy::PublishedAt).sees(&r));
        assert!(!Cut::at(t("2026-01-09T14:59:59Z"), VisibleBy::PublishedAt).sees(&r));
        let undated = row("b_1", "1", None);
        assert!(!Cut::at(t("2099-01-01T00:00:00Z"), VisibleBy::PublishedAt).sees(&undated));
    }

    #[test]
    fn a_diff_window_excludes_its_start_and_includes_its_end() {
        let r = row("a_1", "1", Some("2026-01-09T15:00:00Z"));
        let window = |s: &str, e: &str| Cut {
            start: Some(t(s)),
            ..Cut::at(t(e), VisibleBy::PublishedAt)
        };
        assert!(window("2026-01-09T14:00:00Z", "2026-01-09T15:00:00Z").sees(&r));
        assert!(!window("2026-01-09T15:00:00Z", "2026-01-09T16:00:00Z").sees(&r));
    }

    #[test]
    fn on_committed_at_a_revision_is_in_force_until_its_successor_is_committed() {
        let cut = Cut::at(t("2026-01-10T00:00:00Z"), VisibleBy::CommittedAt);
        assert!(cut.in_force(None));
        assert!(cut.in_force(Some(t("2026-01-11T00:00:00Z"))));
        assert!(!cut.in_force(Some(t("2026-01-10T00:00:00Z"))));
        let latest = Cut::at(t("2026-01-10T00:00:00Z"), VisibleBy::PublishedAt);
        assert!(!latest.in_force(Some(t("2026-01-11T00:00:00Z"))));
    }

    /// The expression DataFusion evaluates and the row predicate agree on every row.
    #[tokio::test]
    async fn the_expression_and_the_row_predicate_agree() {
        let mut rows = vec![
            row("a_1", "1", Some("2026-01-09T15:00:00Z")),
            row("b_1", "1", Some("2026-01-10T15:00:00Z")),
            row("c_1", "1", None),
            row("d_1", "1", Some("2026-01-08T00:00:00Z")),
            row("e_1", "1", Some("2026-01-08T00:00:00Z")),
        ];
        for (i, r) in rows.iter_mut().enumerate() {
            r.committed_at = Some(t(&format!("2026-01-{:02}T12:00:00Z", 7 + i)));
            r.revision_id = format!("rev{i}");
        }
        rows[4].lane = Lane::ForwardFirstSeen;
        rows[4].committed_at = Some(t("2026-01-08T00:00:00Z"));
        let mut answers = std::collections::BTreeSet::new();
        let mut superseded = Superseded::default();
        superseded.insert("rev0".into(), t("2026-01-09T00:00:00Z"));
        superseded.insert("rev3".into(), t("2026-01-12T00:00:00Z"));
        let ctx = SessionContext::new();
        ctx.register_batch("r", crate::model::record::to_batch(&rows).unwrap())
            .unwrap();
        let lanes = [None, Some(Lane::CertifiedPit), Some(Lane::ForwardFirstSeen)];
        for (clock, lane) in [VisibleBy::PublishedAt, VisibleBy::CommittedAt]
            .into_iter()
            .flat_map(|c| lanes.map(|l| (c, l)))
        {
            for (as_of, start) in [
                ("2026-01-09T15:00:00Z", None),
                ("2026-01-11T00:00:00Z", None),
                ("2026-01-11T00:00:00Z", Some("2026-01-09T15:00:00Z")),
            ] {
                let cut = Cut {
                    start: start.map(t),
                    lane,
                    ..Cut::at(t(as_of), clock)
                };
                let want: Vec<String> = rows
                    .iter()
                    .filter(|r| cut.admits(r, &superseded))
                    .map(|r| r.id.clone())
                    .collect();
                let batches = cut
                    .apply(ctx.table("r").await.unwrap(), &superseded)
                    .unwrap()
                    .select_columns(&["id"])
                    .unwrap()
                    .sort(vec![col("id").sort(true, true)])
                    .unwrap()
                    .collect()
                    .await
                    .unwrap();
                let got: Vec<String> = batches
                    .iter()
                    .flat_map(|b| {
                        let a =
                            arrow::compute::cast(b.column(0), &arrow::datatypes::DataType::Utf8)
                                .unwrap();
                        let a = a
                            .as_any()
                            .downcast_ref::<arrow::array::StringArray>()
                            .unwrap();
                        a.iter().flatten().map(str::to_owned).collect::<Vec<_>>()
                    })
                    .collect();
                assert_eq!(got, want, "{cut:?}");
                answers.insert(want);
            }
        }
        // The cases tell rows apart: lanes, windows and revisions give different answers.
        assert!(answers.len() >= 6, "{answers:?}");
        assert!(answers.contains(&vec!["e_1".to_owned()]));
    }

    // The visibility rule on single rows (moved from record.rs: the rule lives here).
    #[test]
    fn a_null_clock_is_never_visible() {
        let r = row("0000000000-26-000001_1", "1", None);
        let far = Instant::parse("9999-12-31T23:59:59Z").unwrap();
        assert!(!Cut::at(far, VisibleBy::PublishedAt).sees(&r));
        assert!(
            !Cut::at(far, VisibleBy::AvailableAt).sees(&r),
            "available_at is never imputed"
        );
        assert!(Cut::at(far, VisibleBy::CommittedAt).sees(&r));
    }

    #[test]
    fn a_row_is_visible_exactly_at_its_clock_and_after() {
        let r = row("0000000000-26-000001_1", "1", Some("2026-01-09T15:00:00Z"));
        let at = Instant::parse("2026-01-09T15:00:00Z").unwrap();
        assert!(Cut::at(at, VisibleBy::PublishedAt).sees(&r));
        assert!(
            !Cut::at(
                Instant::from_micros(at.micros() - 1),
                VisibleBy::PublishedAt
            )
            .sees(&r)
        );
    }

    #[test]
    fn intraday_cut_excludes_day_resolution_rows_of_that_date() {
        let day: Day = "2022-10-03".parse().unwrap();
        let mut r = row("0001104659-22-105357_1700461", "1700461", None);
        r.published_at = Some(day.end_of_day());
        let noon = Instant::parse("2022-10-03T12:00:00Z").unwrap();
        assert!(!Cut::at(noon, VisibleBy::PublishedAt).sees(&r));
        assert!(Cut::at(day.end_of_day(), VisibleBy::PublishedAt).sees(&r));
    }
}
