//! `asof audit replay`: a decision audit receipt's request asked again of the service, pinned
//! to the receipt's `corpus_version`, and the answer proved the same (docs/audit.md, Replay).
//!
//! The file is a receipt as `/v1/audit-log` lists it, with the query string it digests
//! (`query`) and, optionally, the body the caller kept (`body`). What is checked, in order,
//! each failure naming its field: the query hashes to `params_digest`; the kept body hashes
//! to `envelope_sha256` and names the receipt's `corpus_version` and `request_id`; the
//! replayed answer names the receipt's `corpus_version`; the replayed bytes with the
//! receipt's request id put back hash to `envelope_sha256` (the same bytes: only the request
//! id legitimately differs). When they do not, and a body was kept, the first member that
//! differs is named (`results[3].revision_id`); file listings, whose URLs expire, are
//! compared member by member without `url` and `expires_at`.
//!
//! Why re-hash rather than compare members: the receipt is what the service committed to; a
//! replay that hashes to it proves every byte, not just the members someone thought of.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::CliResult;

/// Exit code when the replay does not prove the same answer (the field is named).
const EXIT_MISMATCH: u8 = 4;

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Re-issue a receipt's request pinned to its corpus_version and prove the same answer.
    Replay(ReplayArgs),
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// A JSON file: one receipt as /v1/audit-log lists it, plus `query` (the query string
    /// sent, without `?`) and optionally `body` (the response body kept, as text).
    pub receipt: PathBuf,
    /// The service's base URL.
    #[arg(long, env = "ASOF_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// An API key of the deployment whose plan may call the receipt's route.
    #[arg(long, env = "ASOF_API_KEY")]
    pub key: String,
}

pub(crate) async fn audit(c: AuditCommand) -> CliResult {
    match c {
        AuditCommand::Replay(a) => replay(a).await,
    }
}

/// A field of the receipt the replay could not prove, with what was expected and found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub field: String,
    pub expected: String,
    pub found: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: the receipt says {}, found {}",
            self.field, self.expected, self.found
        )
    }
}

fn mismatch(field: &str, expected: impl Into<String>, found: impl Into<String>) -> Mismatch {
    Mismatch {
        field: field.to_owned(),
        expected: expected.into(),
        found: found.into(),
    }
}

/// A replay file checked against itself: what to ask, and what the answer must hash to.
#[derive(Debug)]
pub struct Plan {
    /// Path and query of the pinned request.
    pub target: String,
    pub corpus_version: String,
    pub request_id: String,
    pub envelope_sha256: String,
    pub body: Option<Value>,
    /// Whether the route's answers carry expiring URLs (`/v1/files`).
    pub volatile_urls: bool,
}

fn field<'a>(file: &'a Value, name: &str) -> Result<&'a str, Mismatch> {
    file.get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| mismatch(name, "a string", "none"))
}

fn sha256_hex(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

/// Checks the file's own fields against each other and builds the pinned request.
pub fn plan(file: &Value) -> Result<Plan, Mismatch> {
    let route = field(file, "route")?;
    let Some(path) = route.strip_prefix("GET ") else {
        return Err(mismatch("route", "GET of a data route", route.to_owned()));
    };
    let digest = field(file, "params_digest")?;
    let version = field(file, "corpus_version")?;
    let request_id = field(file, "request_id")?;
    let envelope_sha256 = field(file, "envelope_sha256")?;
    let query = field(file, "query")?.trim_start_matches('?');
    let found = asof_server::state::audit::params_digest(Some(query));
    if found != digest {
        return Err(mismatch("params_digest", digest, found));
    }
    let body = match file.get("body") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => {
            let found = sha256_hex(text.as_bytes());
            if found != envelope_sha256 {
                return Err(mismatch("envelope_sha256", envelope_sha256, found));
            }
            let kept: Value = serde_json::from_str(text)
                .map_err(|_| mismatch("body", "the JSON envelope sent", "not JSON"))?;
            for (name, want) in [("corpus_version", version), ("request_id", request_id)] {
                let found = kept.get(name).and_then(Value::as_str).unwrap_or("");
                if found != want {
                    return Err(mismatch(name, want, format!("{found} in the kept body")));
                }
            }
            Some(kept)
        }
        Some(_) => return Err(mismatch("body", "the body kept, as text", "not a string")),
    };
    // Pinned: the receipt's version, whatever the service serves now.
    let mut pinned = false;
    for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
        if k == "corpus_version" {
            if v != version {
                return Err(mismatch(
                    "corpus_version",
                    version,
                    format!("{v} in the query"),
                ));
            }
            pinned = true;
        }
    }
    let query = match (query.is_empty(), pinned) {
        (_, true) => query.to_owned(),
        (true, false) => format!("corpus_version={version}"),
        (false, false) => format!("{query}&corpus_version={version}"),
    };
    Ok(Plan {
        target: format!("{path}?{query}"),
        corpus_version: version.to_owned(),
        request_id: request_id.to_owned(),
        envelope_sha256: envelope_sha256.to_owned(),
        body,
        volatile_urls: path.starts_with("/v1/files"),
    })
}

/// How a replay was proved.
#[derive(Debug, PartialEq, Eq)]
pub enum Proof {
    /// The replayed bytes, the receipt's request id put back, hash to `envelope_sha256`.
    SameBytes,
    /// A file listing: every member of the kept body but its expiring URLs is the same.
    SameMembers,
}

/// Judges the replayed answer's bytes against the plan.
pub fn judge(plan: &Plan, replayed: &[u8]) -> Result<Proof, Mismatch> {
    let got: Value = serde_json::from_slice(replayed)
        .map_err(|_| mismatch("body", "a JSON envelope", "a reply that is not JSON"))?;
    let version = got
        .get("corpus_version")
        .and_then(Value::as_str)
        .unwrap_or("");
    if let Some(code @ ("corpus_version_unknown" | "corpus_version_not_retained")) =
        got.pointer("/error/code").and_then(Value::as_str)
    {
        let message = got
            .pointer("/error/message")
            .and_then(Value::as_str)
            .unwrap_or("");
        return Err(mismatch(
            "corpus_version",
            &plan.corpus_version,
            format!("{code}: {message}"),
        ));
    }
    if version != plan.corpus_version {
        return Err(mismatch("corpus_version", &plan.corpus_version, version));
    }
    let new_id = got.get("request_id").and_then(Value::as_str).unwrap_or("");
    let restored = String::from_utf8_lossy(replayed).replacen(
        &format!("\"request_id\":\"{new_id}\""),
        &format!("\"request_id\":\"{}\"", plan.request_id),
        1,
    );
    if sha256_hex(restored.as_bytes()) == plan.envelope_sha256 {
        return Ok(Proof::SameBytes);
    }
    let Some(kept) = &plan.body else {
        return Err(mismatch(
            "envelope_sha256",
            &plan.envelope_sha256,
            format!(
                "{} (keep the body in the file to learn which member differs)",
                sha256_hex(restored.as_bytes())
            ),
        ));
    };
    match first_difference(kept, &got, "", plan.volatile_urls) {
        Some(path) => Err(mismatch(
            &path,
            short(kept.pointer(&pointer_of(&path))),
            short(got.pointer(&pointer_of(&path))),
        )),
        None if plan.volatile_urls => Ok(Proof::SameMembers),
        None => Err(mismatch(
            "envelope_sha256",
            &plan.envelope_sha256,
            "the same members written as other bytes",
        )),
    }
}

/// The first member path where `a` and `b` differ (`results[3].revision_id`), leaving out
/// `request_id` at the top and, with `volatile`, each result's `url` and `expires_at`.
fn first_difference(a: &Value, b: &Value, at: &str, volatile: bool) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let skip = (at.is_empty() && k == "request_id")
                    || (volatile
                        && at.starts_with("results[")
                        && (k == "url" || k == "expires_at"));
                if skip {
                    continue;
                }
                let path = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => {
                        if let Some(d) = first_difference(p, q, &path, volatile) {
                            return Some(d);
                        }
                    }
                    _ => return Some(path),
                }
            }
            None
        }
        (Value::Array(x), Value::Array(y)) => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                if let Some(d) = first_difference(p, q, &format!("{at}[{i}]"), volatile) {
                    return Some(d);
                }
            }
            (x.len() != y.len()).then(|| format!("{at}[{}]", x.len().min(y.len())))
        }
        _ => (a != b).then(|| at.to_owned()),
    }
}

/// A member path as a JSON pointer (`results[3].id` → `/results/3/id`).
fn pointer_of(path: &str) -> String {
    let mut p = String::new();
    for part in path.split('.') {
        let (name, rest) = part.split_once('[').unwrap_or((part, ""));
        p.push('/');
        p.push_str(name);
        for i in rest.split('[') {
            let i = i.trim_end_matches(']');
            if !i.is_empty() {
                p.push('/');
                p.push_str(i);
            }
        }
    }
    p
}

fn short(v: Option<&Value>) -> String {
    let s = v.map_or_else(|| "nothing".to_owned(), Value::to_string);
    if s.len() > 120 {
        format!("{}…", &s[..s.floor_char_boundary(120)])
    } else {
        s
    }
}

async fn replay(a: ReplayArgs) -> CliResult {
    let text = std::fs::read(&a.receipt)
        .map_err(|e| format!("cannot read {}: {e}", a.receipt.display()))?;
    let file: Value = serde_json::from_slice(&text)
        .map_err(|e| format!("{} is not a JSON receipt: {e}", a.receipt.display()))?;
    let plan = match plan(&file) {
        Ok(p) => p,
        Err(m) => {
            println!("MISMATCH {m}");
            return Ok(ExitCode::from(EXIT_MISMATCH));
        }
    };
    let url = format!("{}{}", a.url.trim_end_matches('/'), plan.target);
    let res = reqwest::Client::new()
        .get(&url)
        .bearer_auth(&a.key)
        .send()
        .await
        .map_err(|e| format!("cannot reach {}: {e}", a.url))?;
    let status = res.status();
    let body = res.bytes().await?;
    if matches!(status.as_u16(), 401 | 403 | 429 | 503) {
        return Err(format!(
            "the service refused the replay ({status}): {}",
            String::from_utf8_lossy(&body)
        )
        .into());
    }
    match judge(&plan, &body) {
        Ok(proof) => {
            let how = match proof {
                Proof::SameBytes => "the same bytes, request id aside (envelope_sha256 matches)",
                Proof::SameMembers => "the same members, expiring file URLs aside",
            };
            println!(
                "REPLAYED {} at {} ({status}): {how}",
                plan.target, plan.corpus_version
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(m) => {
            println!("MISMATCH {m}");
            Ok(ExitCode::from(EXIT_MISMATCH))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const V: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";

    fn body(id: &str, rows: &[&str]) -> String {
        // The envelope as the service writes it: request_id first, compact.
        let results: Vec<Value> = rows.iter().map(|r| json!({"id": r})).collect();
        serde_json::to_string(&json!({"request_id": id, "corpus_version": V, "results": results}))
            .unwrap()
    }

    fn file(kept: &str, query: &str) -> Value {
        json!({
            "ts": "2026-12-04T00:00:00.000Z",
            "key_id": "k",
            "route": "GET /v1/news",
            "params_digest": asof_server::state::audit::params_digest(Some(query)),
            "corpus_version": V,
            "envelope_sha256": sha256_hex(kept.as_bytes()),
            "request_id": "r-1",
            "query": query,
            "body": kept,
        })
    }

    #[test]
    fn the_same_rows_under_another_request_id_prove_the_same_bytes() {
        let kept = body("r-1", &["a", "b"]);
        let plan = plan(&file(&kept, "ticker=TSLA&as_of=2026-01-29T12:00:00Z")).unwrap();
        assert_eq!(
            plan.target,
            format!("/v1/news?ticker=TSLA&as_of=2026-01-29T12:00:00Z&corpus_version={V}")
        );
        assert_eq!(
            judge(&plan, body("r-2", &["a", "b"]).as_bytes()),
            Ok(Proof::SameBytes)
        );
        // Without the kept body the receipt alone proves it.
        let mut bare = file(&kept, "ticker=TSLA");
        bare["body"] = Value::Null;
        let plan = super::plan(&bare).unwrap();
        assert_eq!(
            judge(&plan, body("r-9", &["a", "b"]).as_bytes()),
            Ok(Proof::SameBytes)
        );
        assert_eq!(
            judge(&plan, body("r-9", &["a"]).as_bytes())
                .unwrap_err()
                .field,
            "envelope_sha256"
        );
    }

    #[test]
    fn a_different_answer_names_the_member_that_differs() {
        let kept = body("r-1", &["a", "b"]);
        let plan = plan(&file(&kept, "ticker=TSLA")).unwrap();
        let m = judge(&plan, body("r-2", &["a", "c"]).as_bytes()).unwrap_err();
        assert_eq!(m.field, "results[1].id");
        assert_eq!((m.expected.as_str(), m.found.as_str()), ("\"b\"", "\"c\""));
        let m = judge(&plan, body("r-2", &["a"]).as_bytes()).unwrap_err();
        assert_eq!(m.field, "results[1]");
        let other = body("r-2", &["a", "b"]).replace(V, &V.replace('1', "2"));
        assert_eq!(
            judge(&plan, other.as_bytes()).unwrap_err().field,
            "corpus_version"
        );
        let refused = json!({"request_id": "r", "corpus_version": V.replace('1', "3"),
            "error": {"code": "corpus_version_not_retained", "message": "outside 30 days"}});
        let m = judge(&plan, refused.to_string().as_bytes()).unwrap_err();
        assert_eq!(m.field, "corpus_version");
        assert!(m.found.contains("corpus_version_not_retained"), "{m}");
    }

    #[test]
    fn a_tampered_receipt_fails_naming_the_field_before_anything_is_asked() {
        let kept = body("r-1", &["a"]);
        let good = file(&kept, "ticker=TSLA");
        let mut q = good.clone();
        q["query"] = json!("ticker=AAPL");
        assert_eq!(plan(&q).unwrap_err().field, "params_digest");
        let mut b = good.clone();
        b["body"] = json!(body("r-1", &["z"]));
        assert_eq!(plan(&b).unwrap_err().field, "envelope_sha256");
        let mut id = good.clone();
        id["request_id"] = json!("r-other");
        assert_eq!(plan(&id).unwrap_err().field, "request_id");
        let mut v = good.clone();
        v["corpus_version"] = json!(V.replace('1', "4"));
        assert_eq!(plan(&v).unwrap_err().field, "corpus_version");
        let mut gone = good.clone();
        gone.as_object_mut().unwrap().remove("query");
        assert_eq!(plan(&gone).unwrap_err().field, "query");
        let mut pinned_elsewhere = file(&kept, &format!("corpus_version={}", V.replace('1', "5")));
        pinned_elsewhere["body"] = Value::Null;
        assert_eq!(plan(&pinned_elsewhere).unwrap_err().field, "corpus_version");
        let mut post = good;
        post["route"] = json!("POST /v1/keys");
        assert_eq!(plan(&post).unwrap_err().field, "route");
    }

    #[test]
    fn file_listings_are_compared_without_their_expiring_urls() {
        let listing = |id: &str, url: &str| {
            serde_json::to_string(&json!({"request_id": id, "corpus_version": V,
                "results": [{"id": "f", "url": url, "expires_at": url.len()}]}))
            .unwrap()
        };
        let kept = listing("r-1", "http://x/files/f?expires=1");
        let mut f = file(&kept, "");
        f["route"] = json!("GET /v1/files");
        let plan = plan(&f).unwrap();
        assert_eq!(plan.target, format!("/v1/files?corpus_version={V}"));
        assert_eq!(
            judge(
                &plan,
                listing("r-2", "http://x/files/f?expires=22").as_bytes()
            ),
            Ok(Proof::SameMembers)
        );
    }
}
