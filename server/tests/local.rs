//! The in-process API (`asof_answer::local`, what `asof.open()` in Python calls) answers what
//! the HTTP routes answer for the same corpus: the same envelopes but for the request id and
//! the cursors (each signed with its own key), the same refusals, the same pages when walked.

mod common;

use asof_answer::local::{LocalApi, ROUTES};
use axum::http::StatusCode;
use common::{get, sample_corpus, setup};
use serde_json::Value;

/// An envelope without what differs by design: its request id, the cursor's bytes (only
/// whether there is a next page is compared), and in a meta record what a deployment adds (its
/// plans, public allowance and retention policy; in-process, none apply).
fn comparable(mut v: Value) -> Value {
    if let Some(meta) = v.pointer_mut("/results/0/plans") {
        *meta = Value::Null;
        v["results"][0]["limits"]["public_requests_per_minute_per_address"] = Value::Null;
        v["results"][0]["retention"] = Value::Null;
    }
    let o = v.as_object_mut().unwrap();
    o.remove("request_id");
    if let Some(c) = o.get_mut("next_cursor") {
        *c = Value::Bool(!c.is_null());
    }
    v
}

fn split(uri: &str) -> (&str, Option<&str>) {
    match uri.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (uri, None),
    }
}

#[tokio::test]
async fn every_data_route_answers_in_process_what_it_answers_over_http() {
    let t = setup().await;
    let local = LocalApi::new(sample_corpus().await);
    assert_eq!(local.version(), t.state.corpus().version());
    let uris = [
        "/v1/news?ticker=TSLA&as_of=2026-01-29T12:00:00Z",
        "/v1/news?cik=0001318605&as_of=2026-01-29T12:00:00Z&limit=3",
        "/v1/news?as_of=2026-01-29T12:00:00Z&limit=5",
        "/v1/news?ticker=TSLA&as_of=2026-01-29T12:00:00Z&visible_by=committed_at",
        "/v1/news?source=us.ofac.sdn&as_of=2026-03-01T00:00:00Z&limit=4",
        "/v1/news/diff?ticker=TSLA&as_of_start=2026-01-01T00:00:00Z&as_of_end=2026-01-29T12:00:00Z",
        "/v1/news/0001628280-26-003952_1318605?as_of=2026-03-01T00:00:00Z",
        "/v1/news/0001628280-26-003952_1318605?as_of=2000-01-01T00:00:00Z",
        "/v1/news/no-such-id?as_of=2026-03-01T00:00:00Z",
        "/v1/coverage?source=sec.edgar&limit=3",
        "/v1/coverage?source=sec.edgar&date=1999-01-04",
        "/v1/mapping/ticker/TSLA?as_of=2026-01-29T12:00:00Z",
        "/v1/mapping/ticker/NOSUCHTICKER?as_of=2026-01-29T12:00:00Z",
        "/v1/mapping/cik/1318605?as_of=2026-01-29T12:00:00Z",
        "/v1/meta",
        // Refusals: the same codes, messages and params.
        "/v1/news?ticker=TSLA&as_of=2026-01-29",
        "/v1/news?ticker=TSLA&as_of=2026-01-29T12:00:00%2B01:00",
        "/v1/news?ticker=TSLA",
        "/v1/news?ticker=TSLA&cik=1318605&as_of=2026-01-29T12:00:00Z",
        "/v1/news?ticker=TSLA&as_of=2026-01-29T12:00:00Z&limit=0",
        "/v1/news?ticker=TSLA&as_of=2026-01-29T12:00:00Z&colour=blue",
        "/v1/news?ticker=TSLA&as_of=2026-01-29T12:00:00Z&cursor=forged",
        "/v1/news?ticker=TSLA&as_of=2099-01-01T00:00:00Z",
        "/v1/meta?x=1",
    ];
    for uri in uris {
        let http = get(&t, uri).await;
        let (path, query) = split(uri);
        let answer = local.get(path, query).await;
        assert_eq!(answer.status, http.status.as_u16(), "{uri}");
        let body: Value = serde_json::from_slice(&answer.body).unwrap();
        assert_eq!(comparable(body), comparable(http.json.clone()), "{uri}");
    }
}

#[tokio::test]
async fn a_walk_of_small_pages_in_process_gives_the_ids_of_one_large_page() {
    let local = LocalApi::new(sample_corpus().await);
    let query = "as_of=2026-01-29T12:00:00Z";
    let whole = local
        .get("/v1/news", Some(&format!("{query}&limit=60")))
        .await;
    let whole: Value = serde_json::from_slice(&whole.body).unwrap();
    let want: Vec<Value> = whole["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].clone())
        .collect();
    assert_eq!(want.len(), 60);
    let mut got = Vec::new();
    let mut cursor: Option<String> = None;
    while got.len() < 60 {
        let q = match &cursor {
            Some(c) => format!("{query}&limit=7&cursor={c}"),
            None => format!("{query}&limit=7"),
        };
        let page = local.get("/v1/news", Some(&q)).await;
        assert_eq!(page.status, 200);
        let page: Value = serde_json::from_slice(&page.body).unwrap();
        got.extend(
            page["results"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["id"].clone()),
        );
        cursor = page["next_cursor"].as_str().map(str::to_owned);
    }
    got.truncate(60);
    assert_eq!(got, want);
}

#[tokio::test]
async fn a_cursor_of_another_process_is_refused_and_an_unknown_path_is_404() {
    let a = LocalApi::new(sample_corpus().await);
    let b = LocalApi::new(sample_corpus().await);
    let query = "as_of=2026-01-29T12:00:00Z&limit=2";
    let page: Value = serde_json::from_slice(&a.get("/v1/news", Some(query)).await.body).unwrap();
    let cursor = page["next_cursor"].as_str().unwrap();
    let again = b
        .get("/v1/news", Some(&format!("{query}&cursor={cursor}")))
        .await;
    assert_eq!(again.status, StatusCode::BAD_REQUEST.as_u16());
    let again: Value = serde_json::from_slice(&again.body).unwrap();
    assert_eq!(again["error"]["param"], "cursor");
    for path in ["/v1/keys", "/v1/news/a/b", "news", "/v1/files"] {
        let r = a.get(path, None).await;
        assert_eq!(r.status, 404, "{path}");
        let v: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["error"]["code"], "not_found", "{path}");
        assert_eq!(v["count"], Value::Null);
    }
}

#[test]
fn the_in_process_routes_are_the_route_tables_in_process_entries_in_its_order() {
    let table: Vec<String> = asof_server::routes::TABLE
        .iter()
        .filter(|r| r.in_process)
        .map(|r| r.path())
        .collect();
    let local: Vec<&str> = ROUTES.iter().map(|r| r.path).collect();
    assert_eq!(table, local);
}

#[tokio::test]
async fn an_in_process_meta_record_lists_no_plans_and_no_public_allowance() {
    let local = LocalApi::new(sample_corpus().await);
    let meta = local.get("/v1/meta", None).await;
    assert_eq!(meta.status, 200);
    let meta: Value = serde_json::from_slice(&meta.body).unwrap();
    assert_eq!(meta["results"][0]["plans"], Value::Array(vec![]));
    assert_eq!(
        meta["results"][0]["limits"]["public_requests_per_minute_per_address"],
        0
    );
    assert_eq!(
        meta["results"][0]["retention"],
        Value::Null,
        "no serving policy"
    );
    assert_eq!(
        meta["results"][0]["corpus"]["corpus_version"],
        local.version()
    );
}

#[tokio::test]
async fn an_older_version_opens_by_its_corpus_version_and_an_unknown_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::copy_of_sample_corpus_into(dir.path()).await;
    let (version, _) = store.current().await.unwrap();
    let path = dir.path().to_str().unwrap();
    let pinned = LocalApi::open(path, Some(&version)).await.unwrap();
    assert_eq!(pinned.version(), version);
    let unknown = format!("sha256:{}", "0".repeat(64));
    assert!(LocalApi::open(path, Some(&unknown)).await.is_err());
}

#[tokio::test]
async fn an_arrow_page_holds_the_records_and_envelope_of_the_json_page() {
    use arrow::array::{Array, AsArray};
    let local = LocalApi::new(sample_corpus().await);
    for uri in [
        "/v1/news?ticker=TSLA&as_of=2026-01-29T12:00:00Z&limit=40",
        "/v1/news?as_of=2026-01-29T12:00:00Z&limit=7",
        "/v1/news?source=us.ofac.sdn&as_of=2019-01-04T23:59:59Z&limit=9",
        "/v1/news/diff?ticker=TSLA&as_of_start=2026-01-01T00:00:00Z&as_of_end=2026-01-29T12:00:00Z",
        "/v1/news?cik=1&as_of=2026-01-29T12:00:00Z",
    ] {
        let (path, query) = split(uri);
        let json = local.get(path, query).await;
        let arrow = local.get_batch(path, query).await;
        assert_eq!((arrow.status, json.status), (200, 200), "{uri}");
        let json: Value = serde_json::from_slice(&json.body).unwrap();
        let mut head: Value = serde_json::from_slice(&arrow.head).unwrap();
        let batch = arrow.batch.expect("a 200 page has its batch");
        assert_eq!(head["results"], Value::Array(vec![]), "{uri}");
        assert_eq!(head["count"], json["count"], "{uri}");
        head["results"] = json["results"].clone();
        assert_eq!(comparable(head), comparable(json.clone()), "{uri}");
        let ids = batch.column_by_name("id").unwrap().as_string::<i32>();
        let want: Vec<&str> = json["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap())
            .collect();
        let got: Vec<&str> = (0..ids.len()).map(|i| ids.value(i)).collect();
        assert_eq!(got, want, "{uri}");
        let published = batch.column_by_name("published_at").unwrap();
        assert_eq!(published.null_count(), 0, "{uri}");
    }
}

#[tokio::test]
async fn an_arrow_page_refuses_and_reports_holes_as_the_json_page_does() {
    let local = LocalApi::new(sample_corpus().await);
    for uri in [
        "/v1/news?ticker=TSLA&as_of=2099-01-01T00:00:00Z",
        "/v1/news?ticker=TSLA&as_of=2026-01-29",
        "/v1/news?ticker=TSLA&as_of=2026-01-29T12:00:00Z&cursor=forged",
        "/v1/coverage?source=sec.edgar",
    ] {
        let (path, query) = split(uri);
        let json = local.get(path, query).await;
        let arrow = local.get_batch(path, query).await;
        assert!(arrow.batch.is_none(), "{uri}");
        let head: Value = serde_json::from_slice(&arrow.head).unwrap();
        if path == "/v1/coverage" {
            assert_eq!(
                (arrow.status, head["error"]["code"].as_str()),
                (404, Some("not_found"))
            );
            continue;
        }
        let json_body: Value = serde_json::from_slice(&json.body).unwrap();
        assert_eq!(arrow.status, json.status, "{uri}");
        assert_eq!(comparable(head), comparable(json_body), "{uri}");
    }
}
