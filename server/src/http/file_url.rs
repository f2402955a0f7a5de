//! The service's own signed file URLs, for a corpus on a local directory (a corpus in S3, GCS or
//! Azure gets the object store's presigned URLs instead, and the bytes never pass through here).
//!
//! A URL is `/files/{id}?expires=<unix seconds>&signature=<hex>`, the signature
//! `hmac_sha256(secret, "asof-file-url\n{id}\n{expires}")`. A file listed by a pinned request
//! (`corpus_version=`) also carries `&corpus_version=<v>`, signed with it
//! (`"asof-file-url\n{id}\n{expires}\n{v}"`): the served version may no longer list the file,
//! and only a URL this service signed may make it look in a retained version. The secret lives in the state
//! store, so any replica sharing it verifies any replica's URLs. The signature is the only
//! credential: it names one file until one instant, and the API key never appears in a URL.

use std::time::Duration;

use asof_engine::Instant;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::ApiError;

#[derive(Clone)]
pub struct FileUrlSigner {
    key: Vec<u8>,
}

impl std::fmt::Debug for FileUrlSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FileUrlSigner(<secret>)")
    }
}

impl FileUrlSigner {
    pub fn new(secret: &str) -> Self {
        FileUrlSigner {
            key: secret.as_bytes().to_vec(),
        }
    }

    fn mac(&self, id: &str, expires: i64, version: Option<&str>) -> Hmac<Sha256> {
        let mut m = Hmac::<Sha256>::new_from_slice(&self.key).expect("hmac takes any key length");
        m.update(format!("asof-file-url\n{id}\n{expires}").as_bytes());
        if let Some(v) = version {
            m.update(format!("\n{v}").as_bytes());
        }
        m
    }

    /// The signature of a URL for file `id` valid until `expires` (unix seconds), listed by
    /// `version` when a pinned request listed it.
    pub fn sign(&self, id: &str, expires: i64, version: Option<&str>) -> String {
        hex::encode(self.mac(id, expires, version).finalize().into_bytes())
    }

    /// The query string of a URL for `id` valid until `expires` (and its pinned version).
    pub fn query(&self, id: &str, expires: i64, version: Option<&str>) -> String {
        let signature = self.sign(id, expires, version);
        match version {
            Some(v) => format!("expires={expires}&signature={signature}&corpus_version={v}"),
            None => format!("expires={expires}&signature={signature}"),
        }
    }

    /// Checks a URL's `expires` and `signature` for file `id` at `now` (unix seconds): the
    /// signature first (a changed `expires` is a tampered URL), then the expiry. Every refusal
    /// is `403 forbidden` with a message saying which.
    pub fn verify(
        &self,
        id: &str,
        expires: Option<&str>,
        signature: Option<&str>,
        version: Option<&str>,
        now: i64,
    ) -> Result<(), ApiError> {
        let (Some(expires), Some(signature)) = (expires, signature) else {
            return Err(ApiError::Forbidden(
                "a file URL needs its expires and signature parameters; get a fresh URL from /v1/files/{id}".into(),
            ));
        };
        let tampered = || {
            ApiError::Forbidden(
                "this file URL's signature does not match (altered, or signed for another file); get a fresh URL from /v1/files/{id}".into(),
            )
        };
        let at: i64 = expires.parse().map_err(|_| tampered())?;
        let sig = hex::decode(signature).map_err(|_| tampered())?;
        self.mac(id, at, version)
            .verify_slice(&sig)
            .map_err(|_| tampered())?;
        if at <= now {
            return Err(ApiError::Forbidden(format!(
                "this file URL expired at {}; get a fresh URL from /v1/files/{{id}}",
                asof_engine::Instant::from_micros(at.saturating_mul(1_000_000))
            )));
        }
        Ok(())
    }
}

/// How one request's file URLs are signed: by the object store (a presigned URL), or by the
/// service for the origin the client reached it at (`AppState::signing`).
pub struct Signing<'a> {
    pub(crate) signer: &'a FileUrlSigner,
    pub(crate) ttl: Duration,
    pub(crate) origin: String,
}

impl Signing<'_> {
    /// A signed GET URL for the file `id` stored at `path`, its kind, and when it expires
    /// (unix seconds): the object store's presigned URL, or the service's own.
    pub async fn url(
        &self,
        store: &asof_engine::CorpusStore,
        id: &str,
        path: &str,
        pinned: Option<&str>,
    ) -> Result<(String, &'static str, i64), ApiError> {
        let now = Instant::now().micros().div_euclid(1_000_000);
        let expires = now + i64::try_from(self.ttl.as_secs()).unwrap_or(i64::MAX / 2);
        Ok(match store.presigned_get(path, self.ttl).await? {
            Some(u) => (u.to_string(), "presigned", expires),
            None => (
                format!(
                    "{}/files/{id}?{}",
                    self.origin,
                    self.signer.query(id, expires, pinned)
                ),
                "service",
                expires,
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "aa";

    #[test]
    fn a_url_verifies_until_it_expires_and_only_for_its_file() {
        let s = FileUrlSigner::new("secret");
        let sig = s.sign(ID, 1_000, None);
        assert!(s.verify(ID, Some("1000"), Some(&sig), None, 999).is_ok());
        assert!(s.verify(ID, Some("1000"), Some(&sig), None, 1_000).is_err());
        assert!(s.verify("bb", Some("1000"), Some(&sig), None, 0).is_err());
        assert!(s.verify(ID, Some("1001"), Some(&sig), None, 0).is_err());
        assert!(s.verify(ID, Some("1000"), None, None, 0).is_err());
        assert!(s.verify(ID, Some("1000"), Some("zz"), None, 0).is_err());
    }

    #[test]
    fn another_secret_does_not_verify_and_the_same_secret_does() {
        let a = FileUrlSigner::new("one");
        let sig = a.sign(ID, 10, None);
        assert!(
            FileUrlSigner::new("two")
                .verify(ID, Some("10"), Some(&sig), None, 0)
                .is_err()
        );
        assert!(
            FileUrlSigner::new("one")
                .verify(ID, Some("10"), Some(&sig), None, 0)
                .is_ok()
        );
    }

    #[test]
    fn a_pinned_url_verifies_only_with_the_version_it_was_signed_for() {
        let s = FileUrlSigner::new("secret");
        let v = "sha256:aa";
        let sig = s.sign(ID, 1_000, Some(v));
        assert!(s.verify(ID, Some("1000"), Some(&sig), Some(v), 0).is_ok());
        assert!(
            s.verify(ID, Some("1000"), Some(&sig), None, 0).is_err(),
            "the version dropped"
        );
        assert!(
            s.verify(ID, Some("1000"), Some(&sig), Some("sha256:bb"), 0)
                .is_err(),
            "another version named"
        );
        let unpinned = s.sign(ID, 1_000, None);
        assert!(
            s.verify(ID, Some("1000"), Some(&unpinned), Some(v), 0)
                .is_err(),
            "a version added to an unpinned URL"
        );
        assert!(
            s.query(ID, 1_000, Some(v))
                .ends_with("&corpus_version=sha256:aa")
        );
    }
}
