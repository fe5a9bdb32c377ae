// A real OpenID Connect provider for the SSO tests: npm's certified `oidc-provider` (installed
// under .oidc/ by `make oidc`), with a sign-in form that checks the password of the accounts in
// a JSON file, and first-party consent (the company's own app is not asked about).
//
//   node tests/oidc/provider.mjs PORT ACCOUNTS.json CLIENT_ID CLIENT_SECRET REDIRECT_URI
//
// Prints "ready ISSUER" on stdout once it listens. Accounts: {"login": {"password": "...",
// "claims": {"email": ..., "groups": [...], ...}}}; the login is the subject (`sub`).
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { URL, fileURLToPath, pathToFileURL } from 'node:url';
import { dirname, join } from 'node:path';

const [port, accountsPath, clientId, clientSecret, redirectUri] = process.argv.slice(2);
const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const moduleUrl = pathToFileURL(join(root, '.oidc', 'node_modules', 'oidc-provider', 'lib', 'index.js'));
const { default: Provider } = await import(moduleUrl.href);
const accounts = JSON.parse(readFileSync(accountsPath, 'utf8'));
const issuer = `http://127.0.0.1:${port}`;

const provider = new Provider(issuer, {
  clients: [{
    client_id: clientId,
    client_secret: clientSecret,
    redirect_uris: [redirectUri],
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_post',
  }],
  scopes: ['openid', 'email', 'profile', 'groups'],
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'preferred_username'],
    groups: ['groups'],
  },
  async findAccount(ctx, id) {
    const account = accounts[id];
    if (!account) return undefined;
    return { accountId: id, async claims() { return { sub: id, ...account.claims }; } };
  },
  features: { devInteractions: { enabled: false } },
  pkce: { required: () => true },
  cookies: { keys: ['finops-test-oidc-cookie-key'] },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
});

const escape = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function page(res, uid, error) {
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
  res.end(`<!doctype html><html><head><title>Company sign-in</title></head><body>
<h1>Company sign-in</h1>${error ? `<p id="error">${escape(error)}</p>` : ''}
<form method="post" action="/interaction/${escape(uid)}/login">
<input id="login" name="login" type="text"><input id="password" name="password" type="password">
<button id="sign-in" type="submit">Sign in</button></form></body></html>`);
}

async function readForm(req) {
  let body = '';
  for await (const chunk of req) body += chunk;
  return new URLSearchParams(body);
}

async function consent(req, res, details) {
  const { prompt, params, session, grantId } = details;
  const grant = grantId
    ? await provider.Grant.find(grantId)
    : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
  if (prompt.details.missingOIDCScope) grant.addOIDCScope(prompt.details.missingOIDCScope.join(' '));
  if (prompt.details.missingOIDCClaims) grant.addOIDCClaims(prompt.details.missingOIDCClaims);
  const result = { consent: { grantId: await grant.save() } };
  await provider.interactionFinished(req, res, result, { mergeWithLastSubmission: true });
}

async function interaction(req, res, uid, action) {
  const details = await provider.interactionDetails(req, res);
  if (details.prompt.name === 'consent') return consent(req, res, details);
  if (action !== 'login' || req.method !== 'POST') return page(res, uid, '');
  const form = await readForm(req);
  const account = accounts[form.get('login')];
  if (!account || account.password !== form.get('password')) {
    return page(res, uid, 'Wrong login or password.');
  }
  const result = { login: { accountId: form.get('login') } };
  return provider.interactionFinished(req, res, result, { mergeWithLastSubmission: false });
}

const callback = provider.callback();
createServer((req, res) => {
  const match = new URL(req.url, issuer).pathname.match(/^\/interaction\/([\w-]+)(?:\/(\w+))?$/);
  if (!match) return callback(req, res);
  return interaction(req, res, match[1], match[2]).catch((err) => {
    res.writeHead(400, { 'content-type': 'text/plain' });
    res.end(`interaction failed: ${err.message}`);
  });
}).listen(Number(port), '127.0.0.1', () => {
  process.stdout.write(`ready ${issuer}\n`);
});
