//! The live stream's shared log: the rows each corpus version added, as ready-made
//! server-sent-event frames, that every `/v1/stream` connection reads at its own position.
//!
//! Why a log and not a broadcast channel: one structure serves live delivery, `Last-Event-ID`
//! replay and slow clients alike. A connection is only a position `(step, index)`; frames are
//! rendered once per version and shared (`Bytes` clones), so 500 clients cost 500 positions,
//! not 500 copies; a client that stops reading holds nothing but its position and is closed
//! when it falls too far behind; and nothing a publisher or the reload loop does ever waits for
//! a client.
//!
//! A step is one link of the manifest chain (a version and its parent). Event ids are
//! `<corpus_version>:<revision_id>`: the same on every replica and after every reload, because
//! they name the version that added the row and the row itself, never a replica's counter.
//! Reloading from version A to version C walks C's parents back to A, so a replica that never
//! loaded the intermediate B still emits B's rows under B's ids.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use asof_engine::read::changes::{added_counts, added_rows};
use asof_engine::{CorpusStore, Instant, Lane, Manifest, NewsRow, SourceId};
use bytes::Bytes;
use serde::Serialize;
use tokio::sync::watch;
use tokio::time::Instant as Clock;

use crate::http::envelope::NewsRecord;
use crate::state::slots::{KeySlot, KeySlots};

/// Settings of the stream (flags of `asof serve`).
#[derive(Debug, Clone)]
pub struct StreamOptions {
    /// Streams one account may hold open at once on one process, whichever of its keys
    /// opened them (429 beyond).
    pub max_per_user: usize,
    /// Streams all accounts together may hold open on one process (429 beyond): below the
    /// connection limit, so a reserve of connections is always left for ordinary requests.
    pub max_total: usize,
    /// How far back `Last-Event-ID` replays: versions published at most this long ago.
    pub replay_window: Duration,
    /// At most this many versions are kept for replay, however recent.
    pub max_steps: usize,
    /// A version adding more rows than this to a lane (a backfill, a bulk ingest) is announced
    /// by one `bulk` event instead of one event per row.
    pub max_step_events: u64,
    /// A client this many versions behind the newest is disconnected (it resumes with
    /// `Last-Event-ID`).
    pub max_lag_steps: usize,
    /// Interval of the comment line that keeps idle connections open through proxies.
    pub keep_alive: Duration,
}

impl Default for StreamOptions {
    fn default() -> Self {
        StreamOptions {
            max_per_user: 4,
            max_total: DEFAULT_MAX_STREAMS,
            replay_window: Duration::from_secs(24 * 3600),
            max_steps: 2880,
            max_step_events: 20_000,
            max_lag_steps: 64,
            keep_alive: Duration::from_secs(15),
        }
    }
}

/// Default of [`StreamOptions::max_total`]: three quarters of `asof serve`'s default
/// connection limit (2,048), the last quarter kept for ordinary requests.
pub const DEFAULT_MAX_STREAMS: usize = 1536;

/// One event of a step, its frame rendered once.
#[derive(Debug)]
pub struct Event {
    pub revision_id: String,
    pub source_id: SourceId,
    /// The filer's CIK, normalised (10 digits), for `cik` and `ticker` filters.
    pub cik: Option<String>,
    /// The instant a `ticker` filter resolves identity at: the row's `available_at`.
    pub at: Option<Instant>,
    /// `bulk` notices match every filter.
    pub bulk: bool,
    /// `event: ...\nid: ...\ndata: ...\n\n`.
    pub frame: Bytes,
}

/// The rows one version added to its parent, by lane.
#[derive(Debug)]
pub struct Step {
    pub version: String,
    pub parent: Option<String>,
    pub created_at: Instant,
    pub lanes: BTreeMap<Lane, Vec<Event>>,
}

impl Step {
    fn bytes(&self) -> usize {
        self.lanes
            .values()
            .flatten()
            .map(|e| e.frame.len() + e.revision_id.len() + 64)
            .sum()
    }
}

/// Where a connection reads next: step `seq`, event `index` of its lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub seq: i64,
    pub index: usize,
}

/// What a connection finds at its position.
#[derive(Debug)]
pub enum At {
    /// A step to read (with how many steps the log holds after it).
    Step(Arc<Step>, usize),
    /// Nothing yet: wait for the head to move.
    Head,
    /// The step was dropped from the log (older than the replay window).
    Evicted,
}

/// Where a `Last-Event-ID` leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    At(Position),
    /// The id names a version outside the replay window (or not in this corpus's chain).
    Unavailable,
}

/// A malformed `Last-Event-ID` (not `<corpus_version>:<revision>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadEventId;

/// Splits an event id into the version that added the row and the row's revision.
pub fn parse_event_id(id: &str) -> Result<(&str, &str), BadEventId> {
    let (version, rev) = id.rsplit_once(':').ok_or(BadEventId)?;
    let hex = version.strip_prefix("sha256:").ok_or(BadEventId)?;
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) || rev.is_empty() {
        return Err(BadEventId);
    }
    if rev.len() > 64 || !rev.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(BadEventId);
    }
    Ok((version, rev))
}

struct Log {
    steps: VecDeque<Arc<Step>>,
    /// `seq` of `steps[0]`; the next step appended gets `first_seq + steps.len()`.
    first_seq: i64,
    /// The version the newest step ends at (the served version).
    head: String,
    bytes: usize,
    /// Backward extension reached the end of the chain or the replay window: versions older
    /// than `steps[0]` are not replayable.
    floor_reached: bool,
}

/// The shared log, the head notifier, shutdown, and the count of open streams per account
/// and in all.
#[derive(Clone)]
pub struct Hub {
    inner: Arc<HubInner>,
}

struct HubInner {
    log: RwLock<Log>,
    /// The seq the next appended step gets; connections wait on it.
    head: watch::Sender<i64>,
    shutdown: watch::Sender<bool>,
    /// Each account's open streams (at most `max_per_user`; `max_total` in all).
    open: KeySlots,
    /// One backward extension at a time (replays of old ids share its work).
    extending: tokio::sync::Mutex<()>,
    opts: StreamOptions,
}

/// Rows a version added, per lane.
type LaneCounts = Vec<(Lane, u64)>;

/// Limit on the log's frames in memory; the oldest versions go first.
const MAX_LOG_BYTES: usize = 512 << 20;

impl Hub {
    /// A log that starts at `version` (the served one): live clients get what comes after.
    pub fn new(version: &str, opts: StreamOptions) -> Self {
        Hub {
            inner: Arc::new(HubInner {
                log: RwLock::new(Log {
                    steps: VecDeque::new(),
                    first_seq: 0,
                    head: version.to_owned(),
                    bytes: 0,
                    floor_reached: false,
                }),
                head: watch::channel(0).0,
                shutdown: watch::channel(false).0,
                open: KeySlots::bounded(opts.max_per_user, Some(opts.max_total)),
                extending: tokio::sync::Mutex::new(()),
                opts,
            }),
        }
    }

    pub fn options(&self) -> &StreamOptions {
        &self.inner.opts
    }

    /// The position of a client that starts now: after everything already in the log.
    pub fn live_position(&self) -> Position {
        Position {
            seq: *self.inner.head.borrow(),
            index: 0,
        }
    }

    pub fn head_receiver(&self) -> watch::Receiver<i64> {
        self.inner.head.subscribe()
    }

    pub fn shutdown_receiver(&self) -> watch::Receiver<bool> {
        self.inner.shutdown.subscribe()
    }

    /// Ends every stream (graceful shutdown): each sends a last comment and closes.
    pub fn close(&self) {
        self.inner.shutdown.send_replace(true);
    }

    /// Takes one of `key_id`'s stream slots; `None` when all are taken.
    pub fn open_slot(&self, user_id: &str) -> Option<Slot> {
        self.inner.open.take(user_id)
    }

    /// Streams open now, all keys.
    pub fn open_streams(&self) -> usize {
        self.inner.open.held()
    }

    /// What lies at `seq`.
    pub fn at(&self, seq: i64) -> At {
        let log = self.inner.log.read().expect("stream log");
        if seq < log.first_seq {
            return At::Evicted;
        }
        let i = (seq - log.first_seq) as usize;
        match log.steps.get(i) {
            Some(s) => At::Step(s.clone(), log.steps.len() - i - 1),
            None => At::Head,
        }
    }

    /// Records that the server now serves `to` (whose manifest is `to_manifest`), having
    /// served `from`: one step per version of the chain between them, oldest first.
    pub async fn advance(
        &self,
        store: &CorpusStore,
        from: &Manifest,
        to: &str,
        to_manifest: &Manifest,
    ) -> asof_engine::Result<()> {
        let from_version = self.inner.log.read().expect("stream log").head.clone();
        // Walk back from `to` to the version served before, reading the manifests between.
        let mut chain: Vec<(String, Manifest)> = vec![(to.to_owned(), to_manifest.clone())];
        let mut linked = false;
        while chain.len() <= self.inner.opts.max_steps {
            let Some(parent) = chain.last().and_then(|(_, m)| m.parent.clone()) else {
                break;
            };
            if parent == from_version {
                linked = true;
                break;
            }
            let m = store.manifest(&parent).await?;
            chain.push((parent, m));
        }
        let mut steps = Vec::new();
        if linked {
            let mut parent = from.clone();
            for (version, m) in chain.into_iter().rev() {
                steps.push(self.step(store, Some(&parent), &version, &m).await?);
                parent = m;
            }
        } else {
            // Not a descendant within reach (a pointer moved to another chain, or too many
            // versions at once): one step from what was served to what is served.
            tracing::warn!(from = %from_version, to, "stream: the new version is not a near descendant; one step spans the change");
            steps.push(self.step(store, Some(from), to, to_manifest).await?);
        }
        let mut log = self.inner.log.write().expect("stream log");
        for s in steps {
            log.bytes += s.bytes();
            log.steps.push_back(Arc::new(s));
        }
        log.head = to.to_owned();
        self.evict(&mut log);
        let next = log.first_seq + log.steps.len() as i64;
        drop(log);
        self.inner.head.send_replace(next);
        Ok(())
    }

    fn evict(&self, log: &mut Log) {
        let oldest = Instant::now().micros()
            - i64::try_from(self.inner.opts.replay_window.as_micros()).unwrap_or(i64::MAX);
        while log.steps.len() > 1
            && (log.steps.len() > self.inner.opts.max_steps
                || log.bytes > MAX_LOG_BYTES
                || log.steps[0].created_at.micros() < oldest)
        {
            let s = log.steps.pop_front().expect("non-empty");
            log.bytes -= s.bytes();
            log.first_seq += 1;
            log.floor_reached = true;
        }
    }

    /// Where a client that last saw event `id` resumes. Extends the log backwards along the
    /// chain when the id names a version older than the log's first step (a replica that
    /// started after the client's last event), within the replay window.
    pub async fn resume(&self, store: &CorpusStore, id: &str) -> asof_engine::Result<Resume> {
        let Ok((version, rev)) = parse_event_id(id) else {
            return Ok(Resume::Unavailable);
        };
        if let Some(p) = self.find(version, rev) {
            return Ok(Resume::At(p));
        }
        let _one = self.inner.extending.lock().await;
        if let Some(p) = self.find(version, rev) {
            return Ok(Resume::At(p));
        }
        let window_start = Instant::now().micros()
            - i64::try_from(self.inner.opts.replay_window.as_micros()).unwrap_or(i64::MAX);
        loop {
            let (next, floor) = {
                let log = self.inner.log.read().expect("stream log");
                let next = match log.steps.front() {
                    Some(s) => s.parent.clone(),
                    None => Some(log.head.clone()),
                };
                (
                    next,
                    log.floor_reached || log.steps.len() >= self.inner.opts.max_steps,
                )
            };
            let Some(next) = next.filter(|_| !floor) else {
                self.inner.log.write().expect("stream log").floor_reached = true;
                return Ok(Resume::Unavailable);
            };
            let m = store.manifest(&next).await?;
            if m.created_at.micros() < window_start {
                self.inner.log.write().expect("stream log").floor_reached = true;
                return Ok(Resume::Unavailable);
            }
            let parent = match &m.parent {
                Some(p) => Some(store.manifest(p).await?),
                None => None,
            };
            let step = self.step(store, parent.as_ref(), &next, &m).await?;
            {
                let mut log = self.inner.log.write().expect("stream log");
                log.bytes += step.bytes();
                log.steps.push_front(Arc::new(step));
                log.first_seq -= 1;
                if m.parent.is_none() {
                    log.floor_reached = true;
                }
            }
            if next == version {
                return Ok(self
                    .find(version, rev)
                    .map_or(Resume::Unavailable, Resume::At));
            }
        }
    }

    /// The position just after event `rev` of `version`'s step (or after the whole step when
    /// the revision is not one of its events, e.g. a `bulk` notice or another lane).
    fn find(&self, version: &str, rev: &str) -> Option<Position> {
        let log = self.inner.log.read().expect("stream log");
        let i = log.steps.iter().position(|s| s.version == version)?;
        let step = &log.steps[i];
        let seq = log.first_seq + i as i64;
        for events in step.lanes.values() {
            if let Some(j) = events.iter().position(|e| e.revision_id == rev) {
                return Some(Position { seq, index: j + 1 });
            }
        }
        Some(Position {
            seq: seq + 1,
            index: 0,
        })
    }

    /// The step of `version` over `parent`: its rows as frames, lane by lane.
    async fn step(
        &self,
        store: &CorpusStore,
        parent: Option<&Manifest>,
        version: &str,
        m: &Manifest,
    ) -> asof_engine::Result<Step> {
        let counts = added_counts(parent, m);
        let (small, bulk): (LaneCounts, LaneCounts) = counts
            .into_iter()
            .partition(|(_, n)| *n <= self.inner.opts.max_step_events);
        let small_lanes: Vec<Lane> = small.iter().map(|(l, _)| *l).collect();
        let rows = if small_lanes.is_empty() {
            Vec::new()
        } else {
            added_rows(store, parent, m, &small_lanes).await?
        };
        let mut lanes: BTreeMap<Lane, Vec<Event>> = BTreeMap::new();
        for row in rows {
            // An event carries a record whose `available_at` is set (the spec's stream rule);
            // rows without one (EDGAR's daily-index rows) are read with /v1/news/diff.
            if row.available_at.is_none() {
                continue;
            }
            lanes
                .entry(row.lane)
                .or_default()
                .push(record_event(version, row));
        }
        for (lane, n) in bulk {
            lanes
                .entry(lane)
                .or_default()
                .push(bulk_event(version, m.parent.clone(), lane, n));
        }
        Ok(Step {
            version: version.to_owned(),
            parent: m.parent.clone(),
            created_at: m.created_at,
            lanes,
        })
    }
}

fn record_event(version: &str, row: NewsRow) -> Event {
    let revision_id = row.revision_id.clone();
    let source_id = row.source_id;
    let cik = row.cik.as_deref().and_then(asof_engine::normalize_cik);
    let at = row.available_at;
    let json =
        serde_json::to_string(&NewsRecord::from_row(row, false)).expect("a record serialises");
    Event {
        frame: Bytes::from(format!(
            "event: record\nid: {version}:{revision_id}\ndata: {json}\n\n"
        )),
        revision_id,
        source_id,
        cik,
        at,
        bulk: false,
    }
}

/// The data of a `bulk` event.
#[derive(Debug, Serialize)]
pub struct BulkNotice<'a> {
    pub corpus_version: &'a str,
    pub parent_version: Option<&'a str>,
    pub lane: Lane,
    pub rows_added: u64,
    pub message: &'static str,
}

fn bulk_event(version: &str, parent: Option<String>, lane: Lane, rows_added: u64) -> Event {
    let json = serde_json::to_string(&BulkNotice {
        corpus_version: version,
        parent_version: parent.as_deref(),
        lane,
        rows_added,
        message: "this version added more rows than the stream sends one by one; read them with /v1/news/diff (visible_by=committed_at) or /v1/files",
    })
    .expect("a notice serialises");
    Event {
        frame: Bytes::from(format!("event: bulk\nid: {version}:bulk\ndata: {json}\n\n")),
        revision_id: "bulk".into(),
        source_id: SourceId::SecEdgar,
        cik: None,
        at: None,
        bulk: true,
    }
}

/// Which events a connection sends (its ticker or CIK filter, decided by the route).
pub type EventFilter = Box<dyn Fn(&Event) -> bool + Send + Sync>;

/// Why [`Hub::connect`] opened no stream.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// The account already holds its open streams on this process.
    #[error("the account holds its {limit} open streams")]
    TooManyStreams { limit: usize },
    /// The process holds its streams: the rest of its connections are ordinary requests'.
    #[error("the server holds its {limit} open streams")]
    ServerFull { limit: usize },
    /// The corpus chain a `Last-Event-ID` replay reads could not be read.
    #[error("cannot read the corpus chain to replay: {0}")]
    Replay(#[from] asof_engine::Error),
}

impl Hub {
    /// Opens a stream of `lane` for the account `user_id`, from `last_event_id` (a replay,
    /// or a `reset` event and live when the id lies outside the replay window) or from now:
    /// the frames to send, a preamble first (the reconnect delay and the version served,
    /// `corpus_version`). The account's slot is held until the frames are dropped.
    pub async fn connect(
        &self,
        store: &CorpusStore,
        corpus_version: &str,
        user_id: &str,
        lane: Lane,
        last_event_id: Option<&str>,
        filter: EventFilter,
    ) -> Result<impl futures::Stream<Item = Bytes> + Send + use<>, Refused> {
        let slot = self
            .inner
            .open
            .try_take(user_id)
            .map_err(|full| match full {
                crate::state::slots::Full::Holder => Refused::TooManyStreams {
                    limit: self.options().max_per_user,
                },
                crate::state::slots::Full::Process => Refused::ServerFull {
                    limit: self.options().max_total,
                },
            })?;
        let mut pending = VecDeque::new();
        pending.push_back(Bytes::from(format!(
            "retry: 3000\n: asof stream of lane {lane}, corpus_version {corpus_version}\n\n"
        )));
        let head = self.head_receiver();
        let connected_head = *head.borrow();
        let start = match last_event_id {
            None => self.live_position(),
            Some(id) => match self.resume(store, id).await? {
                Resume::At(p) => p,
                Resume::Unavailable => {
                    let notice = ResetNotice {
                        code: "replay_unavailable",
                        message: "the last event id names a version outside the replay window (or not of this corpus); the stream continues live from here: read the gap with /v1/news/diff on visible_by=committed_at".into(),
                        last_event_id: id,
                        replay_window_seconds: self.options().replay_window.as_secs(),
                        corpus_version,
                    };
                    pending.push_back(Bytes::from(format!(
                        "event: reset\nid: {corpus_version}:reset\ndata: {}\n\n",
                        serde_json::to_string(&notice).expect("a notice serialises")
                    )));
                    self.live_position()
                }
            },
        };
        let conn = Conn {
            filter,
            lane,
            // A replaying client starts behind by its backlog; it is too slow only when it
            // falls further behind than that.
            allowed_lag: (connected_head - start.seq).max(0) as usize
                + self.options().max_lag_steps,
            pos: start,
            keep_alive_at: Clock::now() + self.options().keep_alive,
            shutdown: self.shutdown_receiver(),
            head,
            pending,
            done: false,
            hub: self.clone(),
            _slot: slot,
        };
        Ok(futures::stream::unfold(conn, |mut c| async move {
            let frame = c.next().await?;
            Some((frame, c))
        }))
    }
}

/// The data of a `reset` event.
#[derive(Debug, Serialize)]
struct ResetNotice<'a> {
    code: &'static str,
    message: String,
    last_event_id: &'a str,
    replay_window_seconds: u64,
    corpus_version: &'a str,
}

/// One open stream.
struct Conn {
    hub: Hub,
    filter: EventFilter,
    lane: Lane,
    pos: Position,
    allowed_lag: usize,
    head: watch::Receiver<i64>,
    shutdown: watch::Receiver<bool>,
    keep_alive_at: Clock,
    pending: VecDeque<Bytes>,
    done: bool,
    _slot: Slot,
}

impl Conn {
    /// The next frame to send; `None` ends the response.
    async fn next(&mut self) -> Option<Bytes> {
        loop {
            if let Some(f) = self.pending.pop_front() {
                return Some(f);
            }
            if self.done {
                return None;
            }
            if *self.shutdown.borrow() {
                closed("shutdown");
                return self.last(
                    ": the server is shutting down; reconnect with Last-Event-ID to resume\n\n",
                );
            }
            let head = *self.head.borrow_and_update();
            match self.hub.at(self.pos.seq) {
                At::Step(step, _) => {
                    if self.pos.index == 0
                        && usize::try_from(head - self.pos.seq).unwrap_or(0) > self.allowed_lag
                    {
                        tracing::info!(
                            behind = head - self.pos.seq,
                            "stream: closing a client too far behind"
                        );
                        closed("behind");
                        return self.last(": this client fell too far behind the stream and is disconnected; reconnect with Last-Event-ID to resume\n\n");
                    }
                    if let Some(events) = step.lanes.get(&self.lane) {
                        while let Some(e) = events.get(self.pos.index) {
                            self.pos.index += 1;
                            if (self.filter)(e) {
                                metrics::counter!(crate::obs::STREAM_EVENTS).increment(1);
                                self.keep_alive_at = Clock::now() + self.hub.options().keep_alive;
                                return Some(e.frame.clone());
                            }
                        }
                    }
                    self.pos = Position {
                        seq: self.pos.seq + 1,
                        index: 0,
                    };
                }
                At::Evicted => {
                    closed("evicted");
                    return self.last(": the stream's log no longer holds this client's position; reconnect with Last-Event-ID\n\n");
                }
                At::Head => {
                    tokio::select! {
                        changed = self.head.changed() => if changed.is_err() { self.done = true; },
                        _ = self.shutdown.changed() => {},
                        () = tokio::time::sleep_until(self.keep_alive_at) => {
                            self.keep_alive_at = Clock::now() + self.hub.options().keep_alive;
                            return Some(Bytes::from_static(b": keep-alive\n\n"));
                        }
                    }
                }
            }
        }
    }

    fn last(&mut self, comment: &'static str) -> Option<Bytes> {
        self.done = true;
        Some(Bytes::from_static(comment.as_bytes()))
    }
}

/// Counts a client the server disconnected, by why (`crate::obs`).
fn closed(reason: &'static str) {
    metrics::counter!(crate::obs::STREAM_CLOSED, "reason" => reason).increment(1);
}

/// One of a key's stream slots; given back when the stream ends (dropped with its body).
pub type Slot = KeySlot;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_id_is_a_corpus_version_and_a_revision() {
        let v = format!("sha256:{}", "a".repeat(64));
        assert_eq!(
            parse_event_id(&format!("{v}:rev_0123abcd")),
            Ok((v.as_str(), "rev_0123abcd"))
        );
        assert_eq!(
            parse_event_id(&format!("{v}:bulk")),
            Ok((v.as_str(), "bulk"))
        );
        for bad in [
            "",
            "rev_1",
            "sha256:abc:rev_1",
            &format!("{v}:"),
            &format!("{v}:rev 1"),
            &format!("sha1:{}:rev_1", "a".repeat(64)),
        ] {
            assert_eq!(parse_event_id(bad), Err(BadEventId), "{bad}");
        }
    }

    #[test]
    fn an_account_holds_at_most_its_stream_slots_and_gets_them_back_when_streams_end() {
        let hub = Hub::new(
            "sha256:0",
            StreamOptions {
                max_per_user: 2,
                ..StreamOptions::default()
            },
        );
        let a = hub.open_slot("k1").unwrap();
        let _b = hub.open_slot("k1").unwrap();
        assert!(hub.open_slot("k1").is_none());
        assert!(
            hub.open_slot("k2").is_some(),
            "another account has its own slots"
        );
        drop(a);
        let c = hub.open_slot("k1");
        assert!(c.is_some());
        assert_eq!(hub.open_streams(), 2);
        drop((c, _b));
        assert_eq!(hub.open_streams(), 0);
    }
}
