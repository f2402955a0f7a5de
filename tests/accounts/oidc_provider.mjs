// A real OpenID Connect provider on loopback for the sign-in checks: npm's
// `oauth2-mock-server` (discovery, JWKS, authorization code with PKCE and nonce, RS256 ID
// tokens), steered by a mode file so one provider can also misbehave on purpose:
//   ok           - a normal sign-in of EMAIL with email_verified = true
//   denied       - the user refuses: the redirect carries error=access_denied, no code
//   wrong-nonce  - the ID token names another nonce than the one the flow sent
//   other-key    - the ID token is signed by a key the provider's JWKS does not hold
//   unverified   - email_verified = false
// The mode may be followed by a subject and an address ("ok sub-2 other@example.com"): the ID
// token then names that person instead of the default subject and EMAIL.
// Usage: node oidc_provider.mjs PORT MODE_FILE EMAIL  (prints "listening <issuer>" when ready)
import crypto from "node:crypto";
import fs from "node:fs";

const { OAuth2Server } = await import(process.env.OAUTH2_MOCK_SERVER);
const [port, modeFile, email] = process.argv.slice(2);
const words = () => {
  try { return fs.readFileSync(modeFile, "utf8").trim().split(/\s+/); } catch { return []; }
};
const mode = () => words()[0] || "ok";

const server = new OAuth2Server();
await server.issuer.keys.generate("RS256");
const stranger = crypto.generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey;

server.service.on("beforeAuthorizeRedirect", (redirect) => {
  if (mode() === "denied") {
    redirect.url.searchParams.delete("code");
    redirect.url.searchParams.set("error", "access_denied");
  }
});
server.service.on("beforeTokenSigning", (token) => {
  const [, sub, address] = words();
  if (sub) token.payload.sub = sub;
  token.payload.email = address || email;
  token.payload.email_verified = mode() !== "unverified";
  if (mode() === "wrong-nonce" && token.payload.nonce) token.payload.nonce = "not-the-nonce-of-this-flow";
});
server.service.on("beforeResponse", (response) => {
  if (mode() !== "other-key" || !response.body.id_token) return;
  // Same header (kid) and claims, signed by a key the JWKS never published.
  const [header, payload] = response.body.id_token.split(".");
  const signature = crypto.sign("sha256", Buffer.from(`${header}.${payload}`), stranger);
  response.body.id_token = `${header}.${payload}.${signature.toString("base64url")}`;
});

await server.start(Number(port), "127.0.0.1");
console.log(`listening ${server.issuer.url}`);
