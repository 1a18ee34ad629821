// Drives den's web dashboard in Debian's Chromium (never a downloaded
// browser) through playwright-core, as a user would: sign in, see the
// sandbox, pause and resume it, type in its terminal, follow a run's
// output; an unknown sandbox and another owner's look the same; the other
// owner sees only its own. Prints "ok" when every step held.
//
// Env: DEN_URL (http://127.0.0.1:PORT), TOKEN and SANDBOX (an owner's
// token and its sandbox), OTHER_TOKEN and OTHER (another owner's), SHOTS
// (a directory for two screenshots, optional).
import {chromium} from 'playwright-core';
import path from 'node:path';
import {readFile} from 'node:fs/promises';

const {DEN_URL, TOKEN, SANDBOX, OTHER_TOKEN, OTHER, SHOTS} = process.env;
const base = new URL(DEN_URL);
const timeout = 60_000;

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--disable-default-apps', '--disable-extensions'],
});
const problems = [];
let page;
try {
  const ctx = await browser.newContext({viewport: {width: 1360, height: 820}});
  // Nothing but dend: a request elsewhere fails the scenario.
  await ctx.route('**/*', route => {
    const u = new URL(route.request().url());
    if (u.host === base.host || u.protocol === 'data:' || u.protocol === 'blob:') return route.continue();
    problems.push('request outside dend: ' + u.href);
    return route.abort();
  });
  page = await ctx.newPage();
  page.setDefaultTimeout(timeout);
  page.on('pageerror', e => problems.push('page error: ' + e.message));
  page.on('console', m => {
    if (m.type() === 'warning' && m.text().startsWith('den:')) process.stderr.write('page: ' + m.text() + '\n');
    if (m.type() === 'error' && /Content Security Policy|SyntaxError|TypeError|ReferenceError/.test(m.text())) problems.push('console: ' + m.text());
  });
  const step = s => process.stderr.write('step: ' + s + '\n');
  const row = name => `#sandboxes tr[data-name="${name}"]`;

  step('a bad token is refused');
  await page.goto(DEN_URL + '/ui');
  await page.fill('#token', 'den_000000000000_' + '0'.repeat(64));
  await page.click('button[type=submit]');
  await page.waitForFunction(() => /refused/.test(document.querySelector('#signin-error')?.textContent || ''));

  step('sign in and see the sandbox, running; not the other owner\'s');
  await page.fill('#token', TOKEN);
  await page.click('button[type=submit]');
  await page.waitForSelector(row(SANDBOX) + ' .pill.st-running');
  if (await page.locator(row(OTHER)).count() !== 0) throw new Error('the owner sees another owner\'s sandbox ' + OTHER);
  if (await page.evaluate(() => sessionStorage.getItem('den.token')) !== TOKEN) throw new Error('the token is not in sessionStorage');
  if (page.url().includes(TOKEN)) throw new Error('the token is in the URL');

  step('pause it and see it paused');
  await page.click(row(SANDBOX) + ' button:has-text("Pause")');
  await page.waitForSelector(row(SANDBOX) + ' .pill.st-paused');
  if (SHOTS) await page.screenshot({path: path.join(SHOTS, 'ui-sandboxes.png')});
  step('resume it');
  await page.click(row(SANDBOX) + ' button:has-text("Resume")');
  await page.waitForSelector(row(SANDBOX) + ' .pill.st-running');

  step('a command typed in the terminal runs, and its output shows');
  await page.click(row(SANDBOX) + ' td.name a');
  await page.waitForSelector('.sbhead h1');
  await page.click('nav.tabs a[data-tab=terminal]');
  await page.waitForSelector('#term-status.ok');
  await page.click('#terminal .xterm');
  await page.keyboard.type('echo hello-$((6*7))\n');
  await page.waitForFunction(() => /hello-42/.test(document.querySelector('#terminal .xterm-rows')?.textContent || ''));

  step('start a run and follow its output while it runs');
  await page.click('nav.tabs a[data-tab=runs]');
  await page.fill('#run-cmd', 'for i in 1 2 3 4 5 6; do echo line-$i; sleep 1; done; echo "<b>bold?</b>" >&2');
  await page.click('.runform button[type=submit]');
  await page.waitForFunction(() => /line-2/.test(document.querySelector('#run-output')?.textContent || ''));
  const early = await page.evaluate(() => ({
    text: document.querySelector('#run-output').textContent,
    live: !!document.querySelector('.outhead .live'),
  }));
  if (!early.live || /line-6/.test(early.text)) throw new Error('the output was not followed while the run ran: ' + JSON.stringify(early));
  await page.waitForFunction(() => /line-6\n/.test(document.querySelector('#run-output')?.textContent || '') &&
    /<b>bold\?<\/b>/.test(document.querySelector('#run-output')?.textContent || ''));
  await page.waitForSelector('.outhead .pill.st-exited');
  // Output is text: the markup it printed is shown, not obeyed.
  if (await page.locator('#run-output b').count() !== 0) throw new Error('run output was parsed as HTML');
  if (SHOTS) await page.screenshot({path: path.join(SHOTS, 'ui-sandbox.png')});

  step('files: browse, upload, download');
  await page.click('nav.tabs a[data-tab=files]');
  await page.click('#files tr[data-name="etc"] a.dir');
  await page.waitForSelector('#files tr[data-name="passwd"]');
  await page.setInputFiles('#upload', {name: 'from-browser.txt', mimeType: 'text/plain', buffer: Buffer.from('uploaded <i>as is</i>\n')});
  await page.waitForSelector('#files tr[data-name="from-browser.txt"]');
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#files tr[data-name="passwd"] a.file')]);
  const passwd = await readFile(await download.path(), 'utf8');
  if (!passwd.startsWith('root:')) throw new Error('downloaded /etc/passwd: ' + JSON.stringify(passwd.slice(0, 80)));

  step('checkpoint, see it in the tree, fork from it, remove the fork after confirming');
  await page.click('nav.tabs a[data-tab=checkpoints]');
  await page.click('button:has-text("Take checkpoint")');
  await page.fill('dialog input:not([type])', 'before');
  await page.click('dialog button[type=submit]');
  await page.waitForSelector('#checkpoints li .ckname:text-is("before")');
  await page.click('#checkpoints li:has(.ckname:text-is("before")) button:has-text("Fork")');
  await page.fill('dialog input', SANDBOX + '-copy');
  await page.click('dialog button[type=submit]');
  await page.waitForFunction(n => document.querySelector('.sbhead h1')?.textContent === n, SANDBOX + '-copy');
  await page.waitForSelector('.sbhead .pill.st-running');
  await page.click('.sbhead button[data-action=remove]');
  await page.click('dialog button[type=submit]');
  await page.waitForSelector(row(SANDBOX));
  await page.waitForFunction(sel => !document.querySelector(sel), row(SANDBOX + '-copy'));

  step('restore it to the checkpoint from its page');
  await page.click(row(SANDBOX) + ' td.name a');
  await page.click('.sbhead button[data-action=restore]');
  await page.waitForSelector('dialog select');
  const before = await page.$eval('dialog select', s => [...s.options].find(o => o.textContent.startsWith('before ')).value);
  await page.selectOption('dialog select', before);
  await page.click('dialog button[type=submit]');
  await page.waitForFunction(() => /Restore .*: done/.test(document.querySelector('#toast')?.textContent || ''));

  step('create a sandbox from the dialog, and set its network policy');
  await page.goto(DEN_URL + '/ui/#/');
  await page.click('#create');
  await page.fill('dialog input[name=name]', 'made-in-ui');
  await page.selectOption('dialog select[name=image]', 'busybox');
  await page.fill('dialog input[name=memory]', '256M');
  await page.selectOption('dialog select[name=network]', 'none');
  await page.click('dialog button[type=submit]');
  await page.waitForFunction(() => document.querySelector('.sbhead h1')?.textContent === 'made-in-ui');
  await page.waitForSelector('.sbhead .pill.st-running');
  await page.click('nav.tabs a[data-tab=network]');
  await page.selectOption('#net-mode', 'allow');
  await page.fill('#net-allow', '198.51.100.7:443');
  await page.click('#net-mode >> xpath=ancestor::form >> button[type=submit]');
  await page.waitForFunction(() => /allow \(1 rules\)/.test(document.querySelector('.sbhead .facts')?.textContent || ''));

  step('the services tab shows the service den keeps running');
  await page.goto(DEN_URL + '/ui/#/s/' + SANDBOX + '/services');
  await page.waitForSelector('#services tr[data-service=tick] .pill.st-running');

  step('history shows the pause');
  await page.goto(DEN_URL + '/ui/#/s/' + SANDBOX + '/history');
  await page.waitForSelector('#history td .pill.st-paused');

  step('another owner\'s sandbox is not found, exactly as one that does not exist');
  const notFound = async name => {
    await page.goto(DEN_URL + '/ui/#/s/' + name);
    await page.waitForSelector('.notfound');
    return (await page.textContent('.notfound p')).replaceAll(name, 'NAME');
  };
  const theirs = await notFound(OTHER);
  const nobody = await notFound('no-such-sandbox');
  if (theirs !== nobody) throw new Error(`another owner's sandbox answers ${JSON.stringify(theirs)}, a missing one ${JSON.stringify(nobody)}`);

  step('sign out; the other owner sees only its own');
  await page.goto(DEN_URL + '/ui/#/');
  await page.click('#who button');
  await page.fill('#token', OTHER_TOKEN);
  await page.click('button[type=submit]');
  await page.waitForSelector(row(OTHER));
  if (await page.locator(row(SANDBOX)).count() !== 0) throw new Error('the other owner sees ' + SANDBOX);
} catch (e) {
  // What the page showed, to tell why.
  console.error('problems so far:', problems);
  console.error('page text:', await page?.evaluate(() => document.body.innerText).catch(() => ''));
  throw e;
} finally {
  await browser.close();
}
if (problems.length) {
  console.error(problems.join('\n'));
  process.exit(1);
}
console.log('ok');
