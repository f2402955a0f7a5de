//! `GET /v1/stream`: new records as server-sent events, read from the shared log of
//! `crate::stream` at the connection's own position.
//!
//! The route reads the request (filters, `Last-Event-ID`) and answers the frames
//! `Hub::connect` gives; a connection's state machine lives beside the log it reads. A
//! connection is cheap on purpose: its state is a position in the log, its filters and a
//! stream slot of its key; the frames it sends are the log's own `Bytes`. It never holds a
//! lock while it waits for the client, so a client that stops reading slows nobody.

use std::convert::Infallible;

use asof_engine::{Entity, Lane, normalize_cik};
use axum::body::Body;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::IntoResponse;
use bytes::Bytes;
use futures::StreamExt;

use crate::error::ApiError;
use crate::http::params::{self, Cik, Q, Ticker, query};
use crate::http::response::X_CORPUS_VERSION;
use crate::http::stream::{Event, Refused, parse_event_id};
use crate::http::{AppState, Caller, Ctx, Reply};

query! {
    /// Query of `GET /v1/stream`.
    pub struct StreamParams {
        /// Only records of this SEC filer's ticker, resolved to CIKs through the identity
        /// intervals valid at each record's `available_at` (a ticker that moves to another
        /// filer follows the identity, not today's ticker file). Where the identity does not
        /// reach a record's instant (an identity hole, 409 on `/v1/news`) the ticker matches
        /// nothing: filter a live stream by `cik`. Send `ticker` or `cik`, not both; with
        /// neither, every record of the lane.
        #[param(inline)]
        pub ticker: Option<Ticker>,
        /// Only records of this SEC filer (CIK, with or without leading zeros).
        #[param(inline)]
        pub cik: Option<Cik>,
        /// The lane whose new records are sent. Default `forward_first_seen`: filings as the
        /// poller first saw them in EDGAR's current-filings feed, `available_at` at the fetch
        /// minute.
        #[param(inline, required = false, default = "forward_first_seen")]
        pub lane: Option<Lane>,
    }
}

/// New records as server-sent events (`text/event-stream`).
///
/// Each `record` event's `data` is one news record, the same JSON `/v1/news` answers for the
/// row, with `available_at` set; records without `available_at` (EDGAR daily-index rows of
/// `certified_pit`) are not streamed. Events come from the rows each corpus version adds, as
/// the server loads it (within `--reload-interval`, default 1 s, of a publish), ordered by
/// version, then `available_at`, `id`, `revision_id`.
///
/// **Event ids** are `<corpus_version>:<revision_id>`: the same on every replica and after
/// every reload. **Resuming**: send the last id received in `Last-Event-ID` (browsers'
/// `EventSource` does it on reconnect) and the stream first replays every event after it, then
/// continues live. Replay reaches back over versions published in the last 24 hours (at most
/// 2,880 versions); for an id older than that, or not of this corpus, the stream opens with a
/// `reset` event (`data.code = replay_unavailable`) and continues live: read the gap with
/// `/v1/news/diff` on `visible_by=committed_at`.
///
/// **Other events**: `bulk` when a version adds more than 20,000 rows to the lane (a backfill):
/// one notice with `rows_added` instead of the rows. **Comments**: `: keep-alive` every 15 s
/// while idle; a last comment saying why before the server closes a stream (shutdown, or a
/// client more than 64 versions behind; reconnect with `Last-Event-ID` to resume).
///
/// **Limits**: opening a stream counts as one request against the account's rate limit; an
/// account may hold 4 streams open per server process, whichever of its keys opened them, and
/// a server process holds at most 1,536 streams in all (`--max-streams`, kept below its
/// connection limit so ordinary requests always find a connection); beyond either,
/// `429 too_many_streams` with `Retry-After`. Streams are never audit-receipted (counted
/// `skipped`).
#[utoipa::path(get, path = "/v1/stream", tag = "data", operation_id = "stream",
    params(
        StreamParams,
        ("Last-Event-ID" = Option<String>, Header,
            description = "The `id` of the last event received (`<corpus_version>:<revision_id>`): the stream replays what came after it. Malformed: 400.")
    ),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "An open event stream: `record`, `bulk` and `reset` events and keep-alive comments (see above).",
            content_type = "text/event-stream", body = String),
        (status = 429, description = "`rate_limited`: the key's one-minute window is spent; or `too_many_streams`: the account already holds its open streams on this server (4), or the server holds its total (its remaining connections are kept for ordinary requests; another replica may have room). Retry after `Retry-After` seconds."),
    ))]
pub(crate) async fn stream(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Q(p): Q<StreamParams>,
) -> Reply {
    let entity = params::entity(&p.ticker, &p.cik)?;
    let lane = p.lane.unwrap_or(Lane::ForwardFirstSeen);
    let last_id = match headers.get("last-event-id") {
        None => None,
        Some(v) => {
            let id = v.to_str().ok().filter(|s| parse_event_id(s).is_ok()).ok_or_else(|| {
                ApiError::invalid(
                    "Last-Event-ID",
                    "Last-Event-ID must be an event id this stream sent: <corpus_version>:<revision_id>",
                )
            })?;
            Some(id.to_owned())
        }
    };
    let filter = Filter {
        entity,
        state: state.clone(),
    };
    let frames = state
        .stream()
        .connect(
            ctx.corpus.store(),
            ctx.corpus.version(),
            &caller.user.id,
            lane,
            last_id.as_deref(),
            Box::new(move |e: &Event| filter.matches(e)),
        )
        .await
        .map_err(|e| match e {
            Refused::TooManyStreams { limit } => ApiError::TooManyStreams { limit },
            Refused::ServerFull { limit } => ApiError::StreamsFull { limit },
            Refused::Replay(e) => {
                tracing::error!(error = %e, "stream: cannot read the corpus chain to replay");
                ApiError::INTERNAL
            }
        })?;
    let body = frames.map(Ok::<Bytes, Infallible>);
    let mut res = (StatusCode::OK, Body::from_stream(body)).into_response();
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, no-store"),
    );
    // Proxies (nginx) must pass events through as they come.
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    h.insert(
        &X_CORPUS_VERSION,
        HeaderValue::from_str(ctx.corpus.version()).expect("version is a header value"),
    );
    Ok(res)
}

struct Filter {
    entity: Entity,
    state: AppState,
}

impl Filter {
    fn matches(&self, e: &Event) -> bool {
        if e.bulk {
            return true;
        }
        match &self.entity {
            Entity::All => true,
            Entity::Cik(c) => e.cik.as_deref() == normalize_cik(c).as_deref(),
            Entity::Ticker(t) => {
                let (Some(cik), Some(at)) = (&e.cik, e.at) else {
                    return false;
                };
                self.state
                    .corpus()
                    .identity()
                    .ticker_at(t, at)
                    .iter()
                    .any(|m| normalize_cik(&m.cik).as_ref() == Some(cik))
            }
        }
    }
}
