//! The bring-your-own-key connector: `POST /v1/connectors/{vendor}/bars` (Desk plan) fetches
//! daily bars from the caller's own market-data vendor with the caller's own vendor key
//! (`X-Vendor-Key`), used for that one call and never kept, and answers them normalised with
//! their `origin` and `cached: false`.

use asof_engine::{Day, Instant};
use axum::extract::{Extension, FromRequest, Path, State};
use axum::http::HeaderMap;
use axum::response::IntoResponse;

use crate::connector::{Bar, BarsRequest, Vendor, VendorKey};
use crate::error::ApiError;
use crate::http::body::{FromJson, Json, boolean, required_string};
use crate::http::envelope::{Envelope, Origin};
use crate::http::params::{NoQuery, Q, ticker};
use crate::http::{AppState, Caller, Ctx, Reply, ok};

/// Body of `POST /v1/connectors/{vendor}/bars`.
#[derive(Debug, Clone, utoipa::ToSchema)]
pub struct BarsBody {
    /// 1 to 16 letters, digits, `.` or `-` (matched case-insensitively), as the vendor lists
    /// it, beginning with a letter or digit (it becomes a segment of the vendor's URL path, where
    /// `.` and `..` would name another path).
    #[schema(
        min_length = 1,
        max_length = 16,
        pattern = r"^[A-Za-z0-9][A-Za-z0-9.\-]{0,15}$",
        example = "AAPL"
    )]
    pub ticker: String,
    /// First trading day wanted (`YYYY-MM-DD`).
    #[schema(value_type = String, format = Date, example = "2024-01-02")]
    pub start: Day,
    /// Last trading day wanted (`YYYY-MM-DD`). Days after today hold no bars yet; a range that
    /// ends before it starts holds none (an empty answer, without a vendor call).
    #[schema(value_type = String, format = Date, example = "2024-03-28")]
    pub end: Day,
    /// Split- and dividend-adjusted prices; default true.
    #[schema(default = true)]
    pub adjusted: Option<bool>,
}

impl FromJson for BarsBody {
    const FIELDS: &'static [&'static str] = &["ticker", "start", "end", "adjusted"];
    fn from_object(o: &serde_json::Map<String, serde_json::Value>) -> Result<Self, ApiError> {
        let t = ticker(
            &required_string(o, "ticker", "the symbol, e.g. AAPL")?,
            "ticker",
        )?;
        if !crate::connector::is_path_segment(&t) {
            return Err(ApiError::invalid(
                "ticker",
                format!("ticker must begin with a letter or digit; got {t:?}"),
            ));
        }
        let day = |name: &str| -> Result<Day, ApiError> {
            let s = required_string(o, name, "a date, YYYY-MM-DD")?;
            Day::parse_param(name, &s).map_err(|_| {
                ApiError::invalid(
                    name,
                    format!("{name} must be a date, YYYY-MM-DD; got {s:?}"),
                )
            })
        };
        let (start, end) = (day("start")?, day("end")?);
        Ok(BarsBody {
            ticker: t,
            start,
            end,
            adjusted: boolean(o, "adjusted")?,
        })
    }
}

/// Daily bars of one ticker from the caller's own vendor, with the caller's own vendor key.
///
/// Desk plan. `X-Vendor-Key` is used for this one upstream call and never stored, logged,
/// receipted or echoed. The answer: bars sorted by date, `origin` (vendor, fetch time,
/// license class) and `cached: false` (`Cache-Control: no-store`). Errors: `400` for the path's
/// vendor, a missing `X-Vendor-Key` or a body field (`param` names it); `403 vendor_refused`
/// when the vendor refuses the key; `404` when the vendor has no such ticker; `429
/// vendor_rate_limited` with the vendor's `Retry-After`, or `too_many_connector_calls` when the
/// key already has 4 calls in flight; `502 vendor_error` for a vendor timeout, failure or an
/// answer out of shape (never a partial answer); `503 connector_not_configured`.
#[utoipa::path(post, path = "/v1/connectors/{vendor}/bars", tag = "connector", operation_id = "connector_bars",
    params(
        NoQuery,
        ("vendor" = inline(Vendor), Path, description = "`vendor_a` (an aggregates API) or `vendor_b` (a daily-prices API)."),
        ("X-Vendor-Key" = String, Header, pattern = "^[!-~]{1,512}$", description = "Your own credential with this vendor (1 to 512 visible ASCII characters, no spaces): used for this one call, never stored, logged or echoed."),
    ),
    request_body(content = BarsBody, content_type = "application/json"),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "`results`: the bars, by date; `origin` and `cached: false` beside them.", body = Envelope<Bar>),
        (status = 404, description = "`not_found`: the vendor has no daily bars for this ticker."),
        (status = 502, description = "`vendor_error`: the vendor timed out, failed or answered out of shape."),
    ))]
pub(crate) async fn bars(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    Extension(caller): Extension<Caller>,
    Path(vendor): Path<String>,
    headers: HeaderMap,
    Q(_): Q<NoQuery>,
    body: axum::extract::Request,
) -> Reply {
    let vendor = Vendor::parse(&vendor)
        .ok_or_else(|| ApiError::invalid("vendor", "vendor must be vendor_a or vendor_b"))?;
    let key = VendorKey::parse(headers.get("x-vendor-key"))?;
    let Json(b) = Json::<BarsBody>::from_request(body, &()).await?;
    let req = BarsRequest {
        ticker: b.ticker,
        start: b.start,
        end: b.end,
        adjusted: b.adjusted.unwrap_or(true),
    };
    let connector = state.connector();
    let cfg = connector.vendor(vendor)?;
    let _slot = connector.slot(&caller.key.id)?;
    let bars = connector.bars(vendor, &key, &req).await?;
    drop(key);
    let origin = Origin {
        vendor: vendor.as_str().to_owned(),
        fetched_at: Instant::now(),
        license_class: cfg.license_class.clone(),
    };
    Ok(ok(&ctx, bars).origin(origin).into_response())
}
