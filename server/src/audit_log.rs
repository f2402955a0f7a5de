//! `GET /v1/audit-log` and `GET /v1/audit-log/stats`: a Desk key reads its own receipts.

use asof_engine::Coverage;
use axum::extract::{Extension, RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::app::{AppState, BodyEtag, CacheKind, Caller, Ctx, JsonEnvelope};
use crate::audit::{AuditStats, NEXT_CURSOR_HEADER, Receipt};
use crate::cursor::filter_digest;
use crate::envelope::Envelope;
use crate::error::ApiError;
use crate::params::Params;
use crate::routes::{Reply, ok};

const AUDIT_LOG_PARAMS: &[&str] = &["day", "cursor", "limit", "format"];

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

/// `GET /v1/audit-log?day=&cursor=&limit=&format=`: the calling key's receipts, oldest first
/// by serving instant, keyset-paged on (ts, request_id) so a resumed cursor yields only
/// receipts after its position, whatever arrived meanwhile. Without `day`, every day.
#[utoipa::path(get, path = "/v1/audit-log", tag = "audit", operation_id = "audit_log",
    params(crate::openapi::AuditLogParams), security(("bearer" = [])),
    responses((status = 200, description = "The calling key's receipts, oldest first. With `format=jsonl`: one receipt per line, the next-page token in `X-Service-Audit-Next-Cursor`.",
        content(
            (Envelope<Receipt> = "application/json"),
            (String = "application/x-ndjson"),
        ),
        headers(("X-Service-Audit-Next-Cursor" = String, description = "With `format=jsonl`: the next page's cursor; absent on the last page.")))))]
pub async fn audit_log(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    Extension(caller): Extension<Caller>,
    RawQuery(q): RawQuery,
) -> Reply {
    let p = Params::parse(q.as_deref(), AUDIT_LOG_PARAMS)?;
    let day = p.day("day")?;
    let format = match p.get("format") {
        None | Some("json") => Format::Json,
        Some("jsonl") => Format::Jsonl,
        Some(other) => {
            return Err(ApiError::invalid(
                "format",
                format!("format must be one of: json, jsonl; got {other:?}"),
            ));
        }
    };
    let limit = p.limit()?;
    let (from_ms, to_ms) = match day {
        Some(d) => (
            d.start().micros().div_euclid(1000),
            d.next().start().micros().div_euclid(1000),
        ),
        None => (i64::MIN / 4, i64::MAX / 4),
    };
    let filters = filter_digest(&[
        ("key", caller.key.id.clone()),
        (
            "day",
            day.map_or_else(|| "all".to_owned(), |d| d.to_string()),
        ),
    ]);
    let after: Option<(i64, String)> = p
        .get("cursor")
        .map(|c| {
            state
                .signer()
                .open(c, "audit-log", &filters, CURSOR_VERSION)
        })
        .transpose()?;
    let mut rows = state
        .store()
        .receipts(&caller.key.id, from_ms, to_ms, after, limit as i64 + 1)
        .await?;
    let next_cursor = if rows.len() > limit {
        rows.truncate(limit);
        rows.last().map(|last| {
            state.signer().mint(
                "audit-log",
                &filters,
                CURSOR_VERSION,
                &(last.ts_ms, last.request_id.clone()),
            )
        })
    } else {
        None
    };
    let receipts: Vec<Receipt> = rows.into_iter().map(Receipt::from).collect();
    match format {
        Format::Json => {
            let mut r = ok(
                &ctx,
                receipts,
                None,
                None,
                Coverage::default(),
                next_cursor,
                false,
                CacheKind::Live,
            );
            r.extensions_mut().insert(BodyEtag);
            Ok(r)
        }
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
    res.extensions_mut().insert(JsonEnvelope);
    res.extensions_mut().insert(BodyEtag);
    res.extensions_mut().insert(CacheKind::Live);
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
struct StatsRecord {
    #[serde(flatten)]
    process: AuditStats,
    /// Receipts of the calling key held in the state store (all replicas, all time).
    stored_for_key: i64,
}

#[utoipa::path(get, path = "/v1/audit-log/stats", tag = "audit", operation_id = "audit_stats",
    security(("bearer" = [])),
    responses((status = 200, description = "`results[0]`: the process's receipt counters and the caller's stored total.", body = Envelope<StatsRecord>)))]
pub async fn audit_stats(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    Extension(caller): Extension<Caller>,
    RawQuery(q): RawQuery,
) -> Reply {
    Params::parse(q.as_deref(), &[])?;
    let rec = StatsRecord {
        process: state.audit().stats(),
        stored_for_key: state.store().receipt_count(&caller.key.id).await?,
    };
    let mut r = ok(
        &ctx,
        vec![rec],
        None,
        None,
        Coverage::default(),
        None,
        false,
        CacheKind::Live,
    );
    r.extensions_mut().insert(BodyEtag);
    Ok(r)
}
