//! `GET /v1/audit-log` and `GET /v1/audit-log/stats`: a Desk key reads its own receipts.

use asof_engine::Day;
use axum::extract::{Extension, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::http::envelope::Envelope;
use crate::http::params::{FromParam, Limit, NoQuery, Q, query};
use crate::http::response::{CacheKind, JsonEnvelope};
use crate::http::{AppState, Caller, Ctx, Reply, ok};
use crate::state::audit::{AuditStats, NEXT_CURSOR_HEADER, Receipt};
use asof_answer::Op;

query! {
    /// Query of `GET /v1/audit-log`.
    pub struct AuditLogParams {
        /// One UTC day of receipts; omitted means every day.
        #[param(inline)]
        pub day: Option<Day>,
        /// `next_cursor` (or `X-Service-Audit-Next-Cursor`) of the previous page.
        pub cursor: Option<String>,
        /// Page size.
        #[param(inline, required = false)]
        pub limit: Limit,
        /// `json` (an envelope) or `jsonl` (`application/x-ndjson`, one receipt per line).
        #[param(inline, required = false, default = "json")]
        pub format: Format,
    }
}

/// Audit cursors are bound to the key and day, not to a corpus version: the log is not corpus
/// data, so a corpus reload must not expire a walk through it.
const CURSOR_VERSION: &str = "audit-log";

/// `format` of `/v1/audit-log`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, utoipa::ToSchema)]
#[schema(rename_all = "lowercase")]
pub enum Format {
    Json,
    Jsonl,
}

impl FromParam for Format {
    fn from_param(name: &str, raw: Option<&str>) -> Result<Self, asof_answer::Error> {
        match raw {
            None | Some("json") => Ok(Format::Json),
            Some("jsonl") => Ok(Format::Jsonl),
            Some(other) => Err(asof_answer::Error::invalid(
                name,
                format!("{name} must be one of: json, jsonl; got {other:?}"),
            )),
        }
    }
}

/// `GET /v1/audit-log?day=&cursor=&limit=&format=`: the calling key's receipts, oldest first
/// by serving instant, keyset-paged on (ts, request_id) so a resumed cursor yields only
/// receipts after its position, whatever arrived meanwhile. Without `day`, every day.
#[utoipa::path(get, path = "/v1/audit-log", tag = "audit", operation_id = "audit_log",
    params(AuditLogParams), security(("bearer" = [])),
    responses((status = 200, description = "The calling key's receipts, oldest first. With `format=jsonl`: one receipt per line, the next-page token in `X-Service-Audit-Next-Cursor`.",
        content(
            (Envelope<Receipt> = "application/json"),
            (String = "application/x-ndjson"),
        ),
        headers(("X-Service-Audit-Next-Cursor" = String, description = "With `format=jsonl`: the next page's cursor; absent on the last page.")))))]
pub(crate) async fn audit_log(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    Extension(caller): Extension<Caller>,
    Q(p): Q<AuditLogParams>,
) -> Reply {
    let (day, format, limit) = (p.day, p.format, p.limit.0);
    let (from_ms, to_ms) = match day {
        Some(d) => (
            d.start().micros().div_euclid(1000),
            d.next().start().micros().div_euclid(1000),
        ),
        None => (i64::MIN / 4, i64::MAX / 4),
    };
    let paging = state.pager().bind(
        Op::AuditLog,
        &[
            ("key", caller.key.id.clone()),
            (
                "day",
                day.map_or_else(|| "all".to_owned(), |d| d.to_string()),
            ),
        ],
        CURSOR_VERSION,
    );
    let after: Option<(i64, String)> = paging.open(p.cursor.as_deref())?;
    let mut rows = state
        .store()
        .receipts(&caller.key.id, from_ms, to_ms, after, limit as i64 + 1)
        .await?;
    let next_cursor = if rows.len() > limit {
        rows.truncate(limit);
        paging.mint(
            rows.last()
                .map(|last| (last.ts_ms, last.request_id.clone())),
        )
    } else {
        None
    };
    let receipts: Vec<Receipt> = rows.into_iter().map(Receipt::from).collect();
    match format {
        Format::Json => Ok(ok(&ctx, receipts).next(next_cursor).into_response()),
        Format::Jsonl => Ok(jsonl(&receipts, next_cursor)),
    }
}

/// One receipt per line; the next-page token travels in `X-Service-Audit-Next-Cursor`.
fn jsonl(receipts: &[Receipt], next_cursor: Option<String>) -> Response {
    let mut body = Vec::new();
    for r in receipts {
        serde_json::to_writer(&mut body, r).expect("receipt serializes");
        body.push(b'\n');
    }
    let mut res = (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-ndjson"),
        )],
        body,
    )
        .into_response();
    // Not an envelope, but the same answer in lines: it gets the headers of one (corpus
    // version, private no-cache, a body-derived ETag and 304).
    res.extensions_mut().insert(JsonEnvelope(CacheKind::Live));
    if let Some(c) = next_cursor {
        res.headers_mut().insert(
            NEXT_CURSOR_HEADER,
            HeaderValue::from_str(&c).expect("cursor is base64url"),
        );
    }
    res
}

/// `results[0]` of `/v1/audit-log/stats`: the process counters plus the caller's stored total.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct StatsRecord {
    #[serde(flatten)]
    process: AuditStats,
    /// Receipts of the calling key held in the state store (all replicas, all time).
    stored_for_key: i64,
}

#[utoipa::path(get, path = "/v1/audit-log/stats", tag = "audit", operation_id = "audit_stats",
    security(("bearer" = [])),
    responses((status = 200, description = "`results[0]`: the process's receipt counters and the caller's stored total.", body = Envelope<StatsRecord>)))]
pub(crate) async fn audit_stats(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    Extension(caller): Extension<Caller>,
    Q(_): Q<NoQuery>,
) -> Reply {
    let rec = StatsRecord {
        process: state.audit().stats(),
        stored_for_key: state.store().receipt_count(&caller.key.id).await?,
    };
    Ok(ok(&ctx, vec![rec]).into_response())
}
