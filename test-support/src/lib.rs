//! Real components the test suites start on loopback, shared by the crates' integration tests.
//!
//! - [`S3`]: `s3s-fs`, an S3-compatible server that verifies SigV4 (headers and presigned
//!   URLs). The binary comes from `ASOF_S3S_FS` (default `~/.cache/asof-tools/bin/s3s-fs`,
//!   where `scripts/test-all` installs it). Without it a test says so and passes, unless
//!   `ASOF_REQUIRE_S3=1` (CI), where a missing server fails it.
//! - [`counting`]: an object store recording every object read (what an ingest touched).
//! - [`edgar_archive`]: EDGAR daily-index files and quarter listings made to measure (backfill
//!   tests and benchmarks), served by a [`feed::Feed`].
//! - [`feed`]: a local EDGAR current-filings feed replaying the recorded Atom pages.
//! - [`processor`]: a payment processor speaking Stripe's API shape (no runnable processor
//!   exists to test against), and Stripe's webhook signing.
//! - [`vendors`]: two market-data vendors (an aggregates API, a daily-prices API) for the
//!   bring-your-own-key connector.

pub mod counting;
pub mod edgar_archive;
pub mod feed;
pub mod processor;
pub mod vendors;

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const S3_KEY: &str = "asof-test-key";
pub const S3_SECRET: &str = "asof-test-secret-0123456789";

/// A running `s3s-fs` with one bucket, `corpus`; killed on drop.
pub struct S3 {
    child: Child,
    pub port: u16,
    bin: PathBuf,
    root: tempfile::TempDir,
}

impl Drop for S3 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(bin: &std::path::Path, port: u16, root: &std::path::Path) -> Child {
    Command::new(bin)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--access-key", S3_KEY, "--secret-key", S3_SECRET])
        .arg(root)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn s3s_binary() -> Option<PathBuf> {
    let path = std::env::var_os("ASOF_S3S_FS")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/asof-tools/bin/s3s-fs"))
        })?;
    path.is_file().then_some(path)
}

impl S3 {
    /// Starts the server, or `None` (after saying why) when it is not installed here.
    pub fn start() -> Option<S3> {
        let Some(bin) = s3s_binary() else {
            let required = std::env::var("ASOF_REQUIRE_S3").is_ok_and(|v| v == "1");
            assert!(
                !required,
                "ASOF_REQUIRE_S3=1 but no s3s-fs binary (ASOF_S3S_FS or ~/.cache/asof-tools/bin)"
            );
            eprintln!("skipped: s3s-fs is not installed (scripts/test-all installs it)");
            return None;
        };
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("corpus")).unwrap();
        // A free port: bind, read it, release it for the server.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = spawn(&bin, port, root.path());
        let s3 = S3 {
            child,
            port,
            bin,
            root,
        };
        s3.wait_listening();
        Some(s3)
    }

    /// Ready when it accepts connections (bounded; never a fixed sleep).
    fn wait_listening(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "s3s-fs did not start listening");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the server (the store goes away; its files stay).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts it again on the same port over the same files.
    pub fn restart(&mut self) {
        self.stop();
        self.child = spawn(&self.bin, self.port, self.root.path());
        self.wait_listening();
    }

    /// The URL of a corpus under `prefix` in the bucket.
    pub fn url(&self, prefix: &str) -> String {
        format!("s3://corpus/{prefix}")
    }

    /// The object-store options reaching this server (`CorpusStore::open_with_options`).
    pub fn options(&self) -> Vec<(String, String)> {
        [
            ("aws_endpoint", format!("http://127.0.0.1:{}", self.port)),
            ("aws_allow_http", "true".into()),
            ("aws_access_key_id", S3_KEY.into()),
            ("aws_secret_access_key", S3_SECRET.into()),
            ("aws_region", "us-east-1".into()),
        ]
        .map(|(k, v)| (k.to_owned(), v))
        .to_vec()
    }
}
