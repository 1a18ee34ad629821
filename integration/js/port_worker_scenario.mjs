// A page a sandbox serves under dend's own address tries to take over
// dend's origin, where the dashboard keeps its token: it registers a
// service worker with scope "/" (its server allows that scope), plants a
// cookie and writes to the origin's storage. Then the dashboard at /ui
// signs in and lists sandboxes. No worker may control /ui or see its
// requests, and the sandbox's cookie must not be dend's. Debian's
// Chromium through playwright-core; every request goes to dend on
// loopback (host names resolve to nothing). Last, the dashboard's link to
// the sandbox's public port must work without a token while another
// owner has a sandbox of the same name. Prints "ok" when every step held,
// else what went wrong.
//
// Env: DEN_URL (http://127.0.0.1:PORT), PAGE (the sandbox's page, a path
// under dend), TOKEN (an owner's token for /ui), SANDBOX (a sandbox of
// that owner, which /ui lists).
import {chromium} from 'playwright-core';

const {DEN_URL, PAGE, TOKEN, SANDBOX} = process.env;
const base = new URL(DEN_URL);
const timeout = 60_000;

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--disable-default-apps', '--disable-extensions',
    '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1'],
});
const problems = [];
const step = s => process.stderr.write('step: ' + s + '\n');
try {
  // No request interception: it would change how Chromium runs service
  // workers. Requests are watched instead, and names resolve to nothing.
  const ctx = await browser.newContext();
  const seenBy = [];
  ctx.on('request', r => {
    const u = new URL(r.url());
    if (u.host !== base.host && !['data:', 'blob:', 'about:'].includes(u.protocol)) problems.push('request outside dend: ' + u.href);
    if (r.serviceWorker()) seenBy.push(r.url());
  });

  step('the sandbox\'s page tries to register a worker for all of dend');
  const page = await ctx.newPage();
  page.setDefaultTimeout(timeout);
  await page.goto(DEN_URL + PAGE);
  await page.waitForFunction(() => document.title === 'done');
  const said = await page.evaluate(() => document.body.textContent);
  process.stderr.write('page: ' + said + '\n');
  if (!/^worker refused/.test(said)) problems.push('the sandbox\'s page registered a service worker: ' + said);

  step('the dashboard signs in and lists sandboxes');
  const ui = await ctx.newPage();
  ui.setDefaultTimeout(timeout);
  const fromWorker = [];
  ui.on('response', r => { if (r.fromServiceWorker()) fromWorker.push(r.url()); });
  await ui.goto(DEN_URL + '/ui');
  await ui.fill('#token', TOKEN);
  await ui.click('button[type=submit]');
  await ui.waitForSelector(`#sandboxes tr[data-name="${SANDBOX}"]`);
  await ui.reload();
  await ui.waitForSelector(`#sandboxes tr[data-name="${SANDBOX}"]`);

  const controlled = await ui.evaluate(() => navigator.serviceWorker.controller?.scriptURL || '');
  if (controlled) problems.push('a service worker controls /ui: ' + controlled);
  const regs = await ui.evaluate(async () => (await navigator.serviceWorker.getRegistrations()).map(r => r.scope));
  if (regs.length) problems.push('service workers registered at dend\'s origin: ' + regs.join(', '));
  if (ctx.serviceWorkers().length) problems.push('service workers running: ' + ctx.serviceWorkers().map(w => w.url()).join(', '));
  if (fromWorker.length) problems.push('/ui answers that came through a worker: ' + fromWorker.join(', '));
  if (seenBy.length) problems.push('requests a worker made: ' + seenBy.join(', '));

  step('the dashboard\'s link to the public port works without a token, though another owner has a sandbox of the same name');
  const href = await ui.getAttribute(`#sandboxes tr[data-name="${SANDBOX}"] a.port.public`, 'href');
  const stranger = await browser.newContext();
  try {
    const res = await stranger.request.get(new URL(href, DEN_URL).href);
    if (res.status() !== 200 || !(await res.text()).includes('public page')) {
      problems.push(`the dashboard's port link ${href}: ${res.status()} ${await res.text()}`);
    }
  } finally {
    await stranger.close();
  }

  const cookies = await ctx.cookies(DEN_URL);
  if (cookies.length) problems.push('cookies at dend\'s origin: ' + cookies.map(c => c.name + '=' + c.value).join('; '));
  if (await ui.evaluate(() => sessionStorage.getItem('planted') || localStorage.getItem('planted'))) {
    problems.push('the sandbox\'s page wrote to dend\'s storage');
  }
} catch (e) {
  problems.push('scenario: ' + (e.stack || e));
} finally {
  await browser.close();
}
console.log(problems.length ? problems.join('\n') : 'ok');
