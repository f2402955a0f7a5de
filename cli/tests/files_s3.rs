//! Flat files of a corpus in S3 (a real S3-compatible server on loopback, `s3s-fs`, which
//! verifies SigV4 presigned URLs): `/v1/files` answers the object store's own presigned GET
//! URLs, a plain HTTP client reads the exact bytes with them, and the server refuses a
//! tampered or expired one. The bytes never pass through the service. With the store gone,
//! answers that need it are `503 storage_unavailable` within the retry bound, and the service
//! recovers when it returns. `asof sql` over a corpus in S3 answers what it answers on disk.

mod common;

use asof_engine::{Corpus, CorpusStore};
use asof_server::plan::Plan;
use asof_test_support::S3;
use axum::http::{Method, StatusCode};
use common::{key_for, send, sqlite_store};
use sha2::{Digest, Sha256};

async fn served(s3: &S3, ttl: std::time::Duration) -> common::T {
    let store = CorpusStore::open_with_options(&s3.url("served"), s3.options()).unwrap();
    common::copy_sample_corpus(&store).await;
    let dir = tempfile::tempdir().unwrap();
    let state_store = sqlite_store(dir.path()).await;
    let opts = asof_server::Options {
        file_url_ttl: ttl,
        ..Default::default()
    };
    let state = asof_server::AppState::with_options(
        Corpus::open(store).await.unwrap(),
        state_store.clone(),
        opts,
    )
    .await
    .unwrap();
    let key = key_for(&state_store, "power@example.com", Plan::Power).await;
    common::T::new(dir, state, state_store, key)
}

#[tokio::test]
async fn a_presigned_url_reads_the_exact_bytes_and_a_tampered_one_is_refused() {
    let Some(s3) = S3::start() else { return };
    let t = served(&s3, std::time::Duration::from_secs(900)).await;
    let key = t.key.clone();
    let r = send(
        &t,
        Method::GET,
        "/v1/files?source=us.cftc.cot&limit=1",
        Some(&key),
        &[],
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    let f = &r.json["results"][0];
    assert_eq!(f["url_kind"], "presigned");
    let url = f["url"].as_str().unwrap();
    assert!(
        url.starts_with(&format!("http://127.0.0.1:{}/corpus/served/", s3.port)),
        "{url}"
    );
    assert!(url.contains("X-Amz-Signature="), "{url}");
    let http = reqwest::Client::new();
    let got = http.get(url).send().await.unwrap();
    assert_eq!(got.status(), 200);
    let bytes = got.bytes().await.unwrap();
    assert_eq!(
        hex::encode(Sha256::digest(&bytes)),
        f["sha256"].as_str().unwrap()
    );
    assert_eq!(bytes.len() as u64, f["bytes"].as_u64().unwrap());
    // A range, as Parquet readers ask for the footer.
    let tail = http
        .get(url)
        .header("range", "bytes=-8")
        .send()
        .await
        .unwrap();
    assert_eq!(tail.status(), 206);
    assert_eq!(tail.bytes().await.unwrap(), bytes[bytes.len() - 8..]);
    // Tampered: the signature of this object does not sign another one.
    let other = send(
        &t,
        Method::GET,
        "/v1/files?source=sec.edgar&limit=1",
        Some(&key),
        &[],
    )
    .await;
    let other_path = url::Url::parse(other.json["results"][0]["url"].as_str().unwrap()).unwrap();
    let mut forged = url::Url::parse(url).unwrap();
    forged.set_path(other_path.path());
    let refused = http.get(forged).send().await.unwrap();
    assert_eq!(refused.status(), 403);
    // Nor does a changed signature.
    let mut bad = url.to_owned();
    let at = bad.find("X-Amz-Signature=").unwrap() + "X-Amz-Signature=".len();
    let flipped = if &bad[at..=at] == "0" { "1" } else { "0" };
    bad.replace_range(at..=at, flipped);
    assert_eq!(http.get(&bad).send().await.unwrap().status(), 403);
    // The service never signs its own URL for an S3 corpus, and a fresh one comes by id.
    let one = send(
        &t,
        Method::GET,
        &format!("/v1/files/{}", f["id"].as_str().unwrap()),
        Some(&key),
        &[],
    )
    .await;
    assert_eq!(one.json["results"][0]["url_kind"], "presigned");
}

#[tokio::test]
async fn an_expired_presigned_url_is_refused_by_the_object_store() {
    let Some(s3) = S3::start() else { return };
    let t = served(&s3, std::time::Duration::from_secs(1)).await;
    let key = t.key.clone();
    let r = send(&t, Method::GET, "/v1/files?limit=1", Some(&key), &[]).await;
    let f = &r.json["results"][0];
    let url = f["url"].as_str().unwrap().to_owned();
    let expires = asof_engine::Instant::parse(f["expires_at"].as_str().unwrap()).unwrap();
    // Wait out the expiry the URL states (this waits on the clock the signature binds, not on
    // a process getting ready).
    while asof_engine::Instant::now() <= expires {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let refused = reqwest::get(&url).await.unwrap();
    assert_eq!(refused.status(), 403, "{url}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_object_store_gone_reads_are_503_storage_unavailable_and_recover() {
    let Some(mut s3) = S3::start() else { return };
    let t = served(&s3, std::time::Duration::from_secs(60)).await;
    // An index-path page, a walk page, a record outside EDGAR (found through the id runs; it
    // once answered 404 from a bucket while the same corpus on disk answered 200) and a file
    // listing: each reads the store when first asked.
    let paths = [
        "/v1/news?cik=789019&as_of=2026-02-05T00:00:00Z&limit=100",
        "/v1/news?source=us.ofac.sdn&as_of=2019-01-04T23:59:59Z&limit=5",
        "/v1/news/10000@2019-01-04T23:59:59Z?as_of=2026-02-05T00:00:00Z",
        "/v1/files?limit=3",
    ];
    for p in paths {
        let r = send(&t, Method::GET, p, Some(&t.key.clone()), &[]).await;
        assert_eq!(r.status, StatusCode::OK, "{p}: {}", r.json);
    }
    // Pages already read are answered from memory (decoded blocks are kept): another filer's
    // page, not read before, must go to the store.
    let paths: Vec<&str> = paths
        .iter()
        .copied()
        .chain(["/v1/news?cik=1318605&as_of=2026-02-05T00:00:00Z&limit=100"])
        .collect();
    s3.stop();
    let mut refused = 0;
    for &p in &paths {
        let started = std::time::Instant::now();
        let r = send(&t, Method::GET, p, Some(&t.key.clone()), &[]).await;
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "{p}: {:?}",
            started.elapsed()
        );
        match r.status {
            StatusCode::OK => {}
            StatusCode::SERVICE_UNAVAILABLE => {
                assert_eq!(r.json["error"]["code"], "storage_unavailable", "{}", r.json);
                assert_eq!(r.headers["retry-after"], "5");
                assert_eq!(r.json["count"], serde_json::Value::Null);
                refused += 1;
            }
            other => panic!("{p}: {other} {}", r.json),
        }
    }
    assert!(
        refused > 0,
        "every answer came from memory; none read the store"
    );
    s3.restart();
    for &p in &paths {
        let r = send(&t, Method::GET, p, Some(&t.key.clone()), &[]).await;
        assert_eq!(
            r.status,
            StatusCode::OK,
            "after the store returned, {p}: {}",
            r.json
        );
    }
}

/// `asof sql --corpus s3://…` (credentials from the `AWS_*` environment, as a user sets them)
/// answers what the same statements answer on the shipped sample on disk: the tables, a cut
/// of the as-of rule, and a hole refused with its keys.
#[tokio::test]
async fn asof_sql_answers_from_a_corpus_in_s3_what_it_answers_from_the_directory() {
    let Some(s3) = S3::start() else { return };
    let store = CorpusStore::open_with_options(&s3.url("sql"), s3.options()).unwrap();
    common::copy_sample_corpus(&store).await;
    let repo = common::repo();
    let env: Vec<(String, String)> = s3
        .options()
        .into_iter()
        .map(|(k, v)| (k.to_uppercase(), v))
        .collect();
    let run = |corpus: &str, stmt: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_asof"))
            .args(["sql", "--corpus", corpus, "--format", "csv", stmt])
            .env("ASOF_LOG", "error")
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let url = s3.url("sql");
    for stmt in [
        "SELECT source_id, lane, count(*) AS n FROM news GROUP BY source_id, lane ORDER BY source_id, lane",
        "SELECT form, count(*) AS n FROM news_asof('2026-01-29T12:00:00Z') GROUP BY form ORDER BY n DESC, form LIMIT 5",
        "SELECT count(*) AS n FROM news_diff('2026-01-01T00:00:00Z', '2026-01-29T12:00:00Z', 'published_at')",
        "SELECT count(*) AS certified FROM coverage WHERE status = 'certified'",
        "SELECT ticker, cik FROM identity_asof('2026-01-29T12:00:00Z') WHERE ticker = 'TSLA'",
    ] {
        let on_disk = run(repo.to_str().unwrap(), stmt);
        let in_s3 = run(&url, stmt);
        assert_eq!(on_disk.0, Some(0), "{stmt}: {}", on_disk.2);
        assert_eq!(in_s3, on_disk, "{stmt}");
        assert!(on_disk.1.lines().count() > 1, "{stmt}: {}", on_disk.1);
    }
    let hole = run(
        &url,
        "SELECT count(*) FROM news_asof('2099-01-01T00:00:00Z')",
    );
    assert_ne!(
        hole.0,
        Some(0),
        "a cut past the certified span counted rows"
    );
    assert!(hole.2.contains("sec.edgar/"), "{}", hole.2);
}
