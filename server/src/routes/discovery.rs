//! Discovery and public routes: `/health`, `/ready`, `/v1/meta`, and the description as JSON, YAML,
//! HTML (`/docs`) and Markdown (`/llms.txt`), each rendered once per corpus version.

use axum::extract::{Extension, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::IntoResponse;
use bytes::Bytes;
use serde::Serialize;

use asof_engine::Instant;

use crate::http::envelope::Envelope;
use crate::http::params::{NoQuery, Q};
use crate::http::response::{CacheKind, PerVersion, per_version};
use crate::http::state::SampleTier;
use crate::http::{AppState, Ctx, Reply, ok};
use crate::openapi::render::Rendered;
use crate::routes::meta::MetaRecord;

/// `results[0]` of `/health`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Health {
    ok: bool,
    /// The corpus version this process serves now.
    corpus_version: String,
    /// When that version was published.
    corpus_created_at: Instant,
}

/// Liveness and the corpus version this process serves.
#[utoipa::path(get, path = "/health", tag = "discovery", operation_id = "health",
    responses((status = 200, description = "The process is up; `results[0]` is the health record.", body = Envelope<Health>)))]
pub(crate) async fn health(Extension(ctx): Extension<Ctx>, Q(_): Q<NoQuery>) -> Reply {
    Ok(per_version(&ctx, &HEALTH, |ctx| {
        let h = Health {
            ok: true,
            corpus_version: ctx.corpus.version().to_owned(),
            corpus_created_at: ctx.corpus.manifest().created_at,
        };
        ok(ctx, vec![h])
    }))
}

thread_local! {
    /// `/health`'s answer on the version this thread last served.
    static HEALTH: PerVersion = const { PerVersion::new() };
}

/// `results[0]` of `/ready`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Ready {
    ready: bool,
    /// The corpus version this replica serves now.
    corpus_version: String,
    /// The state store's backend (`sqlite` or `postgres`), which answered.
    state: &'static str,
}

/// Readiness for traffic, for load balancers (not under `/v1`, outside the contract's routes).
///
/// `200` when this replica should be sent requests: its corpus is loaded and its state store
/// answers (asked at most once a second, however often this is called). `503 not_ready` while
/// the corpus is still loading (then with `corpus_version` empty), while the replica drains
/// after `SIGTERM` (it keeps answering every other request until its drain delay ends, so a
/// balancer polling this stops sending first), and while the state store does not answer.
/// `/health` says only that the process is up; a balancer's health check should use this.
#[utoipa::path(get, path = "/ready", tag = "discovery", operation_id = "ready",
    responses(
        (status = 200, description = "Ready for traffic; `results[0]` says which version and state store.", body = Envelope<Ready>),
        (status = 503, description = "`not_ready`: starting, draining, or the state store does not answer; the message says which.", body = crate::http::envelope::ErrorEnvelope)))]
pub(crate) async fn ready(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    Q(_): Q<NoQuery>,
) -> Reply {
    state.readiness().check(state.store().as_ref()).await?;
    let r = Ready {
        ready: true,
        corpus_version: ctx.corpus.version().to_owned(),
        state: state.store().backend(),
    };
    Ok(ok(&ctx, vec![r]).into_response())
}

/// Vocabularies, plans, limits, and the corpus: held sources with their certified spans.
///
/// The authority on which sources this deployment holds and which days each certifies.
#[utoipa::path(get, path = "/v1/meta", tag = "discovery", operation_id = "meta",
    params(asof_answer::data::MetaParams),
    responses((status = 200, description = "`results[0]` is the meta record.", body = Envelope<MetaRecord>)))]
pub(crate) async fn meta(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    sample: Option<Extension<SampleTier>>,
    Q(_): Q<asof_answer::data::MetaParams>,
) -> Reply {
    // The keyless MCP tier answers from the sample, and says so.
    meta_answer(&state, &ctx, sample.is_some())
}

/// The answer of `/v1/meta`: the deployment's public allowance and retention.
pub(crate) fn meta_answer(state: &AppState, ctx: &Ctx, sample: bool) -> Reply {
    let plans = crate::routes::meta::plans(super::TABLE);
    let record = crate::routes::meta::meta_record(
        &ctx.corpus,
        plans,
        state.public_requests_per_minute(),
        Some(state.versions().retention()),
    );
    Ok(ok(ctx, vec![record]).sample(sample).into_response())
}

/// Answers one rendering of the description for the request's corpus version. The
/// discovery routes take no parameters; `pick` chooses the rendering and its content type.
fn document(state: &AppState, ctx: &Ctx, pick: fn(&Rendered) -> (&'static str, &Bytes)) -> Reply {
    let rendered = state.per_version(&ctx.corpus, |c| Rendered::new(c, super::TABLE));
    let (content_type, body) = pick(&rendered);
    let mut r = (
        StatusCode::OK,
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        body.clone(),
    )
        .into_response();
    // Immutable for this corpus version; the route's kind gives it a body ETag and 304s.
    r.extensions_mut().insert(CacheKind::Historical);
    Ok(r)
}

/// The machine-readable description (OpenAPI 3.1, version 0.1.0) as JSON.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "discovery", operation_id = "openapi_json",
    responses((status = 200, description = "This description.", content_type = "application/json", body = Object)))]
pub(crate) async fn openapi_json(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    Q(_): Q<NoQuery>,
) -> Reply {
    document(&state, &ctx, |r| ("application/json", &r.json))
}

/// The same description as YAML.
#[utoipa::path(get, path = "/v1/openapi.yaml", tag = "discovery", operation_id = "openapi_yaml",
    responses((status = 200, description = "This description, as YAML.", content_type = "application/yaml", body = Object)))]
pub(crate) async fn openapi_yaml(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    Q(_): Q<NoQuery>,
) -> Reply {
    document(&state, &ctx, |r| ("application/yaml", &r.yaml))
}

/// A self-contained HTML reference: the as-of model, then every route with its parameters,
/// an example and its errors, then the schemas.
#[utoipa::path(get, path = "/docs", tag = "discovery", operation_id = "docs",
    responses((status = 200, description = "HTML API reference; works offline.", content_type = "text/html", body = String)))]
pub(crate) async fn docs(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    Q(_): Q<NoQuery>,
) -> Reply {
    document(&state, &ctx, |r| ("text/html; charset=utf-8", &r.html))
}

/// A Markdown index for language-model agents.
#[utoipa::path(get, path = "/llms.txt", tag = "discovery", operation_id = "llms_txt",
    responses((status = 200, description = "Markdown index: the API, the clocks, the routes, MCP, the license.", content_type = "text/markdown", body = String)))]
pub(crate) async fn llms_txt(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    Q(_): Q<NoQuery>,
) -> Reply {
    document(&state, &ctx, |r| ("text/markdown; charset=utf-8", &r.llms))
}
