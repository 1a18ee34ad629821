// den's dashboard: sign-in, the router, and the sandboxes page. The
// sandbox page is in sandbox.js, the terminal in terminal.js.
import {h, fill, pill, toast, modal, field, ago, until} from './dom.js';
import {limits, nextStep, portLinks} from './parts.js';
import {API} from './api.js';
import {sandboxPage, actionsFor, runAction} from './sandbox.js';

const main = document.getElementById('main');
const crumbs = document.getElementById('crumbs');
const who = document.getElementById('who');

// The page shown; stop() ends its polling and connections.
let current = null;
const app = {api: API.saved(), main, crumbs};

app.go = hash => { location.hash = hash; };
app.crumbs = (...parts) => fill(crumbs, parts.map((p, i) => [i ? h('span.sep', '/') : null, p]));

function route() {
  current?.stop?.();
  current = null;
  if (!app.api) { signIn(); return; }
  fill(who, h('button.ghost', {onclick: signOut, title: 'Forget the token in this tab'}, 'Sign out'));
  const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  if (parts[0] === 's' && parts[1]) current = sandboxPage(app, parts[1], parts[2] || 'overview');
  else current = listPage(app);
}

function signOut() {
  API.forget();
  app.api = null;
  location.hash = '#/';
  route();
}

// A token dend refuses (revoked, expired) sends the user back to sign in.
window.addEventListener('den-unauthorized', e => {
  if (!app.api) return;
  API.forget();
  app.api = null;
  route();
  toast('Signed out: ' + e.detail.full);
});
window.addEventListener('hashchange', route);
route();

function signIn() {
  app.crumbs();
  who.replaceChildren();
  const input = h('input#token', {type: 'password', autocomplete: 'off', spellcheck: 'false', placeholder: 'den_…', required: true});
  const err = h('p.error#signin-error');
  const submit = async e => {
    e.preventDefault();
    const api = new API(input.value.trim());
    err.textContent = '';
    try {
      await api.get('/v1/sandboxes');
    } catch (ex) {
      err.textContent = ex.status === 401 ? 'dend refused this token: ' + ex.message : ex.full || String(ex);
      return;
    }
    api.save();
    app.api = api;
    route();
  };
  fill(main, h('div.signin',
    h('h1', 'Sign in to den'),
    h('p.muted', 'Paste an API token. `den token create` makes one; dend keeps an admin token in its data directory. ',
      'An owner token sees only its own sandboxes. The token stays in this browser tab.'),
    h('form', {onsubmit: submit}, field('API token', input), h('button.primary', {type: 'submit'}, 'Sign in'), err)));
  input.focus();
}

// Sandboxes: the list, refreshed every 2 s.
const listEvery = 2000;
const usageEvery = 10000;
const usageRows = 24; // running sandboxes whose usage is fetched, first in the list

function listPage(app) {
  app.crumbs(h('a', {href: '#/'}, 'Sandboxes'));
  let stopped = false;
  let timer = null;
  const rows = new Map(); // name → {key, tr}
  const usage = new Map(); // name → api.Usage
  let usageAt = 0;
  let list = [];
  const filter = h('input.filter', {type: 'search', placeholder: 'Filter by name, image, state…', oninput: () => render()});
  const summary = h('div.summary');
  const tbody = h('tbody');
  const empty = h('p.empty.muted');
  fill(app.main,
    h('div.toolbar', h('h1', 'Sandboxes'), summary, h('span.spacer'), filter,
      h('button.primary#create', {onclick: () => createDialog(app)}, 'New sandbox')),
    h('table.list#sandboxes', h('thead', h('tr',
      ['Name', 'State', 'Gen', 'Image', 'Limits and use', 'Idle policy', 'Ports', 'Created', ''].map(t => h('th', t)))), tbody),
    empty);

  async function refresh() {
    try {
      list = (await app.api.get('/v1/sandboxes')).sandboxes;
      if (!stopped) render();
    } catch (e) {
      if (!stopped) toast('Listing sandboxes: ' + (e.full || e));
    }
  }

  async function poll() {
    await refresh();
    if (Date.now() - usageAt > usageEvery) loadUsage();
    if (!stopped) timer = setTimeout(poll, listEvery);
  }

  async function loadUsage() {
    usageAt = Date.now();
    const running = list.filter(s => s.state === 'running').slice(0, usageRows);
    await Promise.all(running.map(async s => {
      try {
        const full = await app.api.get(app.api.sb(s.name));
        if (full.usage) usage.set(s.name, full.usage);
      } catch { /* gone meanwhile */ }
    }));
    if (!stopped) render();
  }

  function render() {
    const q = filter.value.trim().toLowerCase();
    const shown = q ? list.filter(s => [s.name, s.image, s.state, s.owner || ''].some(v => v.toLowerCase().includes(q))) : list;
    const counts = {};
    for (const s of list) counts[s.state] = (counts[s.state] || 0) + 1;
    fill(summary, Object.entries(counts).sort().map(([st, n]) => h('span.count', pill(st), ' ', n)));
    empty.textContent = list.length === 0 ? 'No sandboxes yet. “New sandbox” makes one; so does `den create NAME`.' :
      shown.length === 0 ? 'No sandbox matches the filter.' : '';
    const seen = new Set();
    const trs = shown.map(s => {
      seen.add(s.name);
      const u = s.state === 'running' ? usage.get(s.name) : null;
      const key = JSON.stringify([s, u, s.next ? until(s.next.at) : '', ago(s.created_at)], (k, v) => k === 'running_for' || k === 'updated_at' ? undefined : v);
      let row = rows.get(s.name);
      if (!row || row.key !== key) {
        const tr = sandboxRow(app, s, u, refresh);
        if (row) row.tr.replaceWith(tr);
        row = {key, tr};
        rows.set(s.name, row);
      }
      return row.tr;
    });
    for (const name of rows.keys()) if (!seen.has(name)) rows.delete(name);
    // Keep rows that did not change in place: a click on one is not lost.
    if (trs.length !== tbody.children.length || trs.some((tr, i) => tbody.children[i] !== tr)) tbody.replaceChildren(...trs);
  }

  poll();
  return {stop() { stopped = true; clearTimeout(timer); }};
}

function sandboxRow(app, s, u, refresh) {
  const link = '#/s/' + encodeURIComponent(s.name);
  return h('tr', {dataset: {name: s.name, state: s.state}},
    h('td.name', h('a', {href: link}, s.name), s.ephemeral ? h('span.tag', 'ephemeral') : null,
      s.owner ? h('div.sub', 'owner ' + s.owner) : null),
    h('td', pill(s.state, s.reason), s.pending ? h('div.sub', s.pending + '…') : null,
      s.reason ? h('div.sub', {class: s.state === 'error' ? 'reason' : null}, s.reason) : null),
    h('td.num', s.generation),
    h('td', s.image, h('span.muted', ':' + s.image_version), s.image_outdated ? h('span.tag.warn', {title: 'a newer version exists: `den rebase`'}, 'outdated') : null),
    h('td', limits(s, u)),
    h('td', nextStep(s)),
    h('td', portLinks(app, s)),
    h('td.muted', {title: new Date(s.created_at).toLocaleString()}, ago(s.created_at)),
    h('td.actions', actionsFor(s, 'row').map(a => h('button', {
      class: a.danger ? 'danger small' : 'small', title: a.title || null,
      onclick: e => runAction(app, s, a, e.currentTarget, refresh),
    }, a.label))));
}

async function createDialog(app) {
  let images = [];
  try { images = (await app.api.get('/v1/images')).images; } catch { /* typed instead */ }
  const names = [...new Set(images.map(i => i.name))].sort();
  const name = h('input', {name: 'name', required: true, placeholder: 'web'});
  const image = names.length ? h('select', {name: 'image'}, names.map(n => h('option', {value: n, selected: n === 'debian'}, n))) :
    h('input', {name: 'image', placeholder: 'debian'});
  const cpus = h('input', {name: 'cpus', type: 'number', min: '0.1', step: '0.1', placeholder: '1'});
  const memory = h('input', {name: 'memory', placeholder: '1G'});
  const network = h('select', {name: 'network'}, h('option', {value: ''}, 'dend’s default'),
    h('option', {value: 'none'}, 'none: no egress'), h('option', {value: 'open'}, 'open: the internet'));
  const ok = await modal('New sandbox', h('div.form',
    field('Name', name), field('Image', image),
    h('div.row', field('CPUs', cpus), field('Memory', memory)), field('Network', network)),
  [{label: 'Cancel'}, {label: 'Create', primary: true, value: true}]);
  if (!ok) return;
  const req = {name: name.value.trim(), image: image.value || undefined, memory: memory.value.trim() || undefined};
  if (cpus.value) req.cpus = Number(cpus.value);
  if (network.value) req.network = {mode: network.value};
  toast('Creating ' + req.name + '…', 'info');
  try {
    const sb = await app.api.post('/v1/sandboxes', req);
    toast('Created ' + sb.name, 'ok');
    app.go('#/s/' + encodeURIComponent(sb.name));
  } catch (e) {
    toast('Creating ' + req.name + ': ' + (e.full || e));
  }
}
