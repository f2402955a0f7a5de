//! Flat files over the router (oneshot): `/v1/files` paging and cursors, plan gate, ids, and
//! the service-signed `/files/{id}` URLs (signatures, expiry, byte ranges, HEAD), on the
//! shipped sample corpus (a local directory, so the service signs its own URLs).

mod common;

use asof_server::plan::Plan;
use axum::http::{Method, StatusCode, header};
use common::{T, assert_error, key_for, local, power_key, send, setup, sqlite_store};
use serde_json::Value;
use sha2::{Digest, Sha256};

async fn listing(t: &T, key: &str, query: &str) -> Value {
    let r = send(t, Method::GET, &format!("/v1/files{query}"), Some(key), &[]).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    r.json
}

async fn first_file(t: &T, key: &str) -> Value {
    listing(t, key, "?limit=1").await["results"][0].clone()
}

#[tokio::test]
async fn a_file_object_names_a_partition_of_the_served_version_with_a_signed_url() {
    let t = setup().await;
    let key = power_key(&t).await;
    let all = listing(&t, &key, "?limit=1000").await;
    let m = t.state.corpus().manifest().clone();
    assert_eq!(all["count"], m.partitions.len());
    let f = &all["results"][0];
    let p = m
        .partitions
        .iter()
        .find(|p| p.sha256 == f["id"].as_str().unwrap())
        .unwrap();
    assert_eq!(f["sha256"], p.sha256.as_str());
    assert_eq!(f["bytes"], p.bytes);
    assert_eq!(f["row_count"], p.row_count);
    assert_eq!(f["date"], p.date.to_string());
    assert_eq!(f["format"], "parquet");
    assert_eq!(f["kind"], "partition");
    assert_eq!(f["corpus_version"], t.state.corpus().version());
    assert_eq!(f["url_kind"], "service");
    assert_eq!(f["certified"], f["certified_row_count"].is_number());
    let url = f["url"].as_str().unwrap();
    assert!(url.starts_with("http://localhost/files/"), "{url}");
    assert!(
        !url.contains("svc_live_"),
        "a file URL never carries the API key"
    );
    // /v1/files/{id} answers the same file with a fresh URL.
    let one = send(
        &t,
        Method::GET,
        &format!("/v1/files/{}", f["id"].as_str().unwrap()),
        Some(&key),
        &[],
    )
    .await;
    assert_eq!(one.status, StatusCode::OK);
    assert_eq!(one.json["count"], 1);
    assert_eq!(one.json["results"][0]["sha256"], f["sha256"]);
}

#[tokio::test]
async fn pages_of_files_walk_to_the_same_files_as_one_large_page() {
    let t = setup().await;
    let key = power_key(&t).await;
    let ids = |v: &Value| -> Vec<String> {
        v["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let all = ids(&listing(&t, &key, "?limit=1000").await);
    assert!(all.len() > 3, "the sample holds several partitions");
    let mut walked = Vec::new();
    let mut q = "?limit=2".to_owned();
    loop {
        let page = listing(&t, &key, &q).await;
        walked.extend(ids(&page));
        match page["next_cursor"].as_str() {
            Some(c) => q = format!("?limit=3&cursor={c}"),
            None => break,
        }
    }
    assert_eq!(walked, all);
    // Ordered by (date, source_id, lane, id).
    let page = listing(&t, &key, "?limit=1000").await;
    let keys: Vec<(String, String, String, String)> = page["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let s = |k: &str| f[k].as_str().unwrap().to_owned();
            (s("date"), s("source_id"), s("lane"), s("id"))
        })
        .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
}

#[tokio::test]
async fn a_source_and_a_day_range_select_files_and_bad_ones_are_refused_a_backwards_range_is_empty()
{
    let t = setup().await;
    let key = power_key(&t).await;
    let page = listing(
        &t,
        &key,
        "?source=sec.edgar&from=2026-01-05&to=2026-01-06&limit=1000",
    )
    .await;
    for f in page["results"].as_array().unwrap() {
        assert_eq!(f["source_id"], "sec.edgar");
        let d = f["date"].as_str().unwrap();
        assert!(("2026-01-05"..="2026-01-06").contains(&d), "{d}");
    }
    let r = send(&t, Method::GET, "/v1/files?source=nope", Some(&key), &[]).await;
    assert_error(
        &r,
        StatusCode::BAD_REQUEST,
        "invalid_request",
        Some("source"),
    );
    let r = send(
        &t,
        Method::GET,
        "/v1/files?from=2026-02-01&to=2026-01-01",
        Some(&key),
        &[],
    )
    .await;
    // `from` after `to` is an empty range (the description cannot relate two parameters).
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    assert_eq!(r.json["count"], 0);
    let r = send(&t, Method::GET, "/v1/files?limit=0", Some(&key), &[]).await;
    assert_error(
        &r,
        StatusCode::BAD_REQUEST,
        "invalid_request",
        Some("limit"),
    );
}

#[tokio::test]
async fn a_files_cursor_is_refused_on_news_and_a_news_cursor_on_files() {
    let t = setup().await;
    let key = power_key(&t).await;
    let files_cursor = listing(&t, &key, "?limit=1").await["next_cursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let news = send(
        &t,
        Method::GET,
        "/v1/news?cik=789019&as_of=2026-02-05T00:00:00Z&limit=1",
        Some(&key),
        &[],
    )
    .await;
    let news_cursor = news.json["next_cursor"].as_str().unwrap().to_owned();
    let r = send(
        &t,
        Method::GET,
        &format!("/v1/news?cik=789019&as_of=2026-02-05T00:00:00Z&cursor={files_cursor}"),
        Some(&key),
        &[],
    )
    .await;
    assert_error(
        &r,
        StatusCode::BAD_REQUEST,
        "invalid_request",
        Some("cursor"),
    );
    let r = send(
        &t,
        Method::GET,
        &format!("/v1/files?cursor={news_cursor}"),
        Some(&key),
        &[],
    )
    .await;
    assert_error(
        &r,
        StatusCode::BAD_REQUEST,
        "invalid_request",
        Some("cursor"),
    );
    // Bound to the filter set too: the same cursor with another source is refused.
    let r = send(
        &t,
        Method::GET,
        &format!("/v1/files?source=sec.edgar&cursor={files_cursor}"),
        Some(&key),
        &[],
    )
    .await;
    assert_error(
        &r,
        StatusCode::BAD_REQUEST,
        "invalid_request",
        Some("cursor"),
    );
}

#[tokio::test]
async fn a_files_cursor_after_a_reload_is_cursor_expired() {
    let t = setup().await;
    let key = power_key(&t).await;
    let c = listing(&t, &key, "?limit=1").await["next_cursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_copy, _) = common::reload_to_a_new_version(&t).await;
    let r = send(
        &t,
        Method::GET,
        &format!("/v1/files?cursor={c}"),
        Some(&key),
        &[],
    )
    .await;
    assert_error(&r, StatusCode::CONFLICT, "cursor_expired", Some("cursor"));
}

#[tokio::test]
async fn files_need_the_power_plan_and_a_researcher_gets_403() {
    let t = setup().await;
    let r = send(&t, Method::GET, "/v1/files", Some(&t.key.clone()), &[]).await;
    assert_error(&r, StatusCode::FORBIDDEN, "forbidden", None);
    let r = send(&t, Method::GET, "/v1/files", None, &[]).await;
    assert_error(&r, StatusCode::UNAUTHORIZED, "unauthorized", None);
    let desk = key_for(&t.store, "desk@example.com", Plan::Desk).await;
    let r = send(&t, Method::GET, "/v1/files?limit=1", Some(&desk), &[]).await;
    assert_eq!(r.status, StatusCode::OK);
    let id = r.json["results"][0]["id"].as_str().unwrap().to_owned();
    let r = send(
        &t,
        Method::GET,
        &format!("/v1/files/{id}"),
        Some(&t.key.clone()),
        &[],
    )
    .await;
    assert_error(&r, StatusCode::FORBIDDEN, "forbidden", None);
}

#[tokio::test]
async fn an_unknown_file_id_is_404_and_a_malformed_one_400() {
    let t = setup().await;
    let key = power_key(&t).await;
    let r = send(
        &t,
        Method::GET,
        &format!("/v1/files/{}", "0".repeat(64)),
        Some(&key),
        &[],
    )
    .await;
    assert_error(&r, StatusCode::NOT_FOUND, "not_found", None);
    let r = send(&t, Method::GET, "/v1/files/not-a-hash", Some(&key), &[]).await;
    assert_error(&r, StatusCode::BAD_REQUEST, "invalid_request", Some("id"));
    // A well-signed URL for a file the version does not hold is 404 too.
    let id = "0".repeat(64);
    let q = t.state.file_urls().query(&id, 4_000_000_000, None);
    let r = send(&t, Method::GET, &format!("/files/{id}?{q}"), None, &[]).await;
    assert_error(&r, StatusCode::NOT_FOUND, "not_found", None);
}

#[tokio::test]
async fn a_signed_url_serves_the_exact_bytes_without_a_key() {
    let t = setup().await;
    let key = power_key(&t).await;
    let f = first_file(&t, &key).await;
    let r = send(
        &t,
        Method::GET,
        &local(f["url"].as_str().unwrap()),
        None,
        &[],
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        hex::encode(Sha256::digest(&r.bytes)),
        f["sha256"].as_str().unwrap()
    );
    assert_eq!(r.bytes.len() as u64, f["bytes"].as_u64().unwrap());
    let h = |n: header::HeaderName| r.headers[n].to_str().unwrap().to_owned();
    assert_eq!(h(header::CONTENT_TYPE), "application/vnd.apache.parquet");
    assert_eq!(h(header::CONTENT_LENGTH), f["bytes"].to_string());
    assert_eq!(h(header::ACCEPT_RANGES), "bytes");
    assert_eq!(
        h(header::ETAG),
        format!("\"{}\"", f["sha256"].as_str().unwrap())
    );
    assert!(h(header::CACHE_CONTROL).starts_with("private, max-age="));
    // The bytes are the file the answers come from: a Parquet file ("PAR1" at both ends).
    assert_eq!(&r.bytes[..4], b"PAR1");
    assert_eq!(&r.bytes[r.bytes.len() - 4..], b"PAR1");
    // The ETag revalidates.
    let r = send(
        &t,
        Method::GET,
        &local(f["url"].as_str().unwrap()),
        None,
        &[(
            "if-none-match",
            &format!("\"{}\"", f["sha256"].as_str().unwrap()),
        )],
    )
    .await;
    assert_eq!(r.status, StatusCode::NOT_MODIFIED);
    assert!(r.bytes.is_empty());
}

#[tokio::test]
async fn range_and_suffix_range_answers_are_byte_exact() {
    let t = setup().await;
    let key = power_key(&t).await;
    let f = first_file(&t, &key).await;
    let url = local(f["url"].as_str().unwrap());
    let whole = send(&t, Method::GET, &url, None, &[]).await.bytes;
    let size = whole.len();
    for (range, start, end) in [
        ("bytes=0-3".to_owned(), 0, 4),
        (format!("bytes={}-", size - 8), size - 8, size),
        ("bytes=-8".to_owned(), size - 8, size),
        (format!("bytes=10-{}", size + 100), 10, size),
        ("bytes=-100000000".to_owned(), 0, size),
    ] {
        let r = send(&t, Method::GET, &url, None, &[("range", &range)]).await;
        assert_eq!(r.status, StatusCode::PARTIAL_CONTENT, "{range}");
        assert_eq!(r.bytes, whole[start..end], "{range}");
        assert_eq!(
            r.headers[header::CONTENT_RANGE],
            format!("bytes {start}-{}/{size}", end - 1).as_str(),
            "{range}"
        );
        assert_eq!(
            r.headers[header::CONTENT_LENGTH],
            (end - start).to_string().as_str()
        );
    }
    // Past the end: 416 with the size, as an error envelope.
    let r = send(
        &t,
        Method::GET,
        &url,
        None,
        &[("range", &format!("bytes={size}-"))],
    )
    .await;
    assert_error(
        &r,
        StatusCode::RANGE_NOT_SATISFIABLE,
        "range_not_satisfiable",
        None,
    );
    assert_eq!(
        r.headers[header::CONTENT_RANGE],
        format!("bytes */{size}").as_str()
    );
    // Several ranges: the whole file (readers send one).
    let r = send(&t, Method::GET, &url, None, &[("range", "bytes=0-1,4-5")]).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.bytes, whole);
    // If-Range with another validator: the whole file, not a part of a changed one.
    let r = send(
        &t,
        Method::GET,
        &url,
        None,
        &[("range", "bytes=0-3"), ("if-range", "\"other\"")],
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.bytes, whole);
    // HEAD: the headers alone.
    let r = send(&t, Method::HEAD, &url, None, &[]).await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.bytes.is_empty());
    assert_eq!(r.headers[header::CONTENT_LENGTH], size.to_string().as_str());
}

#[tokio::test]
async fn expired_tampered_and_cross_file_signatures_are_403() {
    let t = setup().await;
    let key = power_key(&t).await;
    let files = listing(&t, &key, "?limit=2").await["results"].clone();
    let (a, b) = (
        files[0]["id"].as_str().unwrap(),
        files[1]["id"].as_str().unwrap(),
    );
    let signer = t.state.file_urls();
    let now = asof_engine::Instant::now().micros() / 1_000_000;
    let fresh = signer.query(a, now + 600, None);
    assert_eq!(
        send(&t, Method::GET, &format!("/files/{a}?{fresh}"), None, &[])
            .await
            .status,
        StatusCode::OK
    );
    let refused = |r: &common::Res, what: &str| {
        assert_error(r, StatusCode::FORBIDDEN, "forbidden", None);
        assert!(
            r.json["error"]["message"].as_str().unwrap().contains(what),
            "{}",
            r.json
        );
    };
    // Expired.
    let old = signer.query(a, now - 1, None);
    refused(
        &send(&t, Method::GET, &format!("/files/{a}?{old}"), None, &[]).await,
        "expired",
    );
    // Tampered: a later expiry with the old signature, or a changed signature.
    let sig = signer.sign(a, now + 600, None);
    let later = format!("expires={}&signature={sig}", now + 6000);
    refused(
        &send(&t, Method::GET, &format!("/files/{a}?{later}"), None, &[]).await,
        "does not match",
    );
    let flipped: String = sig.chars().rev().collect();
    let q = format!("expires={}&signature={flipped}", now + 600);
    refused(
        &send(&t, Method::GET, &format!("/files/{a}?{q}"), None, &[]).await,
        "does not match",
    );
    // Signed for another file.
    refused(
        &send(&t, Method::GET, &format!("/files/{b}?{fresh}"), None, &[]).await,
        "does not match",
    );
    // No signature at all; a Bearer key is no substitute.
    let r = send(&t, Method::GET, &format!("/files/{a}"), Some(&key), &[]).await;
    refused(&r, "signature");
}

#[tokio::test]
async fn two_replicas_sharing_one_state_store_verify_each_others_urls() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite_store(dir.path()).await;
    let a = common::setup_with(
        tempfile::tempdir().unwrap(),
        store.clone(),
        Default::default(),
    )
    .await;
    let b = common::setup_with(
        tempfile::tempdir().unwrap(),
        store.clone(),
        Default::default(),
    )
    .await;
    let key = power_key(&a).await;
    let f = first_file(&a, &key).await;
    let r = send(
        &b,
        Method::GET,
        &local(f["url"].as_str().unwrap()),
        None,
        &[],
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        hex::encode(Sha256::digest(&r.bytes)),
        f["sha256"].as_str().unwrap()
    );
    // A replica with its own state store does not.
    let c = setup().await;
    let r = send(
        &c,
        Method::GET,
        &local(f["url"].as_str().unwrap()),
        None,
        &[],
    )
    .await;
    assert_error(&r, StatusCode::FORBIDDEN, "forbidden", None);
}

#[tokio::test]
async fn the_public_url_option_names_the_origin_of_signed_urls() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite_store(dir.path()).await;
    let opts = asof_server::Options {
        public_url: Some("https://files.example.com/".into()),
        file_url_ttl: std::time::Duration::from_secs(60),
        ..Default::default()
    };
    let t = common::setup_with(dir, store, opts).await;
    let key = power_key(&t).await;
    let f = first_file(&t, &key).await;
    assert!(
        f["url"]
            .as_str()
            .unwrap()
            .starts_with("https://files.example.com/files/")
    );
    let expires = asof_engine::Instant::parse(f["expires_at"].as_str().unwrap()).unwrap();
    let left = expires.micros() - asof_engine::Instant::now().micros();
    assert!((0..=61_000_000).contains(&left), "{left}");
}

#[tokio::test]
async fn a_browser_may_read_a_file_url_by_range_across_origins() {
    let t = setup().await;
    let r = send(
        &t,
        Method::OPTIONS,
        "/files/00",
        None,
        &[
            ("origin", "https://shell.duckdb.org"),
            ("access-control-request-method", "GET"),
            ("access-control-request-headers", "range"),
        ],
    )
    .await;
    let allowed = r.headers["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    assert!(allowed.contains("range"), "{allowed}");
    let key = power_key(&t).await;
    let f = first_file(&t, &key).await;
    let r = send(
        &t,
        Method::GET,
        &local(f["url"].as_str().unwrap()),
        None,
        &[
            ("origin", "https://shell.duckdb.org"),
            ("range", "bytes=-8"),
        ],
    )
    .await;
    assert_eq!(r.status, StatusCode::PARTIAL_CONTENT);
    let exposed = r.headers["access-control-expose-headers"]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    for h in ["content-range", "content-length", "etag"] {
        assert!(exposed.contains(h), "{h} not in {exposed}");
    }
}

#[tokio::test]
async fn a_pinned_listing_signs_urls_for_its_version_that_serve_files_the_served_version_replaced()
{
    let (t, v1, v2) = common::one_day_rewritten().await;
    let key = power_key(&t).await;

    let old = listing(&t, &key, &format!("?corpus_version={v1}")).await;
    assert_eq!(old["corpus_version"], v1.as_str());
    let f = &old["results"][0];
    assert_eq!(f["corpus_version"], v1.as_str());
    let id = f["id"].as_str().unwrap();
    assert!(
        t.state.corpus().file(id).is_none(),
        "replaced in the served version"
    );
    let url = f["url"].as_str().unwrap();
    assert!(url.ends_with(&format!("&corpus_version={v1}")), "{url}");
    let bytes = send(&t, Method::GET, &local(url), None, &[]).await;
    assert_eq!(bytes.status, StatusCode::OK, "{}", bytes.json);
    assert_eq!(hex::encode(Sha256::digest(&bytes.bytes)), id);
    // The version is signed with the URL: dropped or changed, the URL is refused.
    let unpinned = local(url).replace(&format!("&corpus_version={v1}"), "");
    let r = send(&t, Method::GET, &unpinned, None, &[]).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.json);
    let moved = local(url).replace(&v1, &v2);
    let r = send(&t, Method::GET, &moved, None, &[]).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.json);
    // `/v1/files/{id}`: the served version lists no such file; the pinned one does.
    let served = send(&t, Method::GET, &format!("/v1/files/{id}"), Some(&key), &[]).await;
    assert_error(&served, StatusCode::NOT_FOUND, "not_found", None);
    let pinned = send(
        &t,
        Method::GET,
        &format!("/v1/files/{id}?corpus_version={v1}"),
        Some(&key),
        &[],
    )
    .await;
    assert_eq!(pinned.status, StatusCode::OK, "{}", pinned.json);
    assert_eq!(
        pinned.headers["x-corpus-version"].to_str().unwrap(),
        v1.as_str()
    );
    // The served version's listing is unchanged by the pin.
    let now = listing(&t, &key, "").await;
    assert_eq!(now["corpus_version"], v2.as_str());
    assert!(
        !now["results"][0]["url"]
            .as_str()
            .unwrap()
            .contains("corpus_version")
    );
}
