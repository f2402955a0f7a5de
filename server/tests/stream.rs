//! `/v1/stream` over the router (oneshot, the body read frame by frame as a client would): the
//! rows each loaded version adds arrive as events with the `/v1/news` record JSON; resuming
//! with `Last-Event-ID` (on this replica and on a fresh one), the replay bound, filters, the
//! per-key cap, rate limit and audit counting, slow clients, keep-alives and shutdown. The
//! corpus is a writable copy of the shipped sample; versions are published through the real
//! publish path and loaded through the real reload.

mod common;

use std::time::Duration;

use asof_engine::write::publish::{ChangeSet, publish};
use asof_engine::{Corpus, CorpusStore, Instant, Lane, NewsRow, SourceId};
use asof_server::http::stream::StreamOptions;
use asof_server::plan::Plan;
use asof_server::reload::reload_once;
use asof_server::{AppState, Options, app};
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use common::{copy_of_sample_corpus_into, key_for, sqlite_store};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

struct Live {
    _dir: tempfile::TempDir,
    corpus: CorpusStore,
    state: AppState,
    key: String,
}

async fn live(stream: StreamOptions) -> Live {
    let dir = tempfile::tempdir().unwrap();
    let corpus = copy_of_sample_corpus_into(&dir.path().join("corpus")).await;
    let store = sqlite_store(dir.path()).await;
    let state = replica(&corpus, store.clone(), stream).await;
    let key = key_for(&store, "desk@example.com", Plan::Desk).await;
    Live {
        _dir: dir,
        corpus,
        state,
        key,
    }
}

/// A server process's state over `corpus` as it is now.
async fn replica(
    corpus: &CorpusStore,
    store: std::sync::Arc<dyn asof_server::state::StateStore>,
    stream: StreamOptions,
) -> AppState {
    let opts = Options {
        stream,
        ..Options::default()
    };
    AppState::with_options(Corpus::open(corpus.clone()).await.unwrap(), store, opts)
        .await
        .unwrap()
}

/// A forward-lane row as the poller makes them: `available_at` at the fetch minute.
fn seen(n: u32, cik: &str, minute: &str) -> NewsRow {
    let at = Instant::parse(minute).unwrap();
    NewsRow {
        id: format!("stream-test-{n:04}_{cik}"),
        source_id: SourceId::SecEdgar,
        lane: Lane::ForwardFirstSeen,
        form: Some("8-K".into()),
        accession: Some(format!("0009999999-26-{n:06}")),
        cik: Some(cik.into()),
        title: format!("8-K - filer {cik} ({n})"),
        event_at: None,
        published_at: Some(at),
        available_at: Some(at),
        acceptance_at: None,
        committed_at: Some(Instant::now()),
        availability_basis: asof_engine::AvailabilityBasis::LocalFirstSeen,
        revision_id: String::new(),
        supersedes: None,
        content_sha256: String::new(),
        source_locator: format!("https://www.sec.gov/Archives/edgar/data/{cik}/"),
        entity_id: Some(cik.into()),
        payload: None,
    }
}

/// Publishes `rows` as one version and loads it into `state` (as the reload loop does).
async fn publish_and_load(l: &Live, rows: Vec<NewsRow>) -> String {
    let p = publish(
        &l.corpus,
        ChangeSet {
            rows,
            ..ChangeSet::default()
        },
        Instant::now(),
    )
    .await
    .unwrap();
    assert!(p.changed);
    assert_eq!(
        reload_once(&l.state, &l.corpus).await.as_deref(),
        Some(p.version.as_str())
    );
    p.version
}

/// One SSE message: its event name, id, data, and comment lines.
#[derive(Debug, Default, Clone)]
struct Msg {
    event: Option<String>,
    id: Option<String>,
    data: Option<String>,
    comments: Vec<String>,
}

impl Msg {
    fn json(&self) -> Value {
        serde_json::from_str(self.data.as_deref().unwrap()).unwrap()
    }
}

/// The client side of one open stream.
struct Client {
    body: Body,
    buf: String,
    ended: bool,
}

impl Client {
    /// The next message, waiting at most `wait`; `None` on timeout or end of stream.
    async fn next_within(&mut self, wait: Duration) -> Option<Msg> {
        loop {
            if let Some(i) = self.buf.find("\n\n") {
                let raw: String = self.buf.drain(..i + 2).collect();
                let mut m = Msg::default();
                for line in raw.lines() {
                    if let Some(c) = line.strip_prefix(':') {
                        m.comments.push(c.trim().to_owned());
                    } else if let Some((k, v)) = line.split_once(": ") {
                        match k {
                            "event" => m.event = Some(v.into()),
                            "id" => m.id = Some(v.into()),
                            "data" => m.data = Some(v.into()),
                            _ => {}
                        }
                    }
                }
                return Some(m);
            }
            if self.ended {
                return None;
            }
            match tokio::time::timeout(wait, self.body.frame()).await {
                Err(_) => return None,
                Ok(None) => self.ended = true,
                Ok(Some(f)) => {
                    if let Ok(data) = f.unwrap().into_data() {
                        self.buf.push_str(std::str::from_utf8(&data).unwrap());
                    }
                }
            }
        }
    }

    async fn next(&mut self) -> Msg {
        self.next_within(Duration::from_secs(10))
            .await
            .expect("a message within 10 s")
    }

    /// The next `record` event (skipping comments).
    async fn record(&mut self) -> Msg {
        loop {
            let m = self.next().await;
            if m.event.is_some() {
                return m;
            }
        }
    }

    /// Reads to the end of the stream; the comments seen on the way.
    async fn until_end(&mut self) -> Vec<String> {
        let mut comments = Vec::new();
        while let Some(m) = self.next_within(Duration::from_secs(10)).await {
            comments.extend(m.comments);
        }
        assert!(self.ended, "the stream ended");
        comments
    }
}

async fn request(
    state: &AppState,
    uri: &str,
    key: Option<&str>,
    extra: &[(&str, &str)],
) -> axum::response::Response {
    let mut b = Request::builder().uri(uri);
    if let Some(k) = key {
        b = b.header(header::AUTHORIZATION, format!("Bearer {k}"));
    }
    for (k, v) in extra {
        b = b.header(*k, *v);
    }
    app(state.clone())
        .oneshot(b.body(Body::empty()).unwrap())
        .await
        .unwrap()
}

async fn open(state: &AppState, key: &str, query: &str, last_id: Option<&str>) -> Client {
    let extra: Vec<(&str, &str)> = last_id
        .map(|id| ("last-event-id", id))
        .into_iter()
        .collect();
    let res = request(state, &format!("/v1/stream{query}"), Some(key), &extra).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.headers()[header::CONTENT_TYPE], "text/event-stream");
    assert!(res.headers().contains_key("x-corpus-version"));
    let mut c = Client {
        body: res.into_body(),
        buf: String::new(),
        ended: false,
    };
    let hello = c.next().await;
    assert!(
        hello.comments[0].starts_with("asof stream of lane"),
        "{hello:?}"
    );
    c
}

async fn error_of(res: axum::response::Response) -> (StatusCode, Value) {
    let status = res.status();
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap())
}

#[tokio::test]
async fn each_row_a_loaded_version_adds_arrives_as_the_record_json_of_v1_news() {
    let l = live(StreamOptions::default()).await;
    let mut c = open(&l.state, &l.key, "", None).await;
    let version = publish_and_load(
        &l,
        vec![
            seen(1, "0000320193", "2026-11-25T10:01:00Z"),
            seen(2, "0001318605", "2026-11-25T10:00:00Z"),
        ],
    )
    .await;
    let first = c.record().await;
    let second = c.record().await;
    assert_eq!(first.event.as_deref(), Some("record"));
    // Ordered by available_at within the version.
    assert_eq!(first.json()["id"], "stream-test-0002_0001318605");
    assert_eq!(second.json()["id"], "stream-test-0001_0000320193");
    for m in [&first, &second] {
        let rec = m.json();
        assert_eq!(
            m.id.as_deref().unwrap(),
            format!("{version}:{}", rec["revision_id"].as_str().unwrap()),
            "the id names the version that added the row and the row"
        );
        assert!(rec["available_at"].is_string());
        assert_eq!(rec["availability_basis"], "local_first_seen");
        // The same JSON /v1/news answers for the same row.
        let uri = format!(
            "/v1/news/{}?as_of={}&visible_by=available_at",
            rec["id"].as_str().unwrap(),
            rec["available_at"].as_str().unwrap()
        );
        let (status, news) = error_of(request(&l.state, &uri, Some(&l.key), &[]).await).await;
        assert_eq!(status, StatusCode::OK, "{news}");
        assert_eq!(news["results"][0], rec);
    }
    // A version that adds nothing to this lane sends nothing; the next one does.
    let next = publish_and_load(&l, vec![seen(3, "0000320193", "2026-11-25T10:02:00Z")]).await;
    let third = c.record().await;
    assert!(third.id.unwrap().starts_with(&next));
}

#[tokio::test]
async fn last_event_id_replays_exactly_the_missed_events_here_and_on_a_fresh_replica() {
    let l = live(StreamOptions::default()).await;
    let mut c = open(&l.state, &l.key, "", None).await;
    publish_and_load(
        &l,
        vec![
            seen(1, "0000320193", "2026-11-25T10:00:00Z"),
            seen(2, "0000320193", "2026-11-25T10:01:00Z"),
        ],
    )
    .await;
    let got = c.record().await;
    drop(c); // the client drops after one event
    publish_and_load(&l, vec![seen(3, "0000320193", "2026-11-25T10:02:00Z")]).await;
    publish_and_load(&l, vec![seen(4, "0000320193", "2026-11-25T10:03:00Z")]).await;
    let last = got.id.unwrap();
    let mut again = open(&l.state, &l.key, "", Some(&last)).await;
    let mut missed = Vec::new();
    for _ in 0..3 {
        missed.push(again.record().await);
    }
    let ids: Vec<String> = missed
        .iter()
        .map(|m| m.json()["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        ids,
        [
            "stream-test-0002_0000320193",
            "stream-test-0003_0000320193",
            "stream-test-0004_0000320193"
        ]
    );
    // Then it is live: nothing more until a new version.
    let five = publish_and_load(&l, vec![seen(5, "0000320193", "2026-11-25T10:04:00Z")]).await;
    let live_one = again.record().await;
    assert!(live_one.id.as_deref().unwrap().starts_with(&five));

    // A replica started after all of it (no log yet) replays the same events with the same
    // ids, from the corpus's manifest chain.
    let fresh = replica(&l.corpus, l.state.store().clone(), StreamOptions::default()).await;
    let mut there = open(&fresh, &l.key, "", Some(&last)).await;
    for m in missed.iter().chain([&live_one]) {
        let r = there.record().await;
        assert_eq!(r.id, m.id);
        assert_eq!(r.data, m.data);
    }
}

#[tokio::test]
async fn an_id_outside_the_replay_window_opens_with_a_reset_then_streams_live() {
    let l = live(StreamOptions::default()).await;
    let mut c = open(&l.state, &l.key, "", None).await;
    publish_and_load(&l, vec![seen(1, "0000320193", "2026-11-25T10:00:00Z")]).await;
    let old = c.record().await.id.unwrap();
    publish_and_load(&l, vec![seen(2, "0000320193", "2026-11-25T10:01:00Z")]).await;
    // A replica whose replay window is shorter than the age of that version.
    let short = replica(
        &l.corpus,
        l.state.store().clone(),
        StreamOptions {
            replay_window: Duration::from_micros(1),
            ..StreamOptions::default()
        },
    )
    .await;
    let mut r = open(&short, &l.key, "", Some(&old)).await;
    let reset = r.next().await;
    assert_eq!(reset.event.as_deref(), Some("reset"));
    assert_eq!(reset.json()["code"], "replay_unavailable");
    assert_eq!(reset.json()["last_event_id"], old.as_str());
    assert!(reset.id.unwrap().ends_with(":reset"));
    // An id of another corpus altogether is the same answer.
    let foreign = format!("sha256:{}:rev_0", "f".repeat(64));
    let mut f = open(&l.state, &l.key, "", Some(&foreign)).await;
    assert_eq!(f.next().await.event.as_deref(), Some("reset"));
    // Both continue live.
    let p = publish(
        &l.corpus,
        ChangeSet {
            rows: vec![seen(3, "0000320193", "2026-11-25T10:02:00Z")],
            ..ChangeSet::default()
        },
        Instant::now(),
    )
    .await
    .unwrap();
    reload_once(&short, &l.corpus).await.unwrap();
    reload_once(&l.state, &l.corpus).await.unwrap();
    assert!(r.record().await.id.unwrap().starts_with(&p.version));
    assert!(f.record().await.id.unwrap().starts_with(&p.version));
}

#[tokio::test]
async fn cik_and_ticker_filters_send_only_that_filers_records() {
    let l = live(StreamOptions::default()).await;
    // A ticker the sample's identity places on one CIK, at an instant inside that interval.
    let corpus = l.state.corpus();
    let iv = corpus
        .identity()
        .file()
        .tickers
        .iter()
        .find(|iv| {
            let mid = Instant::from_micros((iv.valid_from.micros() + iv.valid_to.micros()) / 2);
            corpus.identity().ticker_at(&iv.ticker, mid).len() == 1
        })
        .expect("the sample identity places a ticker on one CIK")
        .clone();
    let (ticker, cik) = (iv.ticker.clone(), iv.cik.clone());
    let minute = |n: i64| Instant::from_micros(iv.valid_from.micros() + n * 60_000_000).to_string();
    assert!(Instant::from_micros(iv.valid_from.micros() + 5 * 60_000_000) < iv.valid_to);
    let mut by_cik = open(
        &l.state,
        &l.key,
        &format!("?cik={}", cik.trim_start_matches('0')),
        None,
    )
    .await;
    let mut by_ticker = open(
        &l.state,
        &l.key,
        &format!("?ticker={}", ticker.to_lowercase()),
        None,
    )
    .await;
    let padded = format!("{:0>10}", cik.trim_start_matches('0'));
    publish_and_load(
        &l,
        vec![
            seen(1, "0000000042", &minute(0)),
            seen(2, &padded, &minute(1)),
            seen(3, "0000000043", &minute(2)),
        ],
    )
    .await;
    // Then a version with only other filers, then one of theirs: each filtered stream's next
    // event is the filer's, never another's.
    publish_and_load(&l, vec![seen(4, "0000000044", &minute(3))]).await;
    publish_and_load(&l, vec![seen(5, &padded, &minute(4))]).await;
    for c in [&mut by_cik, &mut by_ticker] {
        assert_eq!(
            c.record().await.json()["id"],
            format!("stream-test-0002_{padded}")
        );
        assert_eq!(
            c.record().await.json()["id"],
            format!("stream-test-0005_{padded}")
        );
    }
}

#[tokio::test]
async fn a_key_holds_at_most_its_streams_and_gets_a_slot_back_when_one_ends() {
    let l = live(StreamOptions {
        max_per_user: 2,
        ..StreamOptions::default()
    })
    .await;
    let a = open(&l.state, &l.key, "", None).await;
    let _b = open(&l.state, &l.key, "", None).await;
    let res = request(&l.state, "/v1/stream", Some(&l.key), &[]).await;
    assert_eq!(res.headers()[header::RETRY_AFTER], "5");
    let (status, body) = error_of(res).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(body["error"]["code"], "too_many_streams");
    assert_eq!(body["count"], Value::Null);
    // Another key has its own slots; a closed stream gives its slot back.
    let other = key_for(l.state.store(), "other@example.com", Plan::Researcher).await;
    let _c = open(&l.state, &other, "", None).await;
    drop(a);
    let _d = open(&l.state, &l.key, "", None).await;
}

/// Issue 63, point 5: the cap is the account's, not each key's (a plan allows many keys).
#[tokio::test]
async fn an_account_holds_its_streams_whichever_of_its_keys_opens_them() {
    let l = live(StreamOptions {
        max_per_user: 2,
        ..StreamOptions::default()
    })
    .await;
    let user = l
        .state
        .store()
        .upsert_user("many-keys@example.com", Plan::Desk)
        .await
        .unwrap();
    let mut keys = Vec::new();
    for name in ["a", "b", "c"] {
        keys.push(
            l.state
                .store()
                .create_key(&user.id, name, None)
                .await
                .unwrap()
                .1,
        );
    }
    let _a = open(&l.state, &keys[0], "", None).await;
    let _b = open(&l.state, &keys[1], "", None).await;
    let res = request(&l.state, "/v1/stream", Some(&keys[2]), &[]).await;
    let (status, body) = error_of(res).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(body["error"]["code"], "too_many_streams");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("account"),
        "{body}"
    );
}

/// Issue 63, point 5: a process holds at most its total of streams, whoever asks, so the rest
/// of its connections stay for ordinary requests; past it, the contract's envelope.
#[tokio::test]
async fn a_server_holds_at_most_its_streams_and_refuses_more_with_the_envelope() {
    let l = live(StreamOptions {
        max_total: 2,
        ..StreamOptions::default()
    })
    .await;
    let mut held = Vec::new();
    for i in 0..2 {
        let k = key_for(l.state.store(), &format!("s{i}@example.com"), Plan::Desk).await;
        held.push(open(&l.state, &k, "", None).await);
    }
    let third = key_for(l.state.store(), "s2@example.com", Plan::Desk).await;
    let res = request(&l.state, "/v1/stream", Some(&third), &[]).await;
    assert_eq!(res.headers()[header::RETRY_AFTER], "5");
    let (status, body) = error_of(res).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(body["error"]["code"], "too_many_streams");
    assert_eq!(body["count"], Value::Null);
    // Ordinary requests are answered meanwhile; a stream that ends makes room.
    let res = request(
        &l.state,
        "/v1/news?ticker=TSLA&as_of=2026-01-29T12:00:00Z&limit=1",
        Some(&third),
        &[],
    )
    .await;
    assert_eq!(res.status(), StatusCode::OK);
    held.pop();
    let _c = open(&l.state, &third, "", None).await;
}

#[tokio::test]
async fn bad_parameters_and_credentials_are_refused_with_the_envelope() {
    let l = live(StreamOptions::default()).await;
    for (query, param) in [
        ("?since=1", "since"),
        ("?ticker=AAPL&cik=320193", "cik"),
        ("?lane=fast", "lane"),
        ("?ticker=no%20such", "ticker"),
        ("?cik=abc", "cik"),
    ] {
        let (status, body) =
            error_of(request(&l.state, &format!("/v1/stream{query}"), Some(&l.key), &[]).await)
                .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}");
        assert_eq!(body["error"]["code"], "invalid_request", "{query}");
        assert_eq!(body["error"]["param"], param, "{query}");
    }
    let (status, body) = error_of(
        request(
            &l.state,
            "/v1/stream",
            Some(&l.key),
            &[("last-event-id", "42")],
        )
        .await,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["param"], "Last-Event-ID");
    let (status, body) = error_of(request(&l.state, "/v1/stream", None, &[]).await).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["error"]["code"], "unauthorized");
    // Refusals hold no slot.
    assert_eq!(l.state.stream().open_streams(), 0);
}

#[tokio::test]
async fn opening_a_stream_counts_one_request_and_is_never_receipted() {
    let l = live(StreamOptions::default()).await;
    let before = l.state.audit().stats();
    let res = request(
        &l.state,
        "/v1/stream",
        Some(&l.key),
        &[("x-service-audit", "on")],
    )
    .await;
    assert_eq!(res.status(), StatusCode::OK);
    let limit: i64 = res.headers()["x-ratelimit-limit"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let remaining: i64 = res.headers()["x-ratelimit-remaining"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(remaining, limit - 1);
    assert!(!res.headers().contains_key(header::ETAG));
    let after = l.state.audit().stats();
    assert_eq!(after.skipped, before.skipped + 1, "{after:?}");
    assert_eq!(after.queued + after.written, before.queued + before.written);
}

#[tokio::test]
async fn a_client_too_far_behind_is_closed_with_a_last_comment_and_others_are_not() {
    let l = live(StreamOptions {
        max_lag_steps: 1,
        ..StreamOptions::default()
    })
    .await;
    let mut slow = open(&l.state, &l.key, "", None).await;
    let mut fast = open(&l.state, &l.key, "", None).await;
    for n in 1..=3 {
        publish_and_load(&l, vec![seen(n, "0000320193", "2026-11-25T10:00:00Z")]).await;
        // The fast client reads each version as it comes.
        assert_eq!(
            fast.record().await.json()["id"],
            format!("stream-test-{n:04}_0000320193")
        );
    }
    let comments = slow.until_end().await;
    assert!(
        comments.iter().any(|c| c.contains("fell too far behind")),
        "{comments:?}"
    );
    // Its slot is free again; it resumes with its last id (none here: live).
    drop(slow);
    assert_eq!(l.state.stream().open_streams(), 1);
}

#[tokio::test]
async fn an_idle_stream_sends_keep_alive_comments() {
    let l = live(StreamOptions {
        keep_alive: Duration::from_millis(50),
        ..StreamOptions::default()
    })
    .await;
    let mut c = open(&l.state, &l.key, "", None).await;
    let m = c.next().await;
    assert_eq!(m.comments, ["keep-alive"]);
    assert!(m.event.is_none());
}

#[tokio::test]
async fn shutdown_ends_every_stream_with_a_last_comment() {
    let l = live(StreamOptions::default()).await;
    let mut a = open(&l.state, &l.key, "", None).await;
    let mut b = open(&l.state, &l.key, "?lane=certified_pit", None).await;
    l.state.stream().close();
    for c in [&mut a, &mut b] {
        let comments = c.until_end().await;
        assert!(
            comments.iter().any(|c| c.contains("shutting down")),
            "{comments:?}"
        );
    }
}
