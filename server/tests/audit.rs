//! Decision audit receipts over `app(state)`: what is receipted (exact bytes, request id), what
//! is not and how each case is counted, the bounded queue under a burst, and `/v1/audit-log`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use asof_engine::Instant;
use asof_server::Options;
use asof_server::plan::Plan;
use asof_server::state::audit::AuditStats;
use axum::http::{Method, StatusCode, header};
use common::{Gated, Res, T, assert_error, key_for, send, setup, setup_with, sqlite_store};
use serde_json::Value;
use sha2::{Digest, Sha256};

const TSLA: &str = "/v1/news?ticker=TSLA&as_of=2026-01-29T12:00:00Z";
const AUDIT_ON: (&str, &str) = ("X-Service-Audit", "on");

async fn desk_key(t: &T) -> String {
    key_for(&t.store, "desk@example.com", Plan::Desk).await
}

async fn audited(t: &T, uri: &str, key: &str) -> Res {
    send(t, Method::GET, uri, Some(key), &[AUDIT_ON]).await
}

/// Waits for the writer, then reads the whole log of `key` (one page of up to 1000).
async fn log_of(t: &T, key: &str) -> Vec<Value> {
    assert!(t.state.audit().drain(Duration::from_secs(10)).await);
    let r = send(t, Method::GET, "/v1/audit-log?limit=1000", Some(key), &[]).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    r.json["results"].as_array().unwrap().clone()
}

fn stats(t: &T) -> AuditStats {
    t.state.audit().stats()
}

fn sha256_hex(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

/// Every request that asked for a receipt is accounted for exactly once.
fn assert_accounted(s: &AuditStats) {
    assert_eq!(
        s.requested,
        s.enqueued + s.dropped + s.out_of_scope + s.unattributed + s.plan_required + s.skipped,
        "{s:?}"
    );
    assert_eq!(s.lost, s.dropped + s.failed, "{s:?}");
}

#[tokio::test]
async fn an_audited_response_has_a_receipt_hashing_the_exact_bytes_sent() {
    let t = setup().await;
    let desk = desk_key(&t).await;
    let r = audited(&t, TSLA, &desk).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.headers["x-service-audit-dropped"], "0");
    assert_eq!(
        *r.bytes.last().unwrap(),
        b'\n',
        "the envelope ends in a newline"
    );

    let log = log_of(&t, &desk).await;
    assert_eq!(log.len(), 1);
    let rc = &log[0];
    assert_eq!(
        rc.as_object().unwrap().len(),
        7,
        "exactly the seven fields: {rc}"
    );
    assert_eq!(rc["envelope_sha256"], sha256_hex(&r.bytes));
    assert_eq!(
        rc["request_id"],
        r.headers["x-request-id"].to_str().unwrap()
    );
    assert_eq!(
        rc["corpus_version"],
        r.headers["x-corpus-version"].to_str().unwrap()
    );
    assert_eq!(rc["route"], "GET /v1/news");
    assert_eq!(
        rc["params_digest"],
        sha256_hex(b"as_of=2026-01-29T12%3A00%3A00Z&ticker=TSLA")
    );
    let ts = rc["ts"].as_str().unwrap();
    assert_eq!((ts.len(), &ts[19..20], &ts[23..]), (24, ".", "Z"), "{ts}");
    assert!(Instant::parse_rfc3339_any(ts).is_some());
    // The key id is the one GET /v1/keys lists for the caller.
    let keys = send(&t, Method::GET, "/v1/keys", Some(&desk), &[]).await;
    let ids: Vec<&str> = keys.json["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&rc["key_id"].as_str().unwrap()), "{ids:?}");
    assert!(
        !String::from_utf8_lossy(&keys.bytes).contains(&desk),
        "the key list never shows the secret"
    );
    let s = stats(&t);
    assert_eq!((s.requested, s.enqueued, s.written), (1, 1, 1));
    assert_accounted(&s);
}

#[tokio::test]
async fn error_envelopes_are_receipted_too() {
    let t = setup().await;
    let desk = desk_key(&t).await;
    let r = audited(&t, "/v1/news?as_of=2026-01-29", &desk).await;
    assert_error(&r, StatusCode::BAD_REQUEST, "invalid_clock", Some("as_of"));
    let log = log_of(&t, &desk).await;
    assert_eq!(log.len(), 1);
    assert_eq!(log[0]["envelope_sha256"], sha256_hex(&r.bytes));
}

async fn gated(capacity: usize, permits: usize, fail: bool) -> (T, Arc<Gated>) {
    let dir = tempfile::tempdir().unwrap();
    let g = Arc::new(Gated::new(sqlite_store(dir.path()).await, permits, fail));
    let opts = Options {
        audit_queue_capacity: capacity,
        ..Options::default()
    };
    (setup_with(dir, g.clone(), opts).await, g)
}

#[tokio::test]
async fn a_full_queue_drops_receipts_and_counts_exactly_those_that_never_arrive() {
    // Two slots and a writer that cannot write until released: the burst overflows.
    let (t, g) = gated(2, 0, false).await;
    let desk = desk_key(&t).await;
    let mut last = None;
    for i in 0..12 {
        let r = audited(&t, &format!("{TSLA}&limit={}", i + 1), &desk).await;
        assert_eq!(
            r.status,
            StatusCode::OK,
            "the response never waits for the queue"
        );
        last = Some(r);
    }
    let during = stats(&t);
    assert!(during.dropped > 0, "{during:?}");
    assert_eq!(
        last.unwrap().headers["x-service-audit-dropped"],
        during.dropped.to_string().as_str()
    );
    g.permits.add_permits(1000);
    let log = log_of(&t, &desk).await;
    let s = stats(&t);
    assert_eq!(s.dropped as usize, 12 - log.len(), "{s:?}");
    assert_eq!(s.written as usize, log.len());
    assert_eq!((s.failed, s.lost, s.queued), (0, s.dropped, 0));
    assert_accounted(&s);
}

#[tokio::test]
async fn failed_receipt_writes_are_counted_and_lost_is_dropped_plus_failed() {
    let (t, _g) = gated(1200, 1000, true).await;
    let desk = desk_key(&t).await;
    for _ in 0..3 {
        assert_eq!(audited(&t, TSLA, &desk).await.status, StatusCode::OK);
    }
    assert!(log_of(&t, &desk).await.is_empty());
    let s = stats(&t);
    assert_eq!((s.failed, s.written, s.dropped, s.lost), (3, 0, 0, 3));
    assert_accounted(&s);
}

#[tokio::test]
async fn requests_without_the_header_or_with_an_off_value_are_not_receipted_or_counted() {
    let t = setup().await;
    let desk = desk_key(&t).await;
    let plain = send(&t, Method::GET, TSLA, Some(&desk), &[]).await;
    let off = send(
        &t,
        Method::GET,
        TSLA,
        Some(&desk),
        &[("x-service-audit", "off")],
    )
    .await;
    for r in [&plain, &off] {
        assert_eq!(r.status, StatusCode::OK);
        assert!(!r.headers.contains_key("x-service-audit-dropped"));
    }
    assert!(log_of(&t, &desk).await.is_empty());
    assert_eq!(stats(&t).requested, 0);
}

#[tokio::test]
async fn the_header_name_and_value_are_case_insensitive() {
    let t = setup().await;
    let desk = desk_key(&t).await;
    let r = send(
        &t,
        Method::GET,
        TSLA,
        Some(&desk),
        &[("X-SERVICE-AUDIT", "Yes")],
    )
    .await;
    assert!(r.headers.contains_key("x-service-audit-dropped"));
    assert_eq!(log_of(&t, &desk).await.len(), 1);
}

#[tokio::test]
async fn paths_outside_v1_and_audit_log_reads_count_as_out_of_scope() {
    let t = setup().await;
    let desk = desk_key(&t).await;
    assert_eq!(audited(&t, "/health", &desk).await.status, StatusCode::OK);
    assert_eq!(
        audited(&t, "/v1/audit-log", &desk).await.status,
        StatusCode::OK
    );
    assert_eq!(
        audited(&t, "/v1/audit-log/stats", &desk).await.status,
        StatusCode::OK
    );
    assert!(log_of(&t, &desk).await.is_empty());
    let s = stats(&t);
    assert_eq!((s.requested, s.out_of_scope, s.enqueued), (3, 3, 0));
    assert_accounted(&s);
}

#[tokio::test]
async fn keys_below_the_desk_plan_count_as_plan_required() {
    let t = setup().await;
    let power = key_for(&t.store, "power@example.com", Plan::Power).await;
    for key in [&t.key, &power] {
        let r = audited(&t, TSLA, key).await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.headers["x-service-audit-dropped"], "0");
        let me = send(&t, Method::GET, "/v1/me", Some(key), &[]).await;
        let key_id = me.json["results"][0]["key_id"].as_str().unwrap().to_owned();
        assert!(t.state.audit().drain(Duration::from_secs(10)).await);
        assert_eq!(t.store.receipt_count(&key_id).await.unwrap(), 0);
    }
    let s = stats(&t);
    assert_eq!((s.plan_required, s.enqueued), (2, 0));
    assert_accounted(&s);
}

#[tokio::test]
async fn rejected_keys_and_callers_without_a_key_count_as_unattributed() {
    let t = setup().await;
    let bogus = "svc_live_0000000000000000000000000000000000000000000000000000000000000000";
    let r = audited(&t, TSLA, bogus).await;
    assert_error(&r, StatusCode::UNAUTHORIZED, "unauthorized", None);
    assert_eq!(r.headers["x-service-audit-dropped"], "0");
    let anon = send(&t, Method::GET, "/v1/meta", None, &[AUDIT_ON]).await;
    assert_eq!(anon.status, StatusCode::OK);
    assert!(t.state.audit().drain(Duration::from_secs(10)).await);
    let s = stats(&t);
    assert_eq!((s.unattributed, s.enqueued, s.written), (2, 0, 0));
    assert_accounted(&s);
}

#[tokio::test]
async fn a_desk_key_on_a_public_route_is_attributed_and_receipted() {
    let t = setup().await;
    let desk = desk_key(&t).await;
    let r = audited(&t, "/v1/meta", &desk).await;
    let log = log_of(&t, &desk).await;
    assert_eq!(log.len(), 1);
    assert_eq!(log[0]["route"], "GET /v1/meta");
    assert_eq!(log[0]["envelope_sha256"], sha256_hex(&r.bytes));
}

#[tokio::test]
async fn not_modified_and_head_replies_count_as_skipped() {
    let t = setup().await;
    let desk = desk_key(&t).await;
    let first = audited(&t, TSLA, &desk).await;
    let etag = first.headers[header::ETAG].to_str().unwrap().to_owned();
    let r304 = send(
        &t,
        Method::GET,
        TSLA,
        Some(&desk),
        &[AUDIT_ON, ("if-none-match", &etag)],
    )
    .await;
    assert_eq!(r304.status, StatusCode::NOT_MODIFIED);
    assert!(r304.headers.contains_key("x-service-audit-dropped"));
    let head = send(&t, Method::HEAD, TSLA, Some(&desk), &[AUDIT_ON]).await;
    assert_eq!(head.status, StatusCode::OK);
    let log = log_of(&t, &desk).await;
    assert_eq!(log.len(), 1, "only the first, full reply");
    assert_eq!(
        log[0]["request_id"],
        first.headers["x-request-id"].to_str().unwrap()
    );
    let s = stats(&t);
    assert_eq!((s.skipped, s.enqueued), (2, 1));
    assert_accounted(&s);
}

#[tokio::test]
async fn the_audit_log_needs_a_desk_key_and_other_plans_get_403() {
    let t = setup().await;
    let power = key_for(&t.store, "power@example.com", Plan::Power).await;
    for key in [&t.key, &power] {
        for path in ["/v1/audit-log", "/v1/audit-log/stats"] {
            assert_error(
                &send(&t, Method::GET, path, Some(key), &[]).await,
                StatusCode::FORBIDDEN,
                "forbidden",
                None,
            );
        }
    }
    assert_error(
        &send(&t, Method::GET, "/v1/audit-log", None, &[]).await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        None,
    );
    let desk = desk_key(&t).await;
    let ok = send(&t, Method::GET, "/v1/audit-log", Some(&desk), &[]).await;
    assert_eq!(
        (ok.status, ok.json["count"].clone()),
        (StatusCode::OK, 0.into())
    );
}

fn request_ids(rows: &[Value]) -> Vec<String> {
    rows.iter()
        .map(|r| r["request_id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_resumed_cursor_yields_only_newer_receipts_oldest_first() {
    let t = setup().await;
    let desk = desk_key(&t).await;
    let mut sent = Vec::new();
    for i in 0..5 {
        let r = audited(&t, &format!("{TSLA}&limit={}", i + 1), &desk).await;
        sent.push(r.headers["x-request-id"].to_str().unwrap().to_owned());
    }
    assert!(t.state.audit().drain(Duration::from_secs(10)).await);
    let first = send(&t, Method::GET, "/v1/audit-log?limit=2", Some(&desk), &[]).await;
    let mut walked = first.json["results"].as_array().unwrap().clone();
    let mut cursor = first.json["next_cursor"].as_str().unwrap().to_owned();
    // New receipts arrive while the walk is open.
    for i in 0..3 {
        let r = audited(&t, &format!("{TSLA}&limit={}", i + 10), &desk).await;
        sent.push(r.headers["x-request-id"].to_str().unwrap().to_owned());
    }
    assert!(t.state.audit().drain(Duration::from_secs(10)).await);
    loop {
        let r = send(
            &t,
            Method::GET,
            &format!("/v1/audit-log?limit=2&cursor={cursor}"),
            Some(&desk),
            &[],
        )
        .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.json);
        walked.extend(r.json["results"].as_array().unwrap().iter().cloned());
        match r.json["next_cursor"].as_str() {
            Some(c) => cursor = c.to_owned(),
            None => break,
        }
    }
    assert_eq!(
        request_ids(&walked),
        sent,
        "every receipt once, in serving order"
    );
    let ts: Vec<&str> = walked.iter().map(|r| r["ts"].as_str().unwrap()).collect();
    assert!(ts.windows(2).all(|w| w[0] <= w[1]));
}

#[tokio::test]
async fn jsonl_gives_one_receipt_per_line_and_the_next_cursor_in_a_header() {
    let t = setup().await;
    let desk = desk_key(&t).await;
    for i in 0..3 {
        audited(&t, &format!("{TSLA}&limit={}", i + 1), &desk).await;
    }
    let all = log_of(&t, &desk).await;
    let p1 = send(
        &t,
        Method::GET,
        "/v1/audit-log?format=jsonl&limit=2",
        Some(&desk),
        &[],
    )
    .await;
    assert_eq!(p1.status, StatusCode::OK);
    assert_eq!(p1.headers[header::CONTENT_TYPE], "application/x-ndjson");
    assert!(p1.headers.contains_key(header::ETAG));
    assert!(p1.headers.contains_key("x-corpus-version"));
    assert_eq!(
        p1.headers[header::CACHE_CONTROL],
        "private, max-age=0, must-revalidate"
    );
    let text = String::from_utf8(p1.bytes.clone()).unwrap();
    assert!(text.ends_with('\n'));
    let mut lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    let next = p1.headers["x-service-audit-next-cursor"].to_str().unwrap();
    let p2 = send(
        &t,
        Method::GET,
        &format!("/v1/audit-log?format=jsonl&limit=2&cursor={next}"),
        Some(&desk),
        &[],
    )
    .await;
    assert!(!p2.headers.contains_key("x-service-audit-next-cursor"));
    lines.extend(
        String::from_utf8(p2.bytes)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap()),
    );
    assert_eq!(lines, all, "the JSONL walk equals the JSON results");
}

#[tokio::test]
async fn day_selects_one_utc_day_and_bad_day_or_format_is_invalid_request() {
    let t = setup().await;
    let desk = desk_key(&t).await;
    audited(&t, TSLA, &desk).await;
    assert_eq!(log_of(&t, &desk).await.len(), 1);
    let today = &time::OffsetDateTime::now_utc().date().to_string();
    let get = |q: String| {
        let (t, desk) = (&t, &desk);
        async move {
            send(
                t,
                Method::GET,
                &format!("/v1/audit-log?{q}"),
                Some(desk),
                &[],
            )
            .await
        }
    };
    assert_eq!(get(format!("day={today}")).await.json["count"], 1);
    let empty = get("day=2001-01-01".into()).await;
    assert_eq!(
        (empty.status, empty.json["count"].clone()),
        (StatusCode::OK, 0.into())
    );
    for (q, param) in [
        ("day=2026-13-01", "day"),
        ("day=2026-01-01T00:00:00Z", "day"),
        ("format=xml", "format"),
        ("limit=0", "limit"),
        ("since=x", "since"),
    ] {
        assert_error(
            &get(q.into()).await,
            StatusCode::BAD_REQUEST,
            "invalid_request",
            Some(param),
        );
    }
    // A cursor is bound to its day.
    audited(&t, TSLA, &desk).await;
    assert!(t.state.audit().drain(Duration::from_secs(10)).await);
    let p = get(format!("day={today}&limit=1")).await;
    let c = p.json["next_cursor"].as_str().unwrap();
    assert_error(
        &get(format!("limit=1&cursor={c}")).await,
        StatusCode::BAD_REQUEST,
        "invalid_request",
        Some("cursor"),
    );
}

#[tokio::test]
async fn receipts_are_scoped_to_the_calling_key() {
    let t = setup().await;
    let a = desk_key(&t).await;
    let b = key_for(&t.store, "other-desk@example.com", Plan::Desk).await;
    audited(&t, TSLA, &a).await;
    audited(&t, TSLA, &a).await;
    assert_eq!(log_of(&t, &a).await.len(), 2);
    assert!(log_of(&t, &b).await.is_empty());
    let p = send(&t, Method::GET, "/v1/audit-log?limit=1", Some(&a), &[]).await;
    let c = p.json["next_cursor"].as_str().unwrap();
    assert_error(
        &send(
            &t,
            Method::GET,
            &format!("/v1/audit-log?limit=1&cursor={c}"),
            Some(&b),
            &[],
        )
        .await,
        StatusCode::BAD_REQUEST,
        "invalid_request",
        Some("cursor"),
    );
}

#[tokio::test]
async fn the_stats_route_reports_every_counter() {
    let t = setup().await;
    let desk = desk_key(&t).await;
    audited(&t, TSLA, &desk).await;
    audited(&t, TSLA, &t.key).await;
    assert!(t.state.audit().drain(Duration::from_secs(10)).await);
    let r = send(&t, Method::GET, "/v1/audit-log/stats", Some(&desk), &[]).await;
    assert_eq!(r.status, StatusCode::OK);
    let s = &r.json["results"][0];
    for (k, v) in [
        ("requested", 2),
        ("enqueued", 1),
        ("written", 1),
        ("dropped", 0),
        ("failed", 0),
        ("lost", 0),
        ("queued", 0),
        ("plan_required", 1),
        ("unattributed", 0),
        ("skipped", 0),
        ("out_of_scope", 0),
        ("queue_capacity", 1200),
        ("stored_for_key", 1),
    ] {
        assert_eq!(s[k], v, "{k}: {s}");
    }
    assert_eq!(s["scope"], "process");
}
