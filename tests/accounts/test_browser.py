#!/usr/bin/env python3
"""The account site in a real browser: Playwright driving Debian's headless Chromium against
the real `asof serve`, with a real SMTP server (aiosmtpd) and a real OpenID Connect provider
(oauth2-mock-server) on loopback.

One walk, each step checked and photographed (PNG files in --out):

1. the landing page shows the live sample example; the site fetches nothing from another
   origin (the provider's pages aside, during provider sign-in);
2. the sign-in page is usable by keyboard: Tab reaches the controls in reading order, with a
   visible focus ring;
3. sign in with an e-mail link: the sign-in page sends it, the link from the inbox leads to a
   confirmation page whose button lands on the account page;
4. create a key: its secret is shown once, the copy button puts it on the clipboard, and it
   answers /v1/news;
5. revoke it (confirming the dialog): the same call is refused;
6. buy a plan: "Continue to payment" does nothing until the internal-use statement is ticked,
   then the browser goes to the (fake, Stripe-shaped) processor's hosted page, and the page
   it returns to says the payment is being confirmed;
7. sign out: the account page then sends the browser to sign in again;
8. sign in through provider A: the address has an account made by e-mail, so a link mailed to
   it is confirmed first; then the account page shows the same e-mail;
9. at a phone's width (375 px) the account page needs no sideways scrolling, every form field
   has a label, and all its text has at least WCAG AA contrast (4.5:1).

The site is checked under its own Content-Security-Policy (no eval: waits use locators).

Prints 'browser checks: N passed, N failed'.
"""

import argparse
import os
import re
import sys
import tempfile
import uuid

import httpx
from playwright.sync_api import expect, sync_playwright

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests"))
sys.path.insert(0, os.path.join(REPO, "tests/accounts"))
from support import FakeProcessor, Server, free_port  # noqa: E402
from test_signin import Inbox, Provider  # noqa: E402
from aiosmtpd.controller import Controller  # noqa: E402

NEWS = {"cik": "320193", "as_of": "2026-11-01T00:00:00Z"}
STEPS = 9

# Every element with its own visible text: its colour against the first opaque background
# up its ancestors, as a WCAG 2 contrast ratio; answers those under 4.5.
CONTRAST_JS = """(() => {
  const rgb = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const bg = (e) => {
    for (; e; e = e.parentElement) {
      const c = rgb(getComputedStyle(e).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0.99)) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const low = [];
  for (const e of document.querySelectorAll('body *')) {
    const own = [...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!own || !e.getClientRects().length || getComputedStyle(e).visibility === 'hidden') continue;
    const a = lum(rgb(getComputedStyle(e).color).slice(0, 3)), b = lum(bg(e));
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    if (ratio < 4.5) low.push(`${e.tagName.toLowerCase()}: ${ratio.toFixed(2)}`);
  }
  return low;
})()"""


def chromium():
    for p in ("/usr/bin/chromium", "/usr/bin/chromium-browser"):
        if os.path.exists(p):
            return p
    raise AssertionError("Debian chromium is not installed")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--node", default="node")
    ap.add_argument("--oauth2-mock-server", required=True)
    ap.add_argument("--fake-processor", required=True, help="the asof-fake-processor binary")
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
            raise

    with tempfile.TemporaryDirectory(prefix="asof-browser-") as work:
        email = f"browser-{uuid.uuid4().hex[:8]}@example.com"
        provider = Provider(args.node, args.oauth2_mock_server, work, email)
        inbox = Inbox()
        smtp = Controller(inbox, hostname="127.0.0.1", port=free_port())
        smtp.start()
        processor = FakeProcessor(args.fake_processor)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        server = Server(
            args.bin, work, port=port,
            extra=[
                "--smtp-url", f"smtp://127.0.0.1:{smtp.port}",
                "--mail-from", "asof <no-reply@asof.test>",
                "--public-url", base,
                "--insecure-cookies",
                "--provider-a-issuer", provider.issuer,
                "--provider-a-client-id", "asof-browser",
                "--billing-api-url", processor.url,
                "--billing-secret-key", "sk_test_asof_fake_4eC39HqLyjWDarjtT1zdp7dc",
                "--billing-webhook-secret", "whsec_asof_fake_5f1d2c3b4a69788796a5b4c3d2e1f0",
                "--billing-price-researcher", "price_1ResearcherMonthly",
                "--billing-price-power", "price_1PowerMonthly",
                "--billing-price-desk", "price_1DeskMonthly",
            ],
        )
        foreign = []
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=chromium(), args=["--no-sandbox", "--disable-background-networking"])
                context = browser.new_context(base_url=base)
                context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
                page = context.new_page()
                page.on("dialog", lambda d: d.accept())
                page.on("request", lambda r: None if r.url.startswith((base, provider.issuer, processor.url, "data:")) else foreign.append(r.url))
                shot = lambda n: page.screenshot(path=os.path.join(args.out, f"{n}.png"), full_page=True)  # noqa: E731
                secret = {}

                def landing():
                    page.goto("/")
                    page.wait_for_selector("#example-rows tr td:not([colspan])")
                    assert "corpus_version sha256:" in page.inner_text("#example-version")
                    # Every column the example shows has a value in every row (no dash).
                    cells = page.locator("#example-rows td").all_inner_texts()
                    assert cells and all(c.strip() not in ("", "—") for c in cells), cells
                    expect(page.get_by_role("link", name="See it on a timeline")).to_have_attribute("href", "/explore")
                    shot("1-landing")

                def keyboard_order():
                    page.goto("/sign-in")
                    seen = []
                    for _ in range(6):
                        page.keyboard.press("Tab")
                        seen.append(page.evaluate(
                            "(() => { const e = document.activeElement; return e.id || e.textContent.trim(); })()"
                        ))
                    assert seen == ["asof", "Explore", "API reference", "email", "Send me a sign-in link", "Sign in with provider A"], seen
                    # A visible focus ring (the outline the stylesheet gives :focus).
                    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
                    assert outline != "none", outline

                def sign_in_by_email():
                    page.goto("/sign-in")
                    page.get_by_label("E-mail address").fill(email)
                    page.get_by_role("button", name="Send me a sign-in link").click()
                    page.wait_for_selector("#email-result:not([hidden])")
                    assert "Check your inbox" in page.inner_text("#email-result")
                    shot("2-link-sent")
                    # The link leads to a confirmation page; its button signs in (this browser
                    # asked for the link, so it holds the binding cookie).
                    page.goto(inbox.link_for(email))
                    page.wait_for_url(re.compile(re.escape(base) + r"/sign-in/confirm\?token=[0-9a-f]{64}$"))
                    page.get_by_role("button", name="Sign in", exact=True).click()
                    page.wait_for_url(f"{base}/account")
                    expect(page.locator("#who")).to_contain_text("Signed in as")
                    assert email in page.inner_text("#who")
                    shot("3-account")

                def create_and_copy_a_key():
                    page.get_by_label("Name of a new key").fill("browser key")
                    page.get_by_role("button", name="Create key").click()
                    page.wait_for_selector("#new-key:not([hidden])")
                    shown = page.inner_text("#new-secret").strip()
                    assert shown.startswith("svc_live_"), shown
                    page.get_by_role("button", name="Copy key").click()
                    expect(page.locator("#copied")).to_have_text(re.compile(".+"))
                    assert page.evaluate("navigator.clipboard.readText()") == shown
                    shot("4-key-created")
                    r = httpx.get(f"{base}/v1/news", params=NEWS, headers={"authorization": f"Bearer {shown}"})
                    assert r.status_code in (200, 409), r.text
                    secret["key"] = shown

                def revoke_it():
                    page.get_by_role("button", name="Revoke key browser key").click()
                    expect(page.locator("#keys")).to_contain_text("revoked")
                    shot("5-key-revoked")
                    r = httpx.get(f"{base}/v1/news", params=NEWS, headers={"authorization": f"Bearer {secret['key']}"})
                    assert r.status_code == 401, r.text

                def buy_a_plan():
                    page.goto("/account")
                    expect(page.locator("#who")).to_contain_text("researcher plan")
                    page.get_by_label(re.compile("^Desk:")).check()
                    page.get_by_role("button", name="Continue to payment").click()
                    # Not ticked: the browser's own check keeps the form here, nothing is sent.
                    assert page.evaluate("document.getElementById('attestation').validity.valueMissing")
                    assert page.url == f"{base}/account", page.url
                    page.get_by_label(re.compile("internal purposes only")).check()
                    page.get_by_role("button", name="Continue to payment").click()
                    page.wait_for_url(re.compile(re.escape(processor.url) + r"/pay/cs_test_"))
                    sent = [q for q in processor.requests() if q["path"] == "/v1/checkout/sessions"]
                    assert len(sent) == 1 and dict(sent[0]["form"])["metadata[plan]"] == "desk", sent
                    page.goto("/account?checkout=success")
                    expect(page.locator("main")).to_contain_text("Your payment is being confirmed")
                    shot("6-checkout-returned")

                def sign_out():
                    page.get_by_role("button", name="Sign out").click()
                    page.wait_for_url(f"{base}/")
                    page.goto("/account")
                    page.wait_for_url(f"{base}/sign-in?error=session_ended")
                    assert "session has ended" in page.inner_text("main")
                    shot("7-signed-out")

                def sign_in_with_provider_a():
                    # The provider vouches for the address of the account made by e-mail: the
                    # address is proven first, by a link mailed to it, confirmed here.
                    page.get_by_role("link", name="Sign in with provider A").click()
                    page.wait_for_url(f"{base}/sign-in?notice=join_link_sent")
                    assert "open the link we have just sent" in page.inner_text("main")
                    page.goto(inbox.link_for(email))
                    page.wait_for_url(re.compile(re.escape(base) + r"/sign-in/confirm\?token=[0-9a-f]{64}$"))
                    page.get_by_role("button", name="Sign in", exact=True).click()
                    page.wait_for_url(f"{base}/account")
                    expect(page.locator("#who")).to_contain_text("Signed in as")
                    assert email in page.inner_text("#who")
                    shot("8-provider-a")

                def phone_width_and_labels():
                    page.set_viewport_size({"width": 375, "height": 800})
                    page.goto("/account")
                    expect(page.locator("#who")).to_contain_text("Signed in as")
                    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
                    wide = page.evaluate(
                        "[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > innerWidth + 1)"
                        ".map(e => `${e.tagName.toLowerCase()}#${e.id}.${e.className} ${Math.round(e.getBoundingClientRect().right)}px`).slice(0, 12)"
                    )
                    assert overflow <= 0, f"{overflow}px of sideways scrolling: {wide}"
                    unlabeled = page.evaluate(
                        "[...document.querySelectorAll('input')].filter(i => !(i.labels && i.labels.length)).map(i => i.id)"
                    )
                    assert not unlabeled, unlabeled
                    # Text contrast (WCAG AA, 4.5:1) of every visible text element on the page.
                    low = page.evaluate(CONTRAST_JS)
                    assert not low, f"text below 4.5:1 contrast: {low}"
                    shot("9-phone")
                    assert not foreign, f"requests to other origins: {foreign}"

                for name, fn in [
                    ("the_landing_page_shows_the_live_sample", landing),
                    ("the_sign_in_page_is_usable_by_keyboard_in_reading_order", keyboard_order),
                    ("an_email_link_signs_in_to_the_account_page", sign_in_by_email),
                    ("a_key_is_created_copied_once_and_works", create_and_copy_a_key),
                    ("a_revoked_key_is_refused", revoke_it),
                    ("a_plan_is_bought_only_with_the_statement_ticked", buy_a_plan),
                    ("signing_out_ends_the_session", sign_out),
                    ("provider_a_joins_the_same_account_once_the_address_is_proven", sign_in_with_provider_a),
                    ("the_account_page_fits_a_phone_and_labels_every_field", phone_width_and_labels),
                ]:
                    try:
                        check(name, fn)
                    except Exception:  # noqa: BLE001 - later steps depend on earlier ones
                        shot(f"failed-{name}")
                        break
                browser.close()
        finally:
            server.stop()
            smtp.stop()
            provider.stop()
            processor.stop()
    passed = sum(results)
    print(f"browser checks: {passed} passed, {STEPS - passed} failed")
    sys.exit(0 if passed == STEPS else 1)


if __name__ == "__main__":
    main()
