//! One test suite for the `StateStore` trait, run against SQLite and against PostgreSQL
//! (`ASOF_TEST_POSTGRES_URL`, default postgres://postgres@127.0.0.1:5432/test). Without a
//! reachable server the PostgreSQL test prints that it is SKIPPED, by name.

mod common;

use std::sync::Arc;

use common::backends::PgSchema;

use asof_engine::Instant;
use asof_server::plan::Plan;
use asof_server::state::store::{
    self, Identity, IdentitySignIn, LinkState, SignInLink, StateStore, StoredReceipt, UsageCount,
    hash_key,
};
use asof_server::state::{BillingEffect, BillingEvent, BillingOutcome};

async fn suite(s: Arc<dyn StateStore>) {
    let u = s
        .upsert_user("a@example.com", Plan::Researcher)
        .await
        .unwrap();
    assert_eq!(
        s.upsert_user("a@example.com", Plan::Desk).await.unwrap().id,
        u.id,
        "same user"
    );
    let (k, raw) = s.create_key(&u.id, "laptop", None).await.unwrap();
    assert!(raw.starts_with("svc_live_") && raw.starts_with(&k.prefix));
    let (found, owner) = s.key_by_hash(&hash_key(&raw)).await.unwrap().unwrap();
    assert_eq!((found.id.clone(), owner.plan), (k.id.clone(), Plan::Desk));
    assert!(
        s.key_by_hash(&hash_key("svc_live_other"))
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(s.list_keys(&u.id).await.unwrap().len(), 1);
    assert_eq!(s.list_keys(&u.id).await.unwrap()[0].last_used_at, None);
    s.keys_used(std::slice::from_ref(&k.id), Instant::from_micros(2_000))
        .await
        .unwrap();
    s.keys_used(std::slice::from_ref(&k.id), Instant::from_micros(1_000))
        .await
        .unwrap();
    assert_eq!(
        s.list_keys(&u.id).await.unwrap()[0].last_used_at,
        Some(Instant::from_micros(2_000)),
        "last use never moves back"
    );
    assert!(
        !s.revoke_key("usr_someone_else", &k.id, Instant::now())
            .await
            .unwrap()
    );
    assert!(s.revoke_key(&u.id, &k.id, Instant::now()).await.unwrap());
    assert!(
        s.key_by_hash(&hash_key(&raw))
            .await
            .unwrap()
            .unwrap()
            .0
            .revoked_at
            .is_some()
    );
    let a = s.secret("cursor_hmac").await.unwrap();
    assert_eq!(
        s.secret("cursor_hmac").await.unwrap(),
        a,
        "a secret is created once"
    );
    assert_eq!(s.hit("key:x", 60_000_000).await.unwrap(), 1);
    assert_eq!(s.hit("key:x", 60_000_000).await.unwrap(), 2);
    assert_eq!(
        s.hit_n("key:x", 60_000_000, 5).await.unwrap(),
        7,
        "a replica's flush adds what it counted"
    );
    assert_eq!(s.hit_n("key:y", 60_000_000, 3).await.unwrap(), 3);
    assert_eq!(
        s.hit("key:x", 120_000_000).await.unwrap(),
        1,
        "a new window starts at one"
    );
    // A replica's flush: many windows in one batch, each new count answered.
    assert_eq!(s.hit_many(&[]).await.unwrap(), []);
    let mut batch: Vec<(String, i64, i64)> = vec![
        ("key:x".into(), 60_000_000, 3),
        ("key:z".into(), 60_000_000, 4),
    ];
    batch.extend((0..2_500).map(|i| (format!("ip:{i}"), 60_000_000, 1)));
    let mut counts = s.hit_many(&batch).await.unwrap();
    counts.sort();
    assert_eq!(counts.len(), 2_502);
    assert!(
        counts.contains(&("key:x".into(), 60_000_000, 10)),
        "added to the held count"
    );
    assert!(
        counts.contains(&("key:z".into(), 60_000_000, 4)),
        "a new window starts at n"
    );
    assert_eq!(s.hit_n("ip:2499", 60_000_000, 0).await.unwrap(), 1);
    assert_eq!(s.purge_windows(120_000_000).await.unwrap(), 2_503);
    concurrent_batches(s.clone()).await;
    receipts(&*s, &u.id).await;
    sign_ins(&*s).await;
    billing(s.clone()).await;
    key_cap_under_concurrency(s.clone()).await;
    identity_sign_ins_beside_other_writers(s.clone()).await;
}

/// First provider sign-ins (a read, then writes, in one transaction) while other requests
/// write rate windows: none fails. A transaction that starts reading and only later writes
/// is refused by SQLite at once (no busy wait) when another writer committed in between,
/// which a signing-in user saw as a 500.
async fn identity_sign_ins_beside_other_writers(s: Arc<dyn StateStore>) {
    const USERS: usize = 24;
    let writer = {
        let s = s.clone();
        tokio::spawn(async move {
            for i in 0..400 {
                s.hit_n(&format!("key:w{}", i % 7), 240_000_000, 1)
                    .await
                    .unwrap();
            }
        })
    };
    let signers: Vec<_> = (0..USERS)
        .map(|i| {
            let s = s.clone();
            tokio::spawn(async move {
                let who = Identity {
                    issuer: "https://race.example".into(),
                    subject: format!("sub-{i}"),
                };
                let email = format!("race{i}@example.com");
                match s
                    .identity_sign_in(&who, &email, Instant::from_micros(1))
                    .await
                {
                    Ok(IdentitySignIn::New(u)) => u.email,
                    other => panic!("sign-in {i}: {other:?}"),
                }
            })
        })
        .collect();
    let mut made = Vec::new();
    for t in signers {
        made.push(t.await.unwrap());
    }
    writer.await.unwrap();
    made.sort();
    made.dedup();
    assert_eq!(made.len(), USERS);
}

/// Twenty requests at once for a user holding one live key under a cap of three: exactly two
/// more keys are made, whatever the interleaving (the check and the insert are one
/// transaction); revoked and expired keys do not count.
async fn key_cap_under_concurrency(s: Arc<dyn StateStore>) {
    let u = s
        .upsert_user("capped@example.com", Plan::Researcher)
        .await
        .unwrap();
    let now = Instant::now();
    let (gone, _) = s.create_key(&u.id, "revoked", None).await.unwrap();
    s.revoke_key(&u.id, &gone.id, now).await.unwrap();
    s.create_key(
        &u.id,
        "expired",
        Some(Instant::from_micros(now.micros() - 1)),
    )
    .await
    .unwrap();
    s.create_key(&u.id, "live", None).await.unwrap();
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let (s, id) = (s.clone(), u.id.clone());
            tokio::spawn(async move {
                s.create_key_within(&id, &format!("k{i}"), None, 3, now)
                    .await
                    .unwrap()
                    .is_some()
            })
        })
        .collect();
    let mut made = 0;
    for t in tasks {
        made += usize::from(t.await.unwrap());
    }
    assert_eq!(made, 2, "two places were free under the cap of three");
    let live = s
        .list_keys(&u.id)
        .await
        .unwrap()
        .iter()
        .filter(|k| k.revoked_at.is_none() && k.expires_at.is_none_or(|e| e > now))
        .count();
    assert_eq!(live, 3);
}

/// Two replicas flushing at once, with the same windows and counters in opposite orders:
/// every batch is written (none refused as a deadlock) and every count lands.
async fn concurrent_batches(s: Arc<dyn StateStore>) {
    const ROUNDS: i64 = 10;
    let hits: Vec<(String, i64, i64)> = (0..300)
        .map(|i| (format!("key:c{i:03}"), 180_000_000, 1))
        .collect();
    let usage: Vec<UsageCount> = (0..300)
        .map(|i| UsageCount {
            user_id: "usr_c".into(),
            key_id: format!("key_c{i:03}"),
            day: "2026-11-04".into(),
            route_group: "news".into(),
            requests: 1,
        })
        .collect();
    let replica = |reversed: bool| {
        let (s, mut hits, mut usage) = (s.clone(), hits.clone(), usage.clone());
        if reversed {
            hits.reverse();
            usage.reverse();
        }
        tokio::spawn(async move {
            for _ in 0..ROUNDS {
                s.hit_many(&hits).await.unwrap();
                s.add_usage(&usage).await.unwrap();
            }
        })
    };
    let (a, b) = (replica(false), replica(true));
    a.await.unwrap();
    b.await.unwrap();
    assert_eq!(
        s.hit_n("key:c000", 180_000_000, 0).await.unwrap(),
        2 * ROUNDS
    );
    assert_eq!(
        s.hit_n("key:c299", 180_000_000, 0).await.unwrap(),
        2 * ROUNDS
    );
    let got = s.usage("usr_c", "2026-11-04", "2026-11-04").await.unwrap();
    assert_eq!(got.len(), 300);
    assert!(got.iter().all(|(_, _, _, n)| *n == 2 * ROUNDS), "{got:?}");
}

fn event(id: &str, created: i64, effect: Result<BillingEffect, &'static str>) -> BillingEvent {
    BillingEvent {
        id: id.into(),
        kind: "customer.subscription.updated".into(),
        created,
        received_at: Instant::now().micros(),
        effect,
    }
}

fn effect(customer: &str, sub: &str, status: &str, plan: Option<Plan>) -> BillingEffect {
    BillingEffect {
        customer: customer.into(),
        user_hint: None,
        subscription: Some(sub.into()),
        status: status.into(),
        plan,
        starts_subscription: false,
    }
}

/// Attestations, customers, and notifications applied once each (also when racing), in
/// order, to the user's own subscription, with the history of plan changes.
async fn billing(s: Arc<dyn StateStore>) {
    let u = s.sign_in_user("payer@example.com").await.unwrap();
    assert_eq!(u.plan, Plan::Researcher);
    let a = s
        .record_attestation(&u.id, Plan::Power, "v1", "abc", Instant::from_micros(5))
        .await
        .unwrap();
    assert_eq!(s.attestations(&u.id).await.unwrap(), vec![a]);
    assert_eq!(s.billing_customer(&u.id).await.unwrap(), None);
    assert_eq!(
        s.put_billing_customer(&u.id, "cus_1", Instant::now())
            .await
            .unwrap(),
        "cus_1"
    );
    assert_eq!(
        s.put_billing_customer(&u.id, "cus_2", Instant::now())
            .await
            .unwrap(),
        "cus_1",
        "the first customer kept wins"
    );

    // Eight deliveries of one event at once: exactly one applies it.
    let e = event(
        "evt_race",
        100,
        Ok(effect("cus_1", "sub_1", "active", Some(Plan::Power))),
    );
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (s, e) = (s.clone(), e.clone());
            tokio::spawn(async move { s.apply_billing_event(&e).await.unwrap() })
        })
        .collect();
    let mut outcomes = Vec::new();
    for t in tasks {
        outcomes.push(t.await.unwrap());
    }
    let applied: Vec<_> = outcomes
        .iter()
        .filter(|o| matches!(o, BillingOutcome::Applied { .. }))
        .collect();
    assert_eq!(applied.len(), 1, "{outcomes:?}");
    assert_eq!(
        *applied[0],
        BillingOutcome::Applied {
            user_id: u.id.clone(),
            plan: Plan::Power,
            changed: true
        }
    );
    assert_eq!(
        outcomes
            .iter()
            .filter(|o| **o == BillingOutcome::Replayed)
            .count(),
        7
    );
    assert_eq!(
        s.sign_in_user("payer@example.com").await.unwrap().plan,
        Plan::Power
    );

    // Past-due keeps the plan; an older event and another subscription change nothing.
    let o = s
        .apply_billing_event(&event(
            "evt_due",
            200,
            Ok(effect("cus_1", "sub_1", "past_due", None)),
        ))
        .await
        .unwrap();
    assert_eq!(
        o,
        BillingOutcome::Applied {
            user_id: u.id.clone(),
            plan: Plan::Power,
            changed: false
        }
    );
    let o = s
        .apply_billing_event(&event(
            "evt_old",
            150,
            Ok(effect("cus_1", "sub_1", "canceled", Some(Plan::Researcher))),
        ))
        .await
        .unwrap();
    assert!(matches!(o, BillingOutcome::Ignored(_)), "{o:?}");
    let o = s
        .apply_billing_event(&event(
            "evt_other",
            300,
            Ok(effect("cus_1", "sub_9", "canceled", Some(Plan::Researcher))),
        ))
        .await
        .unwrap();
    assert!(matches!(o, BillingOutcome::Ignored(_)), "{o:?}");
    let o = s
        .apply_billing_event(&event(
            "evt_nobody",
            300,
            Ok(effect(
                "cus_nobody",
                "sub_1",
                "canceled",
                Some(Plan::Researcher),
            )),
        ))
        .await
        .unwrap();
    assert!(matches!(o, BillingOutcome::Ignored(_)), "{o:?}");
    let o = s
        .apply_billing_event(&event(
            "evt_noop",
            300,
            Err("an event type this service does not act on"),
        ))
        .await
        .unwrap();
    assert_eq!(
        o,
        BillingOutcome::Ignored("an event type this service does not act on".into())
    );
    assert_eq!(
        s.apply_billing_event(&event("evt_noop", 300, Err("x")))
            .await
            .unwrap(),
        BillingOutcome::Replayed
    );
    let sub = s.subscription(&u.id).await.unwrap().unwrap();
    assert_eq!(
        (sub.status.as_str(), sub.plan, sub.event_created),
        ("past_due", Plan::Power, 200)
    );
    assert_eq!(sub.subscription_id.as_deref(), Some("sub_1"));
    assert!(sub.is_live());

    let o = s
        .apply_billing_event(&event(
            "evt_end",
            400,
            Ok(effect("cus_1", "sub_1", "canceled", Some(Plan::Researcher))),
        ))
        .await
        .unwrap();
    assert_eq!(
        o,
        BillingOutcome::Applied {
            user_id: u.id.clone(),
            plan: Plan::Researcher,
            changed: true
        }
    );
    assert!(!s.subscription(&u.id).await.unwrap().unwrap().is_live());
    let changes: Vec<_> = s
        .plan_changes(&u.id)
        .await
        .unwrap()
        .into_iter()
        .map(|c| (c.from, c.to, c.event_id))
        .collect();
    assert_eq!(
        changes,
        [
            (Plan::Researcher, Plan::Power, "evt_race".to_owned()),
            (Plan::Power, Plan::Researcher, "evt_end".to_owned()),
        ]
    );

    // A customer not yet known here is taken from the metadata's user id, once.
    let v = s.sign_in_user("new@example.com").await.unwrap();
    let mut fx = effect("cus_new", "sub_new", "active", Some(Plan::Desk));
    fx.user_hint = Some(v.id.clone());
    fx.starts_subscription = true;
    let o = s
        .apply_billing_event(&event("evt_new", 500, Ok(fx.clone())))
        .await
        .unwrap();
    assert_eq!(
        o,
        BillingOutcome::Applied {
            user_id: v.id.clone(),
            plan: Plan::Desk,
            changed: true
        }
    );
    assert_eq!(
        s.billing_customer(&v.id).await.unwrap().as_deref(),
        Some("cus_new")
    );
    fx.customer = "cus_another".into();
    let o = s
        .apply_billing_event(&event("evt_new2", 600, Ok(fx)))
        .await
        .unwrap();
    assert!(
        matches!(o, BillingOutcome::Ignored(_)),
        "a second customer for one user: {o:?}"
    );
}

/// Sign-in links (single use, expiring), sessions (lifetimes, logout) and page views.
async fn sign_ins(s: &dyn StateStore) {
    let t = |secs: i64| Instant::from_micros(1_800_000_000_000_000 + secs * 1_000_000);
    // First sign-in creates a researcher; a later one keeps whatever plan the user has.
    let new = s.sign_in_user("new@example.com").await.unwrap();
    assert_eq!(new.plan, Plan::Researcher);
    let desk = s.upsert_user("desk@example.com", Plan::Desk).await.unwrap();
    assert_eq!(s.sign_in_user("desk@example.com").await.unwrap(), desk);
    assert_eq!(s.sign_in_user("new@example.com").await.unwrap().id, new.id);

    let link =
        |tok: &str| SignInLink::new(&hash_key(tok), "new@example.com", "browser-1", t(0), t(900));
    s.put_sign_in_link(&link("tok-live")).await.unwrap();
    s.put_sign_in_link(&link("tok-old")).await.unwrap();
    let live = LinkState::SignIn {
        email: "new@example.com".into(),
        joins: None,
    };
    // Looking at a link spends nothing; another browser can neither look nor use it.
    let look = |tok: &'static str, browser: &'static str, at: i64| async move {
        s.sign_in_link(&hash_key(tok), browser, t(at))
            .await
            .unwrap()
    };
    assert_eq!(look("tok-live", "browser-1", 10).await, live);
    assert_eq!(
        look("tok-live", "browser-1", 11).await,
        live,
        "a look spends nothing"
    );
    assert_eq!(
        look("tok-live", "browser-2", 12).await,
        LinkState::OtherBrowser
    );
    assert_eq!(
        s.use_sign_in_link(&hash_key("tok-live"), "browser-2", t(20))
            .await
            .unwrap(),
        LinkState::OtherBrowser,
        "a link asked for elsewhere signs this browser into nothing"
    );
    assert_eq!(
        s.use_sign_in_link(&hash_key("tok-live"), "browser-1", t(60))
            .await
            .unwrap(),
        live,
        "and stays live for its own browser"
    );
    assert_eq!(
        s.use_sign_in_link(&hash_key("tok-live"), "browser-1", t(61))
            .await
            .unwrap(),
        LinkState::Used,
        "a link works once"
    );
    assert_eq!(look("tok-live", "browser-2", 62).await, LinkState::Used);
    assert_eq!(
        s.use_sign_in_link(&hash_key("tok-old"), "browser-1", t(900))
            .await
            .unwrap(),
        LinkState::Expired,
        "a token is dead at its expiry instant"
    );
    assert_eq!(
        s.use_sign_in_link(&hash_key("tok-never"), "browser-1", t(1))
            .await
            .unwrap(),
        LinkState::Unknown
    );
    // A link that joins a provider identity gives it back with the address once used.
    let a = Identity {
        issuer: "https://a.example".into(),
        subject: "sub-1".into(),
    };
    s.put_sign_in_link(&SignInLink {
        joins: Some(a.clone()),
        ..link("tok-join")
    })
    .await
    .unwrap();
    assert_eq!(
        s.use_sign_in_link(&hash_key("tok-join"), "browser-1", t(30))
            .await
            .unwrap(),
        LinkState::SignIn {
            email: "new@example.com".into(),
            joins: Some(a.clone())
        }
    );

    // Accounts by provider identity: a first sign-in makes the account; the same identity
    // finds it again; another identity with a taken address is not let in.
    let fresh = match s
        .identity_sign_in(&a, "fresh@example.com", t(0))
        .await
        .unwrap()
    {
        IdentitySignIn::New(u) => u,
        other => panic!("{other:?}"),
    };
    assert_eq!(fresh.plan, Plan::Researcher);
    assert_eq!(
        s.identity_sign_in(&a, "changed@example.com", t(1))
            .await
            .unwrap(),
        IdentitySignIn::Known(fresh.clone()),
        "an identity keeps its account whatever address it later asserts"
    );
    let b = Identity {
        issuer: "https://b.example".into(),
        subject: "sub-1".into(),
    };
    assert_eq!(
        s.identity_sign_in(&b, "fresh@example.com", t(2))
            .await
            .unwrap(),
        IdentitySignIn::EmailTaken,
        "the same subject at another issuer is another person"
    );
    assert_eq!(
        s.identity_sign_in(&b, "new@example.com", t(2))
            .await
            .unwrap(),
        IdentitySignIn::EmailTaken,
        "an account made by e-mail is not joined on a provider's word"
    );
    assert_eq!(s.identities(&new.id).await.unwrap(), vec![]);
    s.add_identity(&b, &new.id, t(3)).await.unwrap();
    s.add_identity(&b, &new.id, t(4)).await.unwrap();
    assert_eq!(s.identities(&new.id).await.unwrap(), vec![b.clone()]);
    assert_eq!(
        s.identity_sign_in(&b, "new@example.com", t(5))
            .await
            .unwrap(),
        IdentitySignIn::Known(new.clone()),
        "once joined, the identity signs in to the account"
    );

    s.create_session(&hash_key("sess-1"), &new.id, "email", t(0), t(3600))
        .await
        .unwrap();
    let got = s.session(&hash_key("sess-1")).await.unwrap().unwrap();
    assert_eq!(
        (
            got.user.id.as_str(),
            got.via.as_str(),
            got.last_seen_at,
            got.expires_at,
            got.ended_at
        ),
        (new.id.as_str(), "email", t(0), t(3600), None)
    );
    s.touch_session(&hash_key("sess-1"), t(120)).await.unwrap();
    s.touch_session(&hash_key("sess-1"), t(60)).await.unwrap();
    assert_eq!(
        s.session(&hash_key("sess-1"))
            .await
            .unwrap()
            .unwrap()
            .last_seen_at,
        t(120),
        "activity only moves forward"
    );
    assert!(s.session(&hash_key("sess-none")).await.unwrap().is_none());
    assert!(s.end_session(&hash_key("sess-1"), t(200)).await.unwrap());
    assert!(
        !s.end_session(&hash_key("sess-1"), t(300)).await.unwrap(),
        "a session ends once"
    );
    assert_eq!(
        s.session(&hash_key("sess-1"))
            .await
            .unwrap()
            .unwrap()
            .ended_at,
        Some(t(200))
    );
    s.create_session(&hash_key("sess-2"), &new.id, "provider_a", t(0), t(10_000))
        .await
        .unwrap();
    assert_eq!(
        s.purge_sign_ins(t(5000)).await.unwrap(),
        4,
        "three expired links and the ended session"
    );
    assert!(s.session(&hash_key("sess-2")).await.unwrap().is_some());

    for (path, day) in [
        ("/", "2026-11-01"),
        ("/", "2026-11-01"),
        ("/account", "2026-11-02"),
        ("/", "2026-10-01"),
    ] {
        s.count_page_view(path, day).await.unwrap();
    }
    let count = |user: &str, key: &str, day: &str, group: &str, requests| UsageCount {
        user_id: user.into(),
        key_id: key.into(),
        day: day.into(),
        route_group: group.into(),
        requests,
    };
    s.add_usage(&[]).await.unwrap();
    s.add_usage(&[
        count("usr_u", "key_1", "2026-11-02", "news", 5),
        count("usr_u", "", "2026-11-01", "keys", 1),
    ])
    .await
    .unwrap();
    s.add_usage(&[
        count("usr_u", "key_1", "2026-11-02", "news", 2),
        count("usr_other", "key_9", "2026-11-02", "news", 9),
    ])
    .await
    .unwrap();
    // A flush bigger than one statement's rows: every counter lands, in one transaction.
    let many: Vec<UsageCount> = (0..2_500)
        .map(|i| count("usr_many", &format!("key_{i}"), "2026-11-03", "news", 1))
        .collect();
    s.add_usage(&many).await.unwrap();
    assert_eq!(
        s.usage("usr_many", "2026-11-01", "2026-11-30")
            .await
            .unwrap()
            .len(),
        2_500
    );
    assert_eq!(
        s.usage("usr_u", "2026-11-01", "2026-11-30").await.unwrap(),
        [
            (
                "2026-11-01".to_string(),
                String::new(),
                "keys".to_string(),
                1
            ),
            (
                "2026-11-02".to_string(),
                "key_1".to_string(),
                "news".to_string(),
                7
            )
        ],
        "counts add up, per user only"
    );
    s.purge_windows(i64::MAX).await.unwrap();
    assert_eq!(
        s.usage("usr_u", "2026-11-01", "2026-11-30")
            .await
            .unwrap()
            .len(),
        2,
        "the rate purge leaves usage alone"
    );
    assert_eq!(
        s.usage("usr_u", "2026-11-02", "2026-11-02")
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        s.page_views("2026-11-01", "2026-11-30").await.unwrap(),
        [
            ("/".to_string(), "2026-11-01".to_string(), 2),
            ("/account".to_string(), "2026-11-02".to_string(), 1)
        ]
    );
}

fn receipt(user: &str, key: &str, ts_ms: i64, request_id: &str) -> StoredReceipt {
    StoredReceipt {
        user_id: user.into(),
        key_id: key.into(),
        ts_ms,
        route: "GET /v1/news".into(),
        params_digest: "0".repeat(64),
        corpus_version: "sha256:abc".into(),
        envelope_sha256: "1".repeat(64),
        request_id: request_id.into(),
    }
}

/// Receipts: append-only rows read back per key, oldest first, keyset-paged, day-bounded.
async fn receipts(s: &dyn StateStore, user: &str) {
    const DAY: i64 = 86_400_000;
    for (ts, id) in [
        (DAY + 5, "b"),
        (DAY + 5, "a"),
        (DAY + 1, "z"),
        (2 * DAY, "c"),
    ] {
        s.append_receipt(&receipt(user, "key_1", ts, id))
            .await
            .unwrap();
    }
    s.append_receipt(&receipt(user, "key_2", DAY + 2, "other"))
        .await
        .unwrap();
    let ids = |v: Vec<StoredReceipt>| v.into_iter().map(|r| r.request_id).collect::<Vec<_>>();
    let day1 = s.receipts("key_1", DAY, 2 * DAY, None, 10).await.unwrap();
    assert_eq!(day1[0], receipt(user, "key_1", DAY + 1, "z"));
    assert_eq!(
        ids(day1),
        ["z", "a", "b"],
        "ordered by (ts, request_id), one day"
    );
    assert_eq!(
        ids(s
            .receipts("key_1", DAY, 3 * DAY, Some((DAY + 5, "a".into())), 10)
            .await
            .unwrap()),
        ["b", "c"],
        "strictly after the position"
    );
    assert_eq!(
        ids(s.receipts("key_1", 0, 3 * DAY, None, 2).await.unwrap()),
        ["z", "a"]
    );
    assert_eq!(s.receipt_count("key_1").await.unwrap(), 4);
    assert_eq!(s.receipt_count("key_2").await.unwrap(), 1);
    assert!(
        s.append_receipt(&receipt(user, "key_1", DAY + 1, "z"))
            .await
            .is_err(),
        "a receipt is written once"
    );
}

#[tokio::test]
async fn sqlite_state_store_suite() {
    let dir = tempfile::tempdir().unwrap();
    suite(
        store::open(dir.path().join("s.db").to_str().unwrap())
            .await
            .unwrap(),
    )
    .await;
}

#[tokio::test]
async fn postgres_state_store_suite() {
    let Some(schema) = PgSchema::make_for("postgres_state_store_suite", "asof_test").await else {
        return;
    };
    suite(schema.store().await).await;
    schema.drop().await;
}

/// Replicas starting at once on an empty database (each its own pool): every one opens the
/// store, none is refused by another's half-made tables, and the tables are made once.
async fn opened_at_once(url: &str) {
    let opens = (0..8).map(|_| store::open(url));
    for (i, s) in futures::future::join_all(opens)
        .await
        .into_iter()
        .enumerate()
    {
        let s = s.unwrap_or_else(|e| panic!("replica {i} did not start: {e}"));
        s.ping().await.unwrap();
    }
    let s = store::open(url).await.unwrap();
    let u = s
        .upsert_user("first@example.com", Plan::Desk)
        .await
        .unwrap();
    assert!(s.create_key(&u.id, "k", None).await.is_ok());
}

#[tokio::test]
async fn sqlite_stores_opened_at_once_on_a_fresh_file_all_start() {
    let dir = tempfile::tempdir().unwrap();
    opened_at_once(dir.path().join("fresh.db").to_str().unwrap()).await;
}

#[tokio::test]
async fn postgres_stores_opened_at_once_on_a_fresh_schema_all_start() {
    let Some(schema) = PgSchema::make_for(
        "postgres_stores_opened_at_once_on_a_fresh_schema_all_start",
        "asof_test",
    )
    .await
    else {
        return;
    };
    opened_at_once(&schema.url()).await;
    schema.drop().await;
}
