//! `asof-stream-bench`: how late `/v1/stream` delivers a publish, and what open streams cost.
//!
//! Usage: `asof-stream-bench --bin ASOF --work DIR [--publishes 100] [--clients 500]
//!         [--fanout-publishes 20] [--reload-interval 1]`
//!
//! It copies the shipped sample corpus into `DIR/corpus`, makes a Desk key, and starts the real
//! `asof serve` on a free loopback port. Then:
//!
//! 1. **Latency**: one stream client; `--publishes` times, after a random pause (uniform over
//!    one reload interval, so a publish lands at a random phase of the server's pointer check),
//!    it publishes one forward-lane row through the engine's publish (what `asof poll` calls)
//!    and measures from the moment the publish returns to the moment the client has read the
//!    event carrying that row. p50, p99 and max.
//! 2. **Fan-out and memory**: the server's resident memory (VmRSS) before any stream, after
//!    `--clients` streams are open and idle, and after `--fanout-publishes` publishes reached
//!    every client; per publish, the time until the first and until the last client had it.
//!
//! The clients speak plain HTTP/1.1 over TCP and look for the row's id in what they read, so
//! the measurement adds no SSE library of its own. Prints Markdown and one JSON line.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant as Clock};

use asof_bench::percentiles;
use asof_engine::write::publish::{ChangeSet, publish};
use asof_engine::{CorpusStore, Instant, Lane, NewsRow, SourceId};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

type Error = Box<dyn std::error::Error + Send + Sync>;

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// The sample corpus shipped in the repository (manifests/ and snapshots/ at its root).
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

async fn copy_sample(dst_dir: &Path) -> Result<CorpusStore, Error> {
    let src = CorpusStore::open(repo().to_str().ok_or("repo path")?)?;
    let (version, m) = src.current().await?;
    let dst = CorpusStore::local(dst_dir)?;
    for p in m
        .partitions
        .iter()
        .map(|p| p.path.clone())
        .chain(m.identity.iter().map(|e| e.path.clone()))
        .chain(m.access.iter().map(|e| e.path.clone()))
    {
        dst.put_immutable(&p, src.get(&p).await?).await?;
    }
    dst.put_manifest(&m).await?;
    dst.swap_pointer(None, &version).await?;
    Ok(dst)
}

/// A row as the poller makes them: a filing first seen at the fetch minute.
fn seen(n: usize) -> NewsRow {
    let now = Instant::now();
    let minute = Instant::from_micros(now.micros() - now.micros().rem_euclid(60_000_000));
    let cik = "0000320193";
    NewsRow {
        id: format!("bench-{n:06}_{cik}"),
        source_id: SourceId::SecEdgar,
        lane: Lane::ForwardFirstSeen,
        form: Some("8-K".into()),
        accession: Some(format!("0009999998-26-{n:06}")),
        cik: Some(cik.into()),
        title: format!("8-K - bench filing {n}"),
        event_at: None,
        published_at: Some(minute),
        available_at: Some(minute),
        acceptance_at: None,
        committed_at: Some(now),
        availability_basis: asof_engine::AvailabilityBasis::LocalFirstSeen,
        revision_id: String::new(),
        supersedes: None,
        content_sha256: String::new(),
        source_locator: format!("https://www.sec.gov/Archives/edgar/data/{cik}/"),
        entity_id: Some(cik.into()),
        payload: None,
    }
}

async fn publish_one(store: &CorpusStore, n: usize) -> Result<Clock, Error> {
    let p = publish(
        store,
        ChangeSet {
            rows: vec![seen(n)],
            ..ChangeSet::default()
        },
        Instant::now(),
    )
    .await?;
    if !p.changed {
        return Err(format!("publish {n} changed nothing").into());
    }
    Ok(Clock::now())
}

fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

/// A GET's status line, over a fresh connection.
async fn get_status(addr: &str, path: &str) -> Result<String, Error> {
    let mut s = TcpStream::connect(addr).await?;
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await?;
    Ok(String::from_utf8_lossy(&buf)
        .lines()
        .next()
        .unwrap_or("")
        .to_owned())
}

/// Opens one stream; every row id it reads is sent on `tx` as (client, row number, when).
async fn stream_client(
    addr: String,
    key: String,
    client: usize,
    tx: mpsc::UnboundedSender<(usize, usize, Clock)>,
    opened: tokio::sync::oneshot::Sender<()>,
) -> Result<(), Error> {
    let mut s = TcpStream::connect(&addr).await?;
    s.write_all(
        format!("GET /v1/stream HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\nAccept: text/event-stream\r\n\r\n")
            .as_bytes(),
    )
    .await?;
    let mut buf: Vec<u8> = Vec::with_capacity(8192);
    let mut chunk = vec![0u8; 16384];
    let mut opened = Some(opened);
    loop {
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(o) = opened.take() {
            let head = String::from_utf8_lossy(&buf);
            if !head.starts_with("HTTP/1.1 200") {
                return Err(
                    format!("stream refused: {}", head.lines().next().unwrap_or("")).into(),
                );
            }
            let _ = o.send(());
        }
        // Whole SSE messages only (a message is one chunk of the chunked body).
        let Some(end) = buf.windows(2).rposition(|w| w == b"\n\n") else {
            continue;
        };
        let at = Clock::now();
        let text = String::from_utf8_lossy(&buf[..end]).into_owned();
        for part in text.split("\"id\":\"bench-").skip(1) {
            if let Some(n) = part.get(..6).and_then(|d| d.parse().ok()) {
                let _ = tx.send((client, n, at));
            }
        }
        buf.drain(..end + 2);
    }
}

struct Server {
    child: Child,
    addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let bin = arg(&args, "--bin").ok_or("--bin ASOF is required")?;
    let work = PathBuf::from(arg(&args, "--work").ok_or("--work DIR is required")?);
    let publishes: usize = arg(&args, "--publishes").map_or(Ok(100), |v| v.parse())?;
    let clients: usize = arg(&args, "--clients").map_or(Ok(500), |v| v.parse())?;
    let fanout: usize = arg(&args, "--fanout-publishes").map_or(Ok(20), |v| v.parse())?;
    let interval: f64 = arg(&args, "--reload-interval").map_or(Ok(1.0), |v| v.parse())?;

    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)?;
    let store = copy_sample(&work.join("corpus")).await?;
    let db = format!("sqlite://{}/state.db", work.display());
    let out = Command::new(&bin)
        .args(["keys", "create", "--database-url", &db])
        .args(["--email", "bench@example.com", "--plan", "desk"])
        .output()?;
    let key = String::from_utf8(out.stdout)?
        .lines()
        .last()
        .ok_or("keys create printed no key")?
        .to_owned();
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let addr = format!("127.0.0.1:{port}");
    let server = Server {
        child: Command::new(&bin)
            .args(["serve", "--listen", &addr, "--database-url", &db])
            .args(["--corpus", work.join("corpus").to_str().ok_or("path")?])
            .args(["--reload-interval", &interval.to_string()])
            // Every client on one key: the bench measures the server, not the per-account
            // or per-server caps.
            .args(["--max-streams-per-user", &(clients + 8).to_string()])
            .args(["--max-streams", &(clients + 8).to_string()])
            .args(["--max-connections", &(2 * clients + 64).to_string()])
            .env("ASOF_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
        addr: addr.clone(),
    };
    let deadline = Clock::now() + Duration::from_secs(60);
    while !get_status(&server.addr, "/health")
        .await
        .is_ok_and(|l| l.contains(" 200"))
    {
        if Clock::now() > deadline {
            return Err("server not ready after 60 s".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid = server.child.id();
    let mut rng = asof_ingest::corpora::synthetic::Rng(11);

    // 1. Latency, one client.
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (otx, orx) = tokio::sync::oneshot::channel();
    tokio::spawn(stream_client(addr.clone(), key.clone(), 0, tx, otx));
    orx.await?;
    let mut lat_us = Vec::with_capacity(publishes);
    for n in 0..publishes {
        let pause = rng.below((interval * 1e6) as u64);
        tokio::time::sleep(Duration::from_micros(pause)).await;
        let t0 = publish_one(&store, n).await?;
        loop {
            let (_, got, at) = tokio::time::timeout(Duration::from_secs(30), rx.recv())
                .await
                .map_err(|_| format!("publish {n}: no event within 30 s"))?
                .ok_or("the stream closed")?;
            if got == n {
                lat_us.push(at.saturating_duration_since(t0).as_secs_f64() * 1e6);
                break;
            }
        }
    }
    let (p50, p99) = percentiles(lat_us.clone());
    let max = lat_us.iter().copied().fold(0.0, f64::max);

    // 2. Fan-out to `clients` streams, and what they cost.
    let rss_one = rss_mib(pid);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut opened = Vec::with_capacity(clients);
    for c in 0..clients {
        let (otx, orx) = tokio::sync::oneshot::channel();
        tokio::spawn(stream_client(addr.clone(), key.clone(), c, tx.clone(), otx));
        opened.push(orx);
    }
    for o in opened {
        o.await?;
    }
    // Let the server settle (allocations of the new connections) before reading its memory.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_open = rss_mib(pid);
    let mut first_us = Vec::new();
    let mut last_us = Vec::new();
    let mut all_us = Vec::new();
    for k in 0..fanout {
        let n = publishes + k;
        let pause = rng.below((interval * 1e6) as u64);
        tokio::time::sleep(Duration::from_micros(pause)).await;
        let t0 = publish_one(&store, n).await?;
        let mut reached: HashMap<usize, Clock> = HashMap::new();
        while reached.len() < clients {
            let (c, got, at) = tokio::time::timeout(Duration::from_secs(60), rx.recv())
                .await
                .map_err(|_| {
                    format!(
                        "fan-out {k}: {} of {clients} clients had the event after 60 s",
                        reached.len()
                    )
                })?
                .ok_or("streams closed")?;
            if got == n {
                reached.entry(c).or_insert(at);
            }
        }
        let us: Vec<f64> = reached
            .values()
            .map(|at| at.saturating_duration_since(t0).as_secs_f64() * 1e6)
            .collect();
        first_us.push(us.iter().copied().fold(f64::MAX, f64::min));
        last_us.push(us.iter().copied().fold(0.0, f64::max));
        all_us.extend(us);
    }
    let rss_after = rss_mib(pid);
    let (all50, all99) = percentiles(all_us);
    let (last50, last99) = percentiles(last_us);
    let (first50, _) = percentiles(first_us);

    let ms = |us: f64| us / 1000.0;
    let mut o = std::io::stdout().lock();
    writeln!(
        o,
        "## /v1/stream (reload interval {interval} s, sample corpus, release build)\n"
    )?;
    writeln!(o, "| measure | p50 | p99 | max |\n|---|---|---|---|")?;
    writeln!(
        o,
        "| publish returned -> event read by the client, 1 client, {publishes} publishes | {:.1} ms | {:.1} ms | {:.1} ms |",
        ms(p50),
        ms(p99),
        ms(max)
    )?;
    writeln!(
        o,
        "| same, each of {clients} clients, {fanout} publishes | {:.1} ms | {:.1} ms | |",
        ms(all50),
        ms(all99)
    )?;
    writeln!(
        o,
        "| until the last of {clients} clients had it | {:.1} ms | {:.1} ms | |",
        ms(last50),
        ms(last99)
    )?;
    writeln!(
        o,
        "\nServer memory (VmRSS): {rss_one:.1} MiB with one stream; {rss_open:.1} MiB with {} open and idle ({:.1} KiB a stream); {rss_after:.1} MiB after {fanout} publishes reached all of them. First client reached after {:.1} ms (p50).",
        clients + 1,
        (rss_open - rss_one) * 1024.0 / clients as f64,
        ms(first50)
    )?;
    writeln!(
        o,
        "{}",
        serde_json::json!({
            "reload_interval_s": interval,
            "publishes": publishes,
            "latency_ms": {"p50": ms(p50), "p99": ms(p99), "max": ms(max)},
            "clients": clients,
            "fanout_publishes": fanout,
            "fanout_each_ms": {"p50": ms(all50), "p99": ms(all99)},
            "fanout_last_ms": {"p50": ms(last50), "p99": ms(last99)},
            "rss_mib": {"one_stream": rss_one, "open": rss_open, "after": rss_after},
        })
    )?;
    drop(server);
    Ok(())
}
