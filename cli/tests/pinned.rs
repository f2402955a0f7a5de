//! End-to-end: pinned corpus versions (`corpus_version=`) on the real binary. Three versions
//! are published into a copy of the sample by `asof ingest` while `asof serve` runs (a day
//! added, a record corrected, a hole certified); what each version answered before the next
//! publish must be what a request pinned to it answers after all three; a pinned walk
//! survives a publish, an unpinned one still expires; a receipt of the first version replays
//! after the third (`asof audit replay`), a tampered one fails naming its field; versions
//! outside retention and never published are refused.

mod common;

use std::path::Path;

use common::spawn::{Guard, asof, http, keys_create, start_logging};
use serde_json::Value;

const TSLA: &str = "1318605";

/// The questions recorded at every version. Each changes across the three publishes or holds
/// still, and the test says which.
const QUESTIONS: &[&str] = &[
    // The day 2026-02-09 is added by the first publish, one of its rows corrected by the second.
    "/v1/news?cik=1318605&as_of=2026-02-09T23:59:59Z&limit=1000",
    // Needs 2026-02-10: a hole until the third publish certifies it.
    "/v1/news?cik=1318605&as_of=2026-02-10T23:59:59Z&limit=1000",
    // Untouched by all three.
    "/v1/news?ticker=TSLA&as_of=2026-01-29T12:00:00Z",
    "/v1/news/diff?cik=1318605&as_of_start=2026-02-01T00:00:00Z&as_of_end=2026-02-09T23:59:59Z",
    "/v1/news?cik=1318605&as_of=2026-03-01T00:00:00Z&visible_by=committed_at",
    "/v1/news/0001318605-26-000902_1318605?as_of=2026-02-09T23:59:59Z",
    "/v1/coverage?source=sec.edgar&date=2026-02-10",
    "/v1/mapping/ticker/TSLA?as_of=2026-02-10T00:00:00Z",
    "/v1/meta",
];

/// A daily index of EDGAR for `day` (`YYYYMMDD`) in the form SEC publishes it (the sample's
/// `company.20221003.idx` header, fixed-width columns), holding `rows` (company, form, CIK,
/// accession).
fn daily_index(dir: &Path, day: &str, rows: &[(&str, &str, &str, &str)]) -> String {
    let real = std::fs::read_to_string(
        common::repo().join("snapshots/sources/sec.edgar/daily-index/company.20221003.idx"),
    )
    .unwrap();
    let mut text: String = real
        .lines()
        .take(11)
        .map(|l| format!("{l}\n"))
        .collect::<String>()
        .replace("Oct  3, 2022", "Feb  9, 2026");
    for (name, form, cik, accession) in rows {
        text.push_str(&format!(
            "{name:<62}{form:<12}{cik:<12}{day:<12}edgar/data/{cik}/{accession}.txt\n"
        ));
    }
    let path = dir.join(format!("company.{day}.idx"));
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

/// `asof ingest` of one EDGAR file, as an operator runs it; the version it published.
fn ingest(corpus: &str, commit: &str, extra: &[&str], file: &str) -> String {
    let out = asof()
        .args([
            "ingest",
            "--corpus",
            corpus,
            "--source",
            "sec.edgar",
            "--commit-time",
            commit,
        ])
        .args(extra)
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ingest failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    stdout
        .lines()
        .rev()
        .find_map(|l| l.split_whitespace().find(|w| w.starts_with("sha256:")))
        .unwrap_or_else(|| panic!("no version in {stdout}"))
        .to_owned()
}

struct Answer {
    status: u16,
    version: String,
    /// The envelope without its request id (the one member two answers may differ in).
    body: Value,
    head: String,
}

fn ask(addr: &str, key: &str, path: &str) -> Answer {
    let auth = format!("Bearer {key}");
    let (status, head, raw) = http(addr, path, &[("Authorization", &auth)]);
    answer(status, head, raw)
}

fn answer(status: u16, head: String, raw: Vec<u8>) -> Answer {
    let mut body: Value = serde_json::from_slice(&raw)
        .unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&raw)));
    body.as_object_mut().unwrap().remove("request_id");
    let version = header(&head, "x-corpus-version").unwrap_or_default();
    Answer {
        status,
        version,
        body,
        head,
    }
}

fn header(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
    })
}

fn pinned(path: &str, version: &str) -> String {
    let sep = if path.contains('?') { '&' } else { '?' };
    format!("{path}{sep}corpus_version={version}")
}

fn served(addr: &str) -> String {
    let (_, _, body) = http(addr, "/health", &[]);
    let v: Value = serde_json::from_slice(&body).unwrap();
    v["results"][0]["corpus_version"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Waits (bounded) until the server's reload loop serves `version`.
fn until_served(addr: &str, version: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while served(addr) != version {
        assert!(
            std::time::Instant::now() < deadline,
            "{version} was not served within 30 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
fn answers_recorded_at_each_of_three_published_versions_are_what_pinned_requests_answer_after_all_three()
 {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let corpus_dir = tempfile::tempdir().unwrap();
    rt.block_on(common::copy_of_sample_corpus_into(corpus_dir.path()));
    let corpus = corpus_dir.path().to_str().unwrap().to_owned();
    let files = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", state.path().join("state.db").display());
    let (child, addr, _) = start_logging(
        &db,
        "error",
        &["--corpus", &corpus, "--reload-interval", "1"],
    );
    let mut guard = Guard(child);
    let key = keys_create(&db, "pins@example.com", "desk");
    let auth = format!("Bearer {key}");

    let mut versions = vec![served(&addr)];
    let mut recorded: Vec<Vec<Answer>> = Vec::new();
    let record =
        |addr: &str| -> Vec<Answer> { QUESTIONS.iter().map(|q| ask(addr, &key, q)).collect() };
    recorded.push(record(&addr));

    // An audited answer of the first version, kept as a client keeps it.
    let audited_path = QUESTIONS[0];
    let (status, head, kept) = http(
        &addr,
        audited_path,
        &[("Authorization", &auth), ("X-Service-Audit", "on")],
    );
    assert_eq!(status, 409, "2026-02-09 is not held yet: a hole");
    let audited_id = header(&head, "x-request-id").unwrap();
    // And a walk, one row a page, begun pinned and unpinned on the first version.
    let walk = "/v1/news?ticker=TSLA&as_of=2026-01-29T12:00:00Z&limit=1";
    let first = ask(&addr, &key, &pinned(walk, &versions[0]));
    let pinned_cursor = first.body["next_cursor"].as_str().unwrap().to_owned();
    let unpinned_cursor = ask(&addr, &key, walk).body["next_cursor"]
        .as_str()
        .unwrap()
        .to_owned();

    // 1. A day added: 2026-02-09's daily index (certifying the weekend before it too).
    let day = daily_index(
        files.path(),
        "20260209",
        &[
            ("Tesla, Inc.", "8-K", TSLA, "0001318605-26-000901"),
            ("Tesla, Inc.", "4", TSLA, "0001318605-26-000902"),
        ],
    );
    versions.push(ingest(
        &corpus,
        "2026-02-10T06:00:00Z",
        &["--certify", "2026-02-08..2026-02-09"],
        &day,
    ));
    until_served(&addr, &versions[1]);
    recorded.push(record(&addr));

    // The walk pinned to the first version goes on after the publish; unpinned it expires.
    let next = ask(
        &addr,
        &key,
        &pinned(&format!("{walk}&cursor={pinned_cursor}"), &versions[0]),
    );
    assert_eq!(next.status, 200, "{}", next.body);
    assert_eq!(next.version, versions[0]);
    assert_ne!(
        next.body["results"], first.body["results"],
        "the second page"
    );
    let expired = ask(&addr, &key, &format!("{walk}&cursor={unpinned_cursor}"));
    assert_eq!(expired.status, 409);
    assert_eq!(expired.body["error"]["code"], "cursor_expired");
    // The unpinned walk's cursor was minted on the first version: pinning finishes it there.
    let rescued = ask(
        &addr,
        &key,
        &pinned(&format!("{walk}&cursor={unpinned_cursor}"), &versions[0]),
    );
    assert_eq!(rescued.status, 200, "{}", rescued.body);

    // 2. A record corrected: the same day's index again, the Form 4 now a 4/A.
    let corrected = daily_index(
        files.path(),
        "20260209",
        &[
            ("Tesla, Inc.", "8-K", TSLA, "0001318605-26-000901"),
            ("Tesla, Inc.", "4/A", TSLA, "0001318605-26-000902"),
        ],
    );
    versions.push(ingest(&corpus, "2026-02-11T06:00:00Z", &[], &corrected));
    until_served(&addr, &versions[2]);
    recorded.push(record(&addr));

    // 3. A hole certified: 2026-02-10, a day with no filing of these companies.
    let quiet = daily_index(
        files.path(),
        "20260210",
        &[("MICROSOFT CORP", "424B2", "789019", "0001193125-26-040001")],
    );
    versions.push(ingest(
        &corpus,
        "2026-02-11T07:00:00Z",
        &["--certify", "2026-02-10"],
        &quiet,
    ));
    until_served(&addr, &versions[3]);
    recorded.push(record(&addr));

    // The three publishes changed what the questions answer, as intended.
    let status_of = |v: usize, q: usize| recorded[v][q].status;
    assert_eq!(
        (status_of(0, 0), status_of(1, 0)),
        (409, 200),
        "the day added"
    );
    assert_ne!(
        recorded[1][0].body["results"], recorded[2][0].body["results"],
        "the correction"
    );
    assert_eq!(recorded[2][5].body["results"][0]["form"], "4/A");
    assert_eq!(recorded[1][5].body["results"][0]["form"], "4");
    assert_eq!(
        (status_of(2, 1), status_of(3, 1)),
        (409, 200),
        "the hole certified"
    );
    assert_eq!(recorded[3][1].body["count"], recorded[2][0].body["count"]);
    assert_eq!(
        recorded[0][2].body["results"], recorded[3][2].body["results"],
        "untouched"
    );

    // After all three: each version, pinned, answers what it answered then.
    for (v, version) in versions.iter().enumerate() {
        for (q, question) in QUESTIONS.iter().enumerate() {
            let now = ask(&addr, &key, &pinned(question, version));
            let then = &recorded[v][q];
            assert_eq!(
                (now.status, &now.body),
                (then.status, &then.body),
                "{question} pinned to version {v}"
            );
            assert_eq!(now.version, *version, "{question}: X-Corpus-Version");
            assert_eq!(then.version, *version);
            assert_eq!(now.body["corpus_version"], version.as_str());
        }
    }

    // The receipt of the first version's answer replays after the third publish.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let receipt = loop {
        let (_, _, log) = http(&addr, "/v1/audit-log", &[("Authorization", &auth)]);
        let log: Value = serde_json::from_slice(&log).unwrap();
        if let Some(r) = log["results"]
            .as_array()
            .and_then(|a| a.iter().find(|r| r["request_id"] == audited_id.as_str()))
        {
            break r.clone();
        }
        assert!(std::time::Instant::now() < deadline, "no receipt arrived");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(receipt["corpus_version"], versions[0].as_str());
    let mut file = receipt.clone();
    file["query"] = Value::from(audited_path.split_once('?').unwrap().1);
    file["body"] = Value::from(String::from_utf8(kept.clone()).unwrap());
    let replay = |addr: &str, file: &Value| {
        let path = files.path().join("receipt.json");
        std::fs::write(&path, serde_json::to_vec(file).unwrap()).unwrap();
        let out = asof()
            .args(["audit", "replay", path.to_str().unwrap()])
            .args(["--url", &format!("http://{addr}"), "--key", &key])
            .output()
            .unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code(), said)
    };
    let (code, said) = replay(&addr, &file);
    assert_eq!(code, Some(0), "{said}");
    assert!(
        said.starts_with("REPLAYED") && said.contains("the same bytes"),
        "{said}"
    );
    let mut bare = file.clone();
    bare.as_object_mut().unwrap().remove("body");
    let (code, said) = replay(&addr, &bare);
    assert_eq!(code, Some(0), "the receipt alone proves it: {said}");
    let mut tampered = file.clone();
    tampered["query"] = Value::from("cik=1318605&as_of=2026-02-10T23:59:59Z&limit=1000");
    let (code, said) = replay(&addr, &tampered);
    assert_eq!(code, Some(4), "{said}");
    assert!(said.starts_with("MISMATCH params_digest"), "{said}");
    // A receipt whose answer the version does not give (its hash altered with its body).
    let mut forged = bare.clone();
    forged["envelope_sha256"] = Value::from("0".repeat(64));
    let (code, said) = replay(&addr, &forged);
    assert_eq!(code, Some(4), "{said}");
    assert!(said.starts_with("MISMATCH envelope_sha256"), "{said}");

    // `/v1/meta` needs no key, but a pinned one does: a past version is loaded for it.
    let (status, _, body) = http(&addr, &pinned("/v1/meta", &versions[0]), &[]);
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (status, &body["error"]["code"]),
        (401, &Value::from("unauthorized"))
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("corpus_version"),
        "{body}"
    );
    let (status, _, _) = http(&addr, "/v1/meta", &[]);
    assert_eq!(status, 200, "unpinned, as before");

    // Never published: refused, and no data.
    let unknown = format!("sha256:{}", "ab".repeat(32));
    let refused = ask(&addr, &key, &pinned(QUESTIONS[2], &unknown));
    assert_eq!(refused.status, 404, "{}", refused.body);
    assert_eq!(refused.body["error"]["code"], "corpus_version_unknown");
    assert_eq!(refused.body["error"]["param"], "corpus_version");
    assert!(refused.body["results"].as_array().unwrap().is_empty());
    assert!(
        refused
            .head
            .to_ascii_lowercase()
            .contains("cache-control: no-store")
    );
    assert!(guard.terminate().success());

    // A deployment retaining two versions: the third and fourth answer, the first two are
    // refused as no longer retained (the same store and state).
    let (child, addr, _) = start_logging(
        &db,
        "error",
        &["--corpus", &corpus, "--retain-versions", "2"],
    );
    let mut guard = Guard(child);
    for (v, version) in versions.iter().enumerate() {
        let a = ask(&addr, &key, &pinned(QUESTIONS[2], version));
        if v >= 2 {
            assert_eq!(a.status, 200, "version {v} is retained: {}", a.body);
            assert_eq!(a.body, recorded[v][2].body);
        } else {
            assert_eq!(a.status, 410, "version {v}: {}", a.body);
            assert_eq!(a.body["error"]["code"], "corpus_version_not_retained");
            assert!(a.body["results"].as_array().unwrap().is_empty());
            let message = a.body["error"]["message"].as_str().unwrap();
            assert!(message.contains("newest 2"), "{message}");
        }
    }
    let meta = ask(&addr, &key, "/v1/meta");
    assert_eq!(meta.body["results"][0]["retention"]["versions"], 2);
    assert_eq!(meta.body["results"][0]["retention"]["days"], 2557);
    let (code, said) = replay(&addr, &bare);
    assert_eq!(code, Some(4), "{said}");
    assert!(
        said.starts_with("MISMATCH corpus_version") && said.contains("corpus_version_not_retained"),
        "{said}"
    );
    assert!(guard.terminate().success());
}
