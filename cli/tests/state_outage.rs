//! End to end: `asof serve` on a PostgreSQL state store that is stopped under load, then
//! started again. A private PostgreSQL instance (initdb and pg_ctl in a temp directory, so the
//! machine's server is never touched) holds the accounts; four clients keep calling a keyed
//! route and a public sample route the whole time.
//!
//! While the database is down keyed requests are `503 state_unavailable` envelopes with
//! `Retry-After`, within the store wait; public sample routes keep answering `200`; nothing is
//! a `500`, nothing hangs, the process does not panic; once the database is back keyed
//! requests succeed again without a restart. `/ready` turns 503 `not_ready` while the
//! database is down (a balancer takes the replica out) and 200 once it is back.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The directory of PostgreSQL's server programs (`initdb`, `pg_ctl`): `ASOF_PG_BIN`, else
/// `pg_config --bindir`, else Debian's `/usr/lib/postgresql/<n>/bin`.
fn pg_bin() -> Option<PathBuf> {
    if let Ok(d) = std::env::var("ASOF_PG_BIN") {
        return Some(PathBuf::from(d));
    }
    let has = |d: &Path| d.join("initdb").is_file() && d.join("pg_ctl").is_file();
    if let Ok(o) = Command::new("pg_config").arg("--bindir").output() {
        let d = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
        if has(&d) {
            return Some(d);
        }
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|d| has(d))
        .collect();
    found.sort();
    found.pop()
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// A PostgreSQL server of this test's own, on a free port, trusting local connections.
struct PrivatePg {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    root: bool,
}

impl PrivatePg {
    fn run(&self, program: &str, args: &[&str]) {
        let exe = self.bin.join(program);
        // PostgreSQL refuses to run as root: as root, the programs run as `postgres`.
        let mut c = if self.root {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&exe);
            c
        } else {
            Command::new(&exe)
        };
        let o = c.args(args).output().unwrap();
        assert!(
            o.status.success(),
            "{program} {args:?}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }

    fn new() -> Option<Self> {
        let bin = pg_bin()?;
        let dir = tempfile::tempdir().unwrap();
        let root = running_as_root();
        if root {
            let ok = Command::new("chown")
                .args(["-R", "postgres"])
                .arg(dir.path())
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                return None;
            }
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let pg = PrivatePg {
            dir,
            bin,
            port,
            root,
        };
        let data = pg.data();
        pg.run(
            "initdb",
            &["-D", &data, "-A", "trust", "-U", "postgres", "--no-sync"],
        );
        pg.start();
        Some(pg)
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn start(&self) {
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("pg.log").display().to_string();
        self.run(
            "pg_ctl",
            &["-D", &self.data(), "-o", &opts, "-l", &log, "-w", "start"],
        );
    }

    /// Stops the server at once, as a crash or a failover would: open connections break.
    fn stop(&self) {
        self.run(
            "pg_ctl",
            &["-D", &self.data(), "-m", "immediate", "-w", "stop"],
        );
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for PrivatePg {
    fn drop(&mut self) {
        let data = self.data();
        let exe = self.bin.join("pg_ctl");
        let mut c = if self.root {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(exe);
            c
        } else {
            Command::new(exe)
        };
        let _ = c
            .args(["-D", &data, "-m", "immediate", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

struct Server(Child);
impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
    }
}

/// One GET over a fresh connection: status, `Retry-After`, the error code, and how long it took.
fn get(addr: &str, path: &str, key: Option<&str>) -> (u16, Option<String>, String, Duration) {
    let started = Instant::now();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(40))).unwrap();
    let auth = key
        .map(|k| format!("Authorization: Bearer {k}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text[9..12].parse().unwrap();
    let head = &text[..text.find("\r\n\r\n").unwrap()];
    let retry = head.lines().find_map(|l| {
        l.to_ascii_lowercase()
            .strip_prefix("retry-after:")
            .map(|v| v.trim().to_owned())
    });
    let body = &text[text.find("\r\n\r\n").unwrap() + 4..];
    let code = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["error"]["code"].as_str().map(str::to_owned))
        .unwrap_or_default();
    (status, retry, code, started.elapsed())
}

const KEYED: &str = "/v1/news?cik=1318605&as_of=2026-02-01T00:00:00Z&limit=5";
const PUBLIC: &str = "/v1/sample/news?example=tesla&as_of=2026-01-29T12:00:00Z";

/// (phase, keyed, status, retry-after, code, took)
type Seen = Vec<(&'static str, bool, u16, Option<String>, String, Duration)>;

#[test]
fn keyed_routes_answer_503_while_postgres_is_down_public_ones_keep_answering_and_all_recover() {
    let Some(pg) = PrivatePg::new() else {
        assert!(
            std::env::var("ASOF_REQUIRE_POSTGRES").is_err(),
            "PostgreSQL's initdb/pg_ctl required but not found"
        );
        eprintln!("SKIPPED: no PostgreSQL server programs (initdb, pg_ctl) found");
        return;
    };
    let url = pg.url();
    let mut child = Command::new(env!("CARGO_BIN_EXE_asof"))
        .env("ASOF_LOG", "warn")
        .args(["serve", "--listen", "127.0.0.1:0", "--database-url", &url])
        // The load below is one client address: its public limit must not be what answers.
        .args(["--public-rate-limit", "100000"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let l = lines.next().expect("server exited").unwrap();
        if let Some(a) = l.strip_prefix("asof listening on http://") {
            break a.trim().to_owned();
        }
    };
    let log = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = log.clone();
    std::thread::spawn(move || {
        for l in lines.map_while(Result::ok) {
            sink.lock().unwrap().push(l);
        }
    });
    let server = Server(child);
    let o = Command::new(env!("CARGO_BIN_EXE_asof"))
        .args([
            "keys",
            "create",
            "--database-url",
            &url,
            "--email",
            "o@example.com",
            "--plan",
            "desk",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let key = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .last()
        .unwrap()
        .to_owned();
    assert_eq!(get(&addr, KEYED, Some(&key)).0, 200);

    let phase: Arc<Mutex<&'static str>> = Arc::new(Mutex::new("up"));
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..4)
        .map(|i| {
            let (addr, key, phase, seen, stop) = (
                addr.clone(),
                key.clone(),
                phase.clone(),
                seen.clone(),
                stop.clone(),
            );
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let keyed = i % 2 == 0;
                    let (path, k) = if keyed {
                        (KEYED, Some(key.as_str()))
                    } else {
                        (PUBLIC, None)
                    };
                    let at = *phase.lock().unwrap();
                    let (status, retry, code, took) = get(&addr, path, k);
                    seen.lock()
                        .unwrap()
                        .push((at, keyed, status, retry, code, took));
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
        })
        .collect();

    std::thread::sleep(Duration::from_secs(1));
    let (status, ..) = get(&addr, "/ready", None);
    assert_eq!(status, 200, "ready before the outage");
    pg.stop();
    *phase.lock().unwrap() = "down";
    // A balancer polling /ready takes the replica out while its state store is gone (the
    // store is asked at most once a second, so within two).
    let down = Instant::now();
    let not_ready = loop {
        let (status, retry, code, took) = get(&addr, "/ready", None);
        assert!(took < Duration::from_secs(8), "/ready took {took:?}");
        if status == 503 {
            assert_eq!(retry.as_deref(), Some("1"));
            break code;
        }
        assert!(
            down.elapsed() < Duration::from_secs(6),
            "/ready still 200 with the database down"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(not_ready, "not_ready");
    std::thread::sleep(Duration::from_secs(6).saturating_sub(down.elapsed()));
    pg.start();
    *phase.lock().unwrap() = "back";
    // Keyed requests succeed again, without a restart of the service.
    let back = Instant::now();
    loop {
        let recovered = seen
            .lock()
            .unwrap()
            .iter()
            .any(|(p, keyed, s, ..)| *p == "back" && *keyed && *s == 200);
        if recovered {
            break;
        }
        assert!(
            back.elapsed() < Duration::from_secs(20),
            "keyed requests did not recover within 20 s of the database's return"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let ready_again = Instant::now();
    while get(&addr, "/ready", None).0 != 200 {
        assert!(
            ready_again.elapsed() < Duration::from_secs(10),
            "/ready not 200 again within 10 s of keyed requests recovering"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::SeqCst);
    for c in clients {
        c.join().unwrap();
    }

    let seen = seen.lock().unwrap();
    for (p, keyed, status, retry, code, took) in seen.iter() {
        assert!(
            *took < Duration::from_secs(8),
            "{p} keyed={keyed}: {status} took {took:?}"
        );
        assert!(
            *status == 200 || (*keyed && *status == 503),
            "{p} keyed={keyed}: {status} {code}"
        );
        if *status == 503 {
            assert_eq!(code, "state_unavailable");
            assert_eq!(retry.as_deref(), Some("5"));
        }
        if *p == "up" {
            assert_eq!(*status, 200, "before the outage");
        }
    }
    let during = |keyed: bool| {
        seen.iter()
            .filter(|(p, k, ..)| *p == "down" && *k == keyed)
            .map(|(_, _, s, ..)| *s)
            .collect::<Vec<_>>()
    };
    assert!(
        during(true).contains(&503),
        "keyed requests during the outage: {:?}",
        during(true)
    );
    let public = during(false);
    assert!(
        public.len() > 5 && public.iter().all(|s| *s == 200),
        "public sample requests during the outage: {public:?}"
    );
    let log = log.lock().unwrap();
    assert!(
        !log.iter().any(|l| l.contains("panicked")),
        "{}",
        log.join("\n")
    );
    assert!(
        !log.iter().any(|l| l.contains("svc_live_")),
        "a key reached the log"
    );
    drop(server);
}
