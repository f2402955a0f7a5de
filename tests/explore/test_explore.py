#!/usr/bin/env python3
"""The as-of explorer (/explore) in a real browser: Playwright driving Debian's headless
Chromium against the real `asof serve` on the shipped corpus, with a real SMTP server
(aiosmtpd) for the e-mail sign-in.

For each drawn cut (the public sample without a session; the data routes with one), the page is
held to the API asked directly with the same question:

- a 200: the timeline's knowable marks, the list's rows (`data-id`) and the API's `count` are
  equal, and the rows are the API's records in its order;
- a 409: the hole band appears, its `data-missing` is the answer's `coverage.missing`, and no
  mark is knowable and no row is listed; a band appears at no other time;
- a diff: the marks and rows marked as became-knowable are the diff's records.

Also: the page opens on an answerable cut; its URL reopens the same view; a keyboard-only walk
(Tab to the slider, arrow keys, Shift+arrow, End) moves it and each step is answered; no request
carries a key (the signed-in view uses the session cookie) or leaves the origin; the chart has a
text alternative; at a phone's width (375 px) nothing scrolls sideways; every text has WCAG AA
contrast. Screenshots of each state land in --out.

Console: the page must log nothing. Chromium itself logs "Failed to load resource: ... 409" for
each answer with that status, which the page asked for on purpose and drew as a hole; those
lines, and only for the URLs the page drew as holes, are not counted as the page's errors.

Prints 'explorer checks: N passed, N failed'.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import uuid
from urllib.parse import parse_qsl, urlencode, urlsplit

import httpx
from aiosmtpd.controller import Controller
from playwright.sync_api import expect, sync_playwright

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests"))
sys.path.insert(0, os.path.join(REPO, "tests/accounts"))
from support import Server, free_port  # noqa: E402
from test_browser import CONTRAST_JS, chromium  # noqa: E402
from test_signin import Inbox  # noqa: E402


def same_query(a, b):
    """Two URLs ask the same question (same path, same parameters, any order)."""
    ua, ub = urlsplit(a), urlsplit(b)
    return ua.path == ub.path and sorted(parse_qsl(ua.query)) == sorted(parse_qsl(ub.query))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    results = []

    def check(name, fn):
        try:
            fn()
            print(f"test {name} ... ok")
            results.append(True)
        except Exception as e:  # noqa: BLE001 - every step reported by name
            print(f"test {name} ... FAILED: {e!r}")
            results.append(False)

    with tempfile.TemporaryDirectory(prefix="asof-explore-") as work:
        email = f"explorer-{uuid.uuid4().hex[:8]}@example.com"
        inbox = Inbox()
        smtp = Controller(inbox, hostname="127.0.0.1", port=free_port())
        smtp.start()
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        server = Server(
            args.bin, work, port=port,
            extra=[
                "--smtp-url", f"smtp://127.0.0.1:{smtp.port}",
                "--mail-from", "asof <no-reply@asof.test>",
                "--public-url", base,
                "--insecure-cookies",
                # The walk asks a few hundred cuts from one address within minutes.
                "--public-rate-limit", "5000",
            ],
        )
        foreign, keyed, console, holes_drawn, cuts = [], [], [], set(), []
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=chromium(), args=["--no-sandbox", "--disable-background-networking"])
                context = browser.new_context(base_url=base, viewport={"width": 1280, "height": 900})
                context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)

                def watch(page):
                    page.on("request", lambda r: foreign.append(r.url) if not r.url.startswith((base, "data:")) else None)
                    page.on("request", lambda r: keyed.append(r.url) if "authorization" in r.headers else None)
                    page.on("console", lambda m: console.append((m.type, m.text, m.location.get("url", ""))) if m.type in ("error", "warning") else None)
                    page.on("pageerror", lambda e: console.append(("pageerror", str(e), "")))
                    return page

                page = watch(context.new_page())
                shot = lambda n: page.screenshot(path=os.path.join(args.out, f"{n}.png"), full_page=True)  # noqa: E731
                state = {"cookies": {}}

                def settled(p=None):
                    """Waits until the page has drawn the answer to its current question."""
                    p = p or page
                    expect(p.locator("#chart")).to_have_attribute("aria-busy", "false", timeout=15000)
                    p.wait_for_function(
                        "() => document.body.dataset.answered && document.body.dataset.asOf === document.getElementById('as-of').value",
                        timeout=15000,
                    )

                def api(path, params):
                    return httpx.get(f"{base}{path}", params=params, cookies=state["cookies"], timeout=20)

                def held_to_api(label, path, params, diff=None, p=None):
                    """The drawn view against the API's answer to the same question."""
                    p = p or page
                    settled(p)
                    answered = p.evaluate("document.body.dataset.answered")
                    assert same_query(answered, f"{path}?{urlencode(params)}"), (answered, path, params)
                    r = api(path, params)
                    body = r.json()
                    knowable = p.locator("#chart .rec.knowable").count()
                    rows = p.locator("#rows tr[data-id]")
                    bands = p.locator("#chart .hole[data-missing]")
                    if r.status_code == 200:
                        assert body["count"] == knowable == rows.count(), (label, body["count"], knowable, rows.count())
                        ids = [rows.nth(i).get_attribute("data-id") for i in range(rows.count())]
                        assert ids == [x["id"] for x in body["results"]], (label, ids)
                        assert bands.count() == 0 or diff is not None, (label, "a hole band on a 200")
                    else:
                        assert r.status_code == 409 and body["count"] is None, (label, r.status_code, body)
                        holes_drawn.add(answered)
                        assert bands.count() == 1, (label, "no hole band on a 409")
                        assert bands.first.get_attribute("data-missing") == " ".join(body["coverage"]["missing"]), label
                        assert knowable == 0 and rows.count() == 0, (label, knowable, rows.count())
                        assert p.locator("#hole-detail").is_visible(), label
                    if diff is not None:
                        dpath, dparams = diff
                        d = api(dpath, dparams)
                        if d.status_code == 200:
                            became = p.locator("#chart .rec.became").count()
                            listed = p.locator("#rows tr[data-became]").count()
                            assert d.json()["count"] == became == listed, (label, d.json()["count"], became, listed)
                        else:
                            assert p.locator("#chart .hole[data-missing]").count() == 1, label
                    # The chart's text alternative says what it shows.
                    desc = p.locator("#chart-desc").text_content()
                    assert desc and len(desc) > 20, desc
                    cuts.append((label, r.status_code, body["count"]))
                    return body

                def goto(query):
                    page.goto(f"/explore?{urlencode(query)}" if query else "/explore")
                    settled()

                # ---- the public sample ----------------------------------------------------------------
                meta = httpx.get(f"{base}/v1/meta").json()["results"][0]

                def opens_on_an_answerable_cut():
                    page.goto("/explore")
                    settled()
                    assert page.locator("#mode").text_content().startswith("The public sample")
                    as_of = page.input_value("#as-of")
                    body = held_to_api("default view", "/v1/sample/news", {"example": "tesla", "as_of": as_of})
                    assert body["status"] == "ok", body
                    stretch = meta["sample"]["answerable"]["published_at"][-1]
                    assert stretch["from"] <= as_of <= stretch["to"], (as_of, stretch)
                    shot("1-sample-default")

                def published_at_before_and_after_the_10_k():
                    goto({"example": "tesla", "as_of": "2026-01-29T00:00:00Z"})
                    body = held_to_api("tesla published 01-29", "/v1/sample/news", {"example": "tesla", "as_of": "2026-01-29T00:00:00Z"})
                    assert body["count"] == 1, body["count"]
                    # Some record is drawn but not yet knowable: the 10-K, accepted 01:55 that night.
                    assert page.locator("#chart .rec.pending").count() >= 1
                    shot("2-sample-tesla-published")

                def the_same_instant_on_committed_at_is_a_complete_empty_answer():
                    goto({"example": "tesla", "as_of": "2026-01-29T00:00:00Z", "visible_by": "committed_at"})
                    body = held_to_api("tesla committed 01-29", "/v1/sample/news", {"example": "tesla", "as_of": "2026-01-29T00:00:00Z", "visible_by": "committed_at"})
                    assert body["status"] == "ok" and body["count"] == 0, body
                    assert page.locator("#chart .hole").count() == 0
                    assert "count 0" in page.locator("#answer-meta").text_content()
                    shot("3-sample-tesla-committed-empty")

                def committed_at_once_the_corpus_held_them():
                    goto({"example": "tesla", "as_of": "2026-02-04T00:00:00Z", "visible_by": "committed_at"})
                    body = held_to_api("tesla committed 02-04", "/v1/sample/news", {"example": "tesla", "as_of": "2026-02-04T00:00:00Z", "visible_by": "committed_at"})
                    assert body["count"] >= 2, body["count"]

                def available_at_on_the_certified_sample_is_a_hole():
                    goto({"example": "tesla", "as_of": "2026-02-01T12:00:00Z", "visible_by": "available_at"})
                    body = held_to_api("tesla available", "/v1/sample/news", {"example": "tesla", "as_of": "2026-02-01T12:00:00Z", "visible_by": "available_at"})
                    assert any(k.startswith("availability.") for k in body["coverage"]["missing"]), body["coverage"]
                    assert "not zero" in page.locator("#hole-sentence").text_content()
                    # The whole axis is marked unanswerable on this clock.
                    assert page.locator("#chart .unanswerable").count() >= 1
                    shot("4-sample-available-hole")

                def an_identity_hole_names_the_ticker():
                    goto({"example": "siemens-energy", "as_of": "2026-01-30T12:00:00Z"})
                    body = held_to_api("siemens identity hole", "/v1/sample/news", {"example": "siemens-energy", "as_of": "2026-01-30T12:00:00Z"})
                    assert body["coverage"]["missing"][0].startswith("identity.ticker/SMEGF@"), body["coverage"]
                    # The band's keys show on focus, with the sentence saying why it is not zero.
                    page.locator("#chart .hole").focus()
                    expect(page.locator("#hole-detail")).to_be_visible()
                    assert "SMEGF" in page.locator("#hole-sentence").text_content()
                    shot("5-sample-identity-hole")

                def past_the_samples_last_day_is_a_hole():
                    goto({"example": "microsoft", "as_of": "2026-02-10T00:00:00Z"})
                    held_to_api("microsoft past the sample", "/v1/sample/news", {"example": "microsoft", "as_of": "2026-02-10T00:00:00Z"})

                def a_diff_marks_what_became_knowable():
                    q = {"example": "microsoft", "as_of": "2026-02-05T00:00:00Z", "as_of_start": "2026-02-01T00:00:00Z"}
                    goto(q)
                    assert page.locator("#diff-on").is_checked()
                    held_to_api(
                        "microsoft diff", "/v1/sample/news", {"example": "microsoft", "as_of": q["as_of"]},
                        diff=("/v1/sample/diff", {"example": "microsoft", "as_of_start": q["as_of_start"], "as_of_end": q["as_of"]}),
                    )
                    assert page.locator("#chart .rec.became").count() >= 1
                    shot("6-sample-diff")

                def the_url_reopens_the_same_view():
                    q = {"example": "microsoft", "as_of": "2026-02-04T06:00:00Z", "as_of_start": "2026-01-28T00:00:00Z", "visible_by": "committed_at"}
                    goto(q)
                    url = page.url
                    before = page.evaluate("[...document.querySelectorAll('#rows tr[data-id]')].map(r => r.dataset.id)")
                    other = watch(context.new_page())
                    other.goto(url)
                    settled(other)
                    assert other.input_value("#as-of") == q["as_of"]
                    assert other.input_value("#as-of-start") == q["as_of_start"]
                    assert other.locator("#clock-committed_at").is_checked()
                    assert other.input_value("#example") == "microsoft"
                    after = other.evaluate("[...document.querySelectorAll('#rows tr[data-id]')].map(r => r.dataset.id)")
                    assert before == after, (before, after)
                    assert other.locator("#chart .rec.knowable").count() == page.locator("#chart .rec.knowable").count()
                    other.close()

                def a_keyboard_only_walk_moves_the_slider():
                    page.goto("/explore?example=tesla&as_of=2026-01-28T18:00:00Z")
                    settled()
                    for _ in range(40):
                        page.keyboard.press("Tab")
                        if page.evaluate("document.activeElement.id") == "as-of-range":
                            break
                    assert page.evaluate("document.activeElement.id") == "as-of-range", "Tab never reached the slider"
                    assert page.evaluate("getComputedStyle(document.activeElement).outlineStyle") != "none"
                    start = page.input_value("#as-of")
                    seen = [start]
                    for key in ["ArrowRight", "ArrowRight", "ArrowRight", "Shift+ArrowRight", "ArrowLeft"]:
                        page.keyboard.press(key)
                        page.wait_for_function("v => document.getElementById('as-of').value !== v", arg=seen[-1])
                        settled()
                        as_of = page.input_value("#as-of")
                        held_to_api(f"keyboard {key}", "/v1/sample/news", {"example": "tesla", "as_of": as_of})
                        seen.append(as_of)
                    hours = [int(s[11:13]) + 24 * int(s[8:10]) for s in seen]
                    assert [b - a for a, b in zip(hours, hours[1:])] == [1, 1, 1, 24, -1], seen
                    # Across 21:11 the 8-K became knowable.
                    page.keyboard.press("End")
                    settled()
                    held_to_api("keyboard End", "/v1/sample/news", {"example": "tesla", "as_of": page.input_value("#as-of")})
                    shot("7-keyboard-walk")

                def next_change_jumps_to_the_next_record():
                    page.goto("/explore?example=tesla&as_of=2026-01-28T12:00:00Z")
                    settled()
                    page.get_by_role("button", name="Next change ▶").click()
                    settled()
                    assert page.input_value("#as-of") == "2026-01-28T21:11:04Z", page.input_value("#as-of")
                    held_to_api("next change", "/v1/sample/news", {"example": "tesla", "as_of": "2026-01-28T21:11:04Z"})

                def copy_as_curl_asks_the_same_question():
                    page.goto("/explore?example=tesla&as_of=2026-01-29T00:00:00Z")
                    settled()
                    page.get_by_role("tab", name="curl").click()
                    text = page.locator("#snippet-code").text_content()
                    url = text.split("'")[1]
                    assert same_query(url, f"{base}/v1/sample/news?example=tesla&as_of=2026-01-29T00:00:00Z"), text
                    page.get_by_role("button", name="Copy").click()
                    assert page.evaluate("navigator.clipboard.readText()") == text
                    page.get_by_role("tab", name="SQL").click()
                    assert "news_asof('2026-01-29T00:00:00Z'" in page.locator("#snippet-code").text_content()
                    assert "cik = '1318605'" in page.locator("#snippet-code").text_content()

                def at_a_phones_width_nothing_scrolls_sideways():
                    page.set_viewport_size({"width": 375, "height": 800})
                    page.goto("/explore?example=microsoft&as_of=2026-02-04T00:00:00Z&as_of_start=2026-02-01T00:00:00Z")
                    settled()
                    wide = page.evaluate("document.documentElement.scrollWidth")
                    assert wide <= 376, wide
                    low = page.evaluate(CONTRAST_JS)
                    assert not low, f"text below 4.5:1 contrast: {low}"
                    for label in page.locator("input, select").all():
                        i = label.get_attribute("id")
                        assert page.locator(f"label[for='{i}']").count() == 1, i
                    shot("8-phone")
                    page.set_viewport_size({"width": 1280, "height": 900})

                for name, fn in [
                    ("the explorer opens on a cut the sample answers", opens_on_an_answerable_cut),
                    ("published_at: the 8-K knowable, the 10-K not yet", published_at_before_and_after_the_10_k),
                    ("the same instant on committed_at is a complete empty answer", the_same_instant_on_committed_at_is_a_complete_empty_answer),
                    ("committed_at once the corpus held them", committed_at_once_the_corpus_held_them),
                    ("available_at on the certified sample is a hole", available_at_on_the_certified_sample_is_a_hole),
                    ("an identity hole names the ticker", an_identity_hole_names_the_ticker),
                    ("past the sample's last day is a hole", past_the_samples_last_day_is_a_hole),
                    ("a diff marks what became knowable", a_diff_marks_what_became_knowable),
                    ("the URL reopens the same view", the_url_reopens_the_same_view),
                    ("a keyboard-only walk moves the slider", a_keyboard_only_walk_moves_the_slider),
                    ("next change jumps to the next record", next_change_jumps_to_the_next_record),
                    ("copy as curl asks the same question", copy_as_curl_asks_the_same_question),
                    ("at a phone's width nothing scrolls sideways", at_a_phones_width_nothing_scrolls_sideways),
                ]:
                    check(name, fn)

                # ---- signed in: the data routes with the session --------------------------------------
                def sign_in():
                    page.goto("/sign-in")
                    page.get_by_label("E-mail address").fill(email)
                    page.get_by_role("button", name="Send me a sign-in link").click()
                    page.wait_for_selector("#email-result:not([hidden])")
                    page.goto(inbox.link_for(email))
                    page.get_by_role("button", name="Sign in", exact=True).click()
                    page.wait_for_url(f"{base}/account")
                    state["cookies"] = {c["name"]: c["value"] for c in context.cookies()}
                    assert "svc_session" in state["cookies"], state["cookies"].keys()
                    # The walk below asks a few hundred answers a minute: the desk plan's
                    # allowance (the operator sets plans with `asof keys create --plan`).
                    subprocess.run(
                        [args.bin, "keys", "create", "--database-url", server.db, "--email", email, "--plan", "desk"],
                        check=True, capture_output=True,
                    )

                def signed_in_the_data_routes_answer_by_session():
                    goto({"ticker": "TSLA", "as_of": "2026-01-29T00:00:00Z"})
                    assert page.locator("#mode").text_content().startswith("Signed in as")
                    held_to_api("TSLA signed in", "/v1/news", {"ticker": "TSLA", "as_of": "2026-01-29T00:00:00Z", "limit": "1000"})
                    shot("9-signed-in")

                def the_forward_lane_on_both_clocks():
                    # The live lane's rows were first seen by the poller on 2026-01-12 (a
                    # backlog), days after EDGAR published them: at the end of what the lane
                    # answers, they are knowable by publication and not yet by availability.
                    fwd = next(l for s in meta["corpus"]["sources"] if s["source_id"] == "sec.edgar" for l in s["lanes"] if l["lane"] == "forward_first_seen")
                    end = fwd["answerable"]["available_at"][-1]["to"][:19] + "Z"
                    q = {"cik": "1665650", "lane": "forward_first_seen", "as_of": end}
                    goto(q)
                    body = held_to_api("forward lane published_at", "/v1/news", {**q, "limit": "1000"})
                    assert body["count"] > 0, body["count"]
                    assert all(r["available_at"] for r in body["results"])
                    shot("10-forward-published")
                    q["visible_by"] = "available_at"
                    goto(q)
                    body = held_to_api("forward lane available_at", "/v1/news", {**q, "limit": "1000"})
                    assert body["status"] == "ok" and body["count"] == 0, body["count"]
                    assert page.locator("#chart .rec.pending").count() > 0
                    shot("10-forward-available")

                def corrections_are_drawn_as_corrections():
                    # CIK 1677077's filings were corrected by a later publish (committed
                    # 2026-06-20T12:56:07Z): on published_at a cut sees each record's latest
                    # revision, the correction, drawn and listed as one.
                    q = {"cik": "1677077", "as_of": "2025-03-06T00:00:00Z"}
                    goto(q)
                    body = held_to_api("corrections", "/v1/news", {**q, "limit": "1000"})
                    corrected = [r for r in body["results"] if r["supersedes"]]
                    assert corrected, "no correction in the answer"
                    assert page.locator("#chart .rec.correction.knowable").count() == len(corrected)
                    for r in corrected:
                        row = page.locator(f"#rows tr[data-revision='{r['revision_id']}']")
                        assert f"corrects {r['supersedes']}" in row.text_content()
                    # The corrections nearest the cut are drawn over the revisions they
                    # replaced, which the record route answered on committed_at a second before
                    # each correction was committed; those revisions are replaced, not pending.
                    replaced = page.locator("#chart .rec.replaced")
                    assert 1 <= replaced.count() <= 4, replaced.count()
                    for i in range(replaced.count()):
                        rev = replaced.nth(i).get_attribute("data-revision")
                        assert page.locator(f"#chart .rec.correction[data-supersedes='{rev}']").count() == 1, rev
                        original = api(f"/v1/news/{replaced.nth(i).get_attribute('data-id')}", {
                            "as_of": "2026-06-20T12:56:06Z", "visible_by": "committed_at"}).json()
                        assert original["results"][0]["revision_id"] == rev, original
                    assert page.locator("#chart .rec.replaced.knowable, #chart .rec.replaced.pending").count() == 0
                    shot("11-corrections")

                def a_source_without_filers():
                    q = {"source": "us.ofac.sdn", "as_of": "2019-01-04T23:59:59Z"}
                    goto(q)
                    held_to_api("ofac whole source", "/v1/news", {**q, "limit": "1000"})

                for name, fn in [
                    ("sign in by e-mail", sign_in),
                    ("signed in, the data routes answer by session", signed_in_the_data_routes_answer_by_session),
                    ("the forward lane on both clocks", the_forward_lane_on_both_clocks),
                    ("corrections are drawn as corrections", corrections_are_drawn_as_corrections),
                    ("a source without filers", a_source_without_filers),
                ]:
                    check(name, fn)

                def nothing_leaves_the_origin_and_no_request_carries_a_key():
                    assert not foreign, foreign[:5]
                    assert not keyed, keyed[:5]

                def the_console_stays_clean():
                    own = [
                        c for c in console
                        if not (c[0] == "error" and "status of 409" in c[1] and any(same_query(c[2], f"{base}{h}") for h in holes_drawn))
                    ]
                    assert not own, own[:5]

                def at_least_ten_cuts_were_held_to_the_api():
                    statuses = {s for _, s, _ in cuts}
                    assert len(cuts) >= 10 and statuses == {200, 409}, cuts

                for name, fn in [
                    ("nothing leaves the origin and no request carries a key", nothing_leaves_the_origin_and_no_request_carries_a_key),
                    ("the console stays clean", the_console_stays_clean),
                    ("at least ten cuts were held to the API", at_least_ten_cuts_were_held_to_the_api),
                ]:
                    check(name, fn)
                browser.close()
        finally:
            server.stop()
            smtp.stop()
    for label, status, count in cuts:
        print(f"  cut {label}: {status}, count {count}")
    passed = sum(results)
    failed = len(results) - passed
    print(f"explorer checks: {passed} passed, {failed} failed (screenshots in {args.out})")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
