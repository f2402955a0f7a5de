//! Hostile request heads and bodies through the router (oneshot): every refusal is the
//! service's error envelope with its own code, and nothing the client sends past a limit is
//! read or echoed.

mod common;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use common::{assert_error, respond, setup};
use serde_json::Value;

fn beacon(body: impl Into<Body>) -> Request<Body> {
    Request::builder()
        .method(Method::POST)
        .uri("/site/beacon")
        .header(header::CONTENT_TYPE, "application/json")
        .body(body.into())
        .unwrap()
}

#[tokio::test]
async fn a_request_target_past_8_kib_is_414_uri_too_long_with_the_envelope() {
    let t = setup().await;
    let uri = format!("/v1/news?cik=320193&x={}", "a".repeat(9000));
    let r = respond(&t, Request::get(&uri).body(Body::empty()).unwrap()).await;
    assert_error(&r, StatusCode::URI_TOO_LONG, "uri_too_long", None);
    assert!(
        !String::from_utf8_lossy(&r.bytes).contains("aaaa"),
        "the target is not echoed"
    );
}

#[tokio::test]
async fn a_200_kb_header_or_a_hundred_and_one_fields_is_431_headers_too_large() {
    let t = setup().await;
    let big = Request::get("/v1/news?cik=320193")
        .header(header::COOKIE, "c".repeat(200 * 1024))
        .body(Body::empty())
        .unwrap();
    let r = respond(&t, big).await;
    assert_error(
        &r,
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        "headers_too_large",
        None,
    );
    let mut many = Request::get("/health");
    for i in 0..101 {
        many = many.header(format!("x-f{i}"), "v");
    }
    let r = respond(&t, many.body(Body::empty()).unwrap()).await;
    assert_error(
        &r,
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        "headers_too_large",
        None,
    );
}

#[tokio::test]
async fn a_huge_authorization_header_is_refused_before_any_credential_check() {
    let t = setup().await;
    let r = respond(
        &t,
        Request::get("/v1/news?cik=320193")
            .header(
                header::AUTHORIZATION,
                format!("Bearer {}", "k".repeat(40_000)),
            )
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_error(
        &r,
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        "headers_too_large",
        None,
    );
}

#[tokio::test]
async fn a_body_past_the_limit_is_413_payload_too_large_whatever_content_length_says() {
    let t = setup().await;
    let big = format!(r#"{{"path": "/{}"}}"#, "p".repeat(20_000));
    let r = respond(&t, beacon(big.clone())).await;
    assert_error(
        &r,
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        Some("body"),
    );
    // A body that claims to be small but is not is cut at the limit all the same.
    let mut lying = beacon(big);
    lying
        .headers_mut()
        .insert(header::CONTENT_LENGTH, "10".parse().unwrap());
    let r = respond(&t, lying).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", r.json);
    // A body at the limit is read (and refused only for what it says).
    let r = respond(&t, beacon(r#"{"path": "/"}"#)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
}

#[tokio::test]
async fn deeply_nested_or_malformed_json_bodies_are_400_invalid_request_never_a_crash() {
    let t = setup().await;
    let cases: Vec<String> = vec![
        // Deeper than serde_json's recursion limit, inside the size limit.
        format!("{}{}", "[".repeat(5000), "]".repeat(5000)),
        format!(
            r#"{{"path": {}1{}}}"#,
            "{\"a\":".repeat(2000),
            "}".repeat(2000)
        ),
        "{\"path\": \"/\"".into(),
        "\u{0}\u{1}".into(),
        "[]".into(),
        r#"{"path": 1e999999}"#.into(),
        r#"{"path": "/", "path": "/x", "extra": true}"#.into(),
    ];
    for body in cases {
        let r = respond(&t, beacon(body.clone())).await;
        assert_eq!(
            r.status,
            StatusCode::BAD_REQUEST,
            "{}: {}",
            &body[..body.len().min(40)],
            r.json
        );
        assert_eq!(r.json["error"]["code"], "invalid_request");
        assert_eq!(r.json["count"], Value::Null);
    }
}
