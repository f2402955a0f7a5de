//! The fakes as processes, as the Python end-to-end tests start them: each prints its
//! `listening` line once it accepts connections and answers HTTP on every address it names.
//!
//! Being an integration test of this package also makes `cargo test` build these binaries
//! with the rest of the tests (the same feature set): `scripts/test-all` used to build them
//! with `cargo build -p asof-test-support`, whose features differ from the test build's, and
//! on a fresh machine that recompiled about ninety crates (two and a half minutes of CI).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

/// Kills the process when the test ends, passed or not.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `bin` and returns it with the URLs of its `listening` line.
fn start(bin: &str) -> (Killed, Vec<String>) {
    let mut child = Command::new(bin)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let child = Killed(child);
    let mut line = String::new();
    BufReader::new(out).read_line(&mut line).unwrap();
    let urls = line
        .trim()
        .strip_prefix("listening ")
        .unwrap_or_else(|| panic!("{bin} printed {line:?}, not its listening line"))
        .split(' ')
        .map(str::to_owned)
        .collect();
    (child, urls)
}

/// The status line of `GET /` at `url` (`http://host:port`).
fn status_line(url: &str) -> String {
    let addr = url.strip_prefix("http://").unwrap().trim_end_matches('/');
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET / HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer.lines().next().unwrap_or_default().to_owned()
}

#[test]
fn the_fake_processor_answers_http_on_the_address_it_prints() {
    let (_p, urls) = start(env!("CARGO_BIN_EXE_asof-fake-processor"));
    assert_eq!(urls.len(), 1, "{urls:?}");
    let line = status_line(&urls[0]);
    assert!(line.starts_with("HTTP/1.1 "), "{line}");
}

#[test]
fn the_fake_vendors_answer_http_on_both_addresses_they_print() {
    let (_p, urls) = start(env!("CARGO_BIN_EXE_asof-fake-vendors"));
    assert_eq!(urls.len(), 2, "{urls:?}");
    assert_ne!(urls[0], urls[1]);
    for url in &urls {
        let line = status_line(url);
        assert!(line.starts_with("HTTP/1.1 "), "{url}: {line}");
    }
}
