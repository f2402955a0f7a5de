//! Cursors: opaque HMAC-signed tokens any replica sharing the secret can verify.
//!
//! A token is `base64url(json payload) "." base64url(hmac_sha256(secret, payload))`. The payload
//! binds the operation, a digest of the filter set, the corpus version and the position; the
//! page size (`limit`) is deliberately not bound.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Why a token was refused. The server maps these to its envelopes (`invalid_request` with
/// `param: cursor`, and `cursor_expired`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Not a token this service minted for this operation and filter set (bad encoding, bad
    /// signature, another operation or filter set, or a position of the wrong shape).
    #[error("cursor is not a token this service minted for this operation and filter set")]
    Invalid,
    /// Minted against another corpus version.
    #[error("cursor was minted against another corpus version")]
    Expired,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Payload {
    /// Operation (`news`, `diff`, `coverage`, `sample.news`, ...).
    op: String,
    /// sha256 hex of the canonical filter set.
    f: String,
    /// corpus version the cursor was minted against.
    v: String,
    /// The position, operation-specific JSON.
    p: serde_json::Value,
}

#[derive(Clone)]
pub struct CursorSigner {
    /// The HMAC keyed once: keying hashes the secret's inner and outer pads, work every token
    /// minted or opened would otherwise repeat (a clone of this state is a copy).
    keyed: Hmac<Sha256>,
}

impl std::fmt::Debug for CursorSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CursorSigner(<secret>)")
    }
}

/// Digest of a filter set given as (name, value) pairs in a fixed order.
pub fn filter_digest(filters: &[(&str, String)]) -> String {
    let mut d = FilterDigest::new();
    for (k, v) in filters {
        d.field(k, v);
    }
    d.finish()
}

/// [`filter_digest`] built field by field from values as they display: the same digest as the
/// pairs of their texts, the fields written into one buffer and hashed once, without a string
/// made for each value (a news page's five filters were five allocations and copies; hashing
/// each formatted piece as it came was as many small hash updates).
#[derive(Debug, Clone, Default)]
pub struct FilterDigest(String);

impl FilterDigest {
    pub fn new() -> Self {
        FilterDigest(String::with_capacity(128))
    }

    /// Adds the field `name` with `value`'s text.
    pub fn field(&mut self, name: &str, value: impl std::fmt::Display) -> &mut Self {
        use std::fmt::Write;
        self.0.push_str(name);
        self.0.push('\0');
        write!(self.0, "{value}").expect("writing to a string never fails");
        self.0.push('\0');
        self
    }

    /// The digest, as hex.
    pub fn finish(self) -> String {
        sha256_hex(self.0.as_bytes())
    }
}

/// The sha256 of `data` as 64 lowercase hex digits, as `hex::encode` writes it but from its
/// table into one buffer: `hex::encode` pushes one `char` at a time, which cost a keyed request
/// more than hashing its key did (it runs for the key and for the cursor's filters).
pub fn sha256_hex(data: &[u8]) -> String {
    let mut digits = [0u8; 64];
    hex::encode_to_slice(Sha256::digest(data), &mut digits).expect("64 digits for 32 bytes");
    String::from_utf8(digits.to_vec()).expect("hex digits are ASCII")
}

impl CursorSigner {
    pub fn new(secret: &str) -> Self {
        CursorSigner {
            keyed: Hmac::<Sha256>::new_from_slice(secret.as_bytes())
                .expect("hmac takes any key length"),
        }
    }

    fn mac(&self, bytes: &[u8]) -> Vec<u8> {
        let mut m = self.keyed.clone();
        m.update(bytes);
        m.finalize().into_bytes().to_vec()
    }

    /// A token of raw payload bytes, as `mint` would sign them: for tests and the fuzzer,
    /// which must reach the decoder behind the signature check.
    pub fn sign_bytes(&self, body: &[u8]) -> String {
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(body),
            URL_SAFE_NO_PAD.encode(self.mac(body))
        )
    }

    pub fn mint(
        &self,
        op: &str,
        filters: &str,
        version: &str,
        position: &impl Serialize,
    ) -> String {
        let p = Payload {
            op: op.into(),
            f: filters.into(),
            v: version.into(),
            p: serde_json::to_value(position).expect("position serializes"),
        };
        self.sign_bytes(&serde_json::to_vec(&p).expect("payload serializes"))
    }

    /// Checks signature, operation and filters ([`Error::Invalid`]), then the corpus version
    /// ([`Error::Expired`]), and returns the position.
    pub fn open<T: for<'de> Deserialize<'de>>(
        &self,
        token: &str,
        op: &str,
        filters: &str,
        version: &str,
    ) -> Result<T> {
        let (body_b64, sig_b64) = token.split_once('.').ok_or(Error::Invalid)?;
        let body = URL_SAFE_NO_PAD
            .decode(body_b64)
            .map_err(|_| Error::Invalid)?;
        let sig = URL_SAFE_NO_PAD
            .decode(sig_b64)
            .map_err(|_| Error::Invalid)?;
        let mut m = self.keyed.clone();
        m.update(&body);
        m.verify_slice(&sig).map_err(|_| Error::Invalid)?;
        let p: Payload = serde_json::from_slice(&body).map_err(|_| Error::Invalid)?;
        if p.op != op || p.f != filters {
            return Err(Error::Invalid);
        }
        if p.v != version {
            return Err(Error::Expired);
        }
        serde_json::from_value(p.p).map_err(|_| Error::Invalid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_hex_is_what_hex_encode_writes_of_the_digest() {
        for data in [&b""[..], b"svc_live_0123", &[0xff; 300]] {
            assert_eq!(sha256_hex(data), hex::encode(Sha256::digest(data)));
        }
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn a_digest_built_field_by_field_is_that_of_the_fields_texts() {
        let instant = "2026-02-06T00:00:00Z";
        let pairs = [
            ("cut", format!("{instant}..{instant}")),
            ("visible_by", "published_at".to_owned()),
            ("entity", format!("cik:{}", 320193)),
            ("empty", String::new()),
            ("text", "non-ASCII é and \u{0} a NUL".to_owned()),
        ];
        let mut d = FilterDigest::new();
        d.field("cut", format_args!("{instant}..{instant}"))
            .field("visible_by", "published_at")
            .field("entity", format_args!("cik:{}", 320193))
            .field("empty", "")
            .field("text", "non-ASCII é and \u{0} a NUL");
        assert_eq!(d.finish(), filter_digest(&pairs));
        // The digest of the pairs as this module computed it before the builder: name, NUL,
        // value, NUL, in order (cursors minted by older replicas keep opening).
        let mut h = Sha256::new();
        for (k, v) in &pairs {
            h.update(k.as_bytes());
            h.update([0]);
            h.update(v.as_bytes());
            h.update([0]);
        }
        assert_eq!(filter_digest(&pairs), hex::encode(h.finalize()));
        // A field boundary is part of the digest.
        let mut a = FilterDigest::new();
        a.field("ab", "c");
        let mut b = FilterDigest::new();
        b.field("a", "bc");
        assert_ne!(a.finish(), b.finish());
    }

    #[test]
    fn a_minted_cursor_opens_only_for_its_operation_filters_and_version() {
        let s = CursorSigner::new("secret");
        let f = filter_digest(&[("cik", "1".into())]);
        let tok = s.mint("news", &f, "sha256:a", &("x", 3));
        assert_eq!(
            s.open::<(String, i32)>(&tok, "news", &f, "sha256:a")
                .unwrap(),
            ("x".into(), 3)
        );
        assert!(matches!(
            s.open::<(String, i32)>(&tok, "coverage", &f, "sha256:a"),
            Err(Error::Invalid)
        ));
        assert!(matches!(
            s.open::<(String, i32)>(
                &tok,
                "news",
                &filter_digest(&[("cik", "2".into())]),
                "sha256:a"
            ),
            Err(Error::Invalid)
        ));
        assert!(matches!(
            s.open::<(String, i32)>(&tok, "news", &f, "sha256:b"),
            Err(Error::Expired)
        ));
        assert!(matches!(
            CursorSigner::new("other").open::<(String, i32)>(&tok, "news", &f, "sha256:a"),
            Err(Error::Invalid)
        ));
        let mut tampered = tok.clone();
        tampered.replace_range(0..1, if tok.starts_with('e') { "f" } else { "e" });
        assert!(
            s.open::<(String, i32)>(&tampered, "news", &f, "sha256:a")
                .is_err()
        );
    }

    /// The seeds of the AFL target (`fuzz/src/bin/cursor.rs`) and every input it found
    /// crashing (`fuzz/crashes/cursor/`), replayed as the target runs them: the first byte picks
    /// the position type the routes open, the rest is a signed payload.
    #[test]
    fn the_fuzzers_seeds_open_and_its_kept_inputs_never_panic() {
        use asof_engine::{Day, Lane, Position, SourceId};
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
        let s = CursorSigner::new("fuzz-secret");
        let case = |data: &[u8]| -> Option<bool> {
            let (&which, body) = data.split_first()?;
            if let Ok(text) = std::str::from_utf8(data) {
                let _ = s.open::<serde_json::Value>(text, "news", "f", "v");
            }
            let token = s.sign_bytes(body);
            Some(match which % 4 {
                0 => s.open::<Position>(&token, "news", "f", "v").is_ok(),
                1 => s.open::<Position>(&token, "diff", "f", "v").is_ok(),
                2 => s
                    .open::<(SourceId, Lane, Day)>(&token, "coverage", "f", "v")
                    .is_ok(),
                _ => s.open::<String>(&token, "mcp.session", "", "mcp").is_ok(),
            })
        };
        let files = |dir: &str| -> Vec<std::path::PathBuf> {
            std::fs::read_dir(root.join(dir))
                .map(|d| d.map(|e| e.unwrap().path()).collect())
                .unwrap_or_default()
        };
        let seeds = files("seeds/cursor");
        assert_eq!(seeds.len(), 4, "one seed per position type");
        for path in seeds {
            let data = std::fs::read(&path).unwrap();
            assert_eq!(case(&data), Some(true), "{} must open", path.display());
        }
        for path in files("crashes/cursor") {
            eprintln!("replaying {}", path.display());
            let _ = case(&std::fs::read(&path).unwrap());
        }
    }

    mod laws {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]

            #[test]
            fn any_text_as_a_cursor_is_refused_never_a_panic(token in "\\PC{0,300}") {
                let s = CursorSigner::new("secret");
                prop_assert!(s.open::<serde_json::Value>(&token, "news", "f", "v").is_err());
            }

            #[test]
            fn any_signed_bytes_decode_to_an_answer_or_a_refusal_never_a_panic(
                body in proptest::collection::vec(any::<u8>(), 0..400)
            ) {
                let s = CursorSigner::new("secret");
                let _ = s.open::<(String, i64)>(&s.sign_bytes(&body), "news", "f", "v");
            }

            #[test]
            fn any_signed_json_payload_decodes_or_is_refused_never_a_panic(
                op in "[a-z.]{0,12}", v in "\\PC{0,20}", p in "\\PC{0,40}", n in any::<i64>()
            ) {
                let s = CursorSigner::new("secret");
                let body = serde_json::to_vec(&serde_json::json!({
                    "op": op, "f": "f", "v": v, "p": [p, n]
                })).unwrap();
                let r = s.open::<(String, i64)>(&s.sign_bytes(&body), "news", "f", "v");
                if op == "news" && v == "v" {
                    prop_assert_eq!(r.unwrap(), (p, n));
                } else {
                    prop_assert!(r.is_err());
                }
            }

            #[test]
            fn a_minted_cursor_round_trips_and_any_one_changed_byte_is_refused(
                id in "\\PC{0,40}", n in any::<i64>(), at in any::<prop::sample::Index>(),
                to in any::<u8>()
            ) {
                let s = CursorSigner::new("secret");
                let tok = s.mint("news", "f", "v", &(id.clone(), n));
                prop_assert_eq!(s.open::<(String, i64)>(&tok, "news", "f", "v").unwrap(), (id, n));
                let mut bytes = tok.into_bytes();
                let i = at.index(bytes.len());
                prop_assume!(bytes[i] != to);
                bytes[i] = to;
                let changed = String::from_utf8_lossy(&bytes).into_owned();
                prop_assert!(s.open::<(String, i64)>(&changed, "news", "f", "v").is_err());
            }
        }
    }
}
