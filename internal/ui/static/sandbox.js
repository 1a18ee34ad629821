// One sandbox: its header and actions, refreshed every 2 s, and its tabs.
import {h, fill, pill, toast, modal, field, bytes, when, ago} from './dom.js';
import {limits, meter, nextStep, portLinks} from './parts.js';
import {runsTab} from './runs.js';
import {filesTab} from './files.js';
import {checkpointsTab, checkpointChoice} from './checkpoints.js';
import {terminalTab} from './terminal.js';

const every = 2000;

const tabs = [
  ['overview', 'Overview'], ['terminal', 'Terminal'], ['runs', 'Runs'], ['files', 'Files'],
  ['checkpoints', 'Checkpoints'], ['services', 'Services'], ['history', 'History'], ['network', 'Network'],
];

export function sandboxPage(app, name, tab) {
  const link = '#/s/' + encodeURIComponent(name);
  app.crumbs(h('a', {href: '#/'}, 'Sandboxes'), h('a', {href: link}, name));
  let stopped = false;
  let timer = null;
  let sb = null;
  let headKey = '';
  let tabCtl = null;
  const head = h('div.sbhead');
  const body = h('div.tabbody');
  fill(app.main, head,
    h('nav.tabs', tabs.map(([id, label]) => h('a', {href: link + '/' + id, class: id === tab ? 'active' : null, dataset: {tab: id}}, label))),
    body);

  const refresh = async () => {
    try {
      sb = await app.api.get(app.api.sb(name));
    } catch (e) {
      if (stopped) return; // another page is shown now
      if (e.status === 404) {
        fill(app.main, h('div.notfound', h('h1', 'No sandbox “' + name + '”'),
          h('p.muted', e.message), h('a', {href: '#/'}, 'Back to the sandboxes')));
        stopped = true;
        tabCtl?.stop?.();
        return;
      }
      toast(e.full || String(e));
    }
    if (!sb || stopped) return;
    const key = JSON.stringify(sb, (k, v) => k === 'running_for' || k === 'updated_at' ? undefined : v);
    if (key !== headKey) {
      headKey = key;
      renderHead();
      tabCtl?.update?.(sb);
    }
  };
  const poll = async () => {
    await refresh();
    if (!stopped) timer = setTimeout(poll, every);
  };

  function renderHead() {
    fill(head,
      h('div.title', h('h1', sb.name), pill(sb.state, sb.reason), sb.pending ? h('span.muted', sb.pending + '…') : null,
        h('span.spacer'),
        h('div.actions', actionsFor(sb, 'page').map(a => h('button', {
          class: a.danger ? 'danger' : a.primary ? 'primary' : '', title: a.title || null, dataset: {action: a.id},
          onclick: e => runAction(app, sb, a, e.currentTarget, refresh),
        }, a.label)))),
      h('div.facts',
        fact('Generation', sb.generation), fact('Image', sb.image + ':' + sb.image_version),
        fact('Limits', limits(sb, sb.state === 'running' ? sb.usage : null)),
        fact('Idle policy', nextStep(sb)), fact('Ports', portLinks(app, sb)),
        fact('Network', sb.network.mode + (sb.network.allow?.length ? ' (' + sb.network.allow.length + ' rules)' : '')),
        sb.node ? fact('Node', sb.node) : null),
      sb.reason ? h('p', {class: sb.state === 'error' ? 'reason' : 'muted'}, sb.reason) : null);
  }

  (async () => {
    await refresh();
    if (stopped || !sb) return;
    const make = {overview: overviewTab, terminal: terminalTab, runs: runsTab, files: filesTab,
      checkpoints: checkpointsTab, services: servicesTab, history: historyTab, network: networkTab}[tab] || overviewTab;
    tabCtl = make(app, sb, body, refresh);
    timer = setTimeout(poll, every);
  })();
  return {stop() { stopped = true; clearTimeout(timer); tabCtl?.stop?.(); }};
}

function fact(label, value) {
  return h('div.fact', h('span.label', label), h('span.value', value));
}

// actionsFor lists what can be done to s in its state; where is 'row'
// (the list, the frequent ones) or 'page' (all).
export function actionsFor(s, where) {
  const out = [];
  const add = (id, label, extra = {}) => out.push({id, label, ...extra});
  const page = where === 'page';
  switch (s.state) {
  case 'running':
    add('pause', 'Pause', {title: 'Freeze it in RAM'});
    add('hibernate', 'Hibernate', {title: 'Save it to disk and free its RAM'});
    if (page) { add('checkpoint', 'Checkpoint'); add('fork', 'Fork'); add('restore', 'Restore'); }
    add('stop', 'Stop');
    break;
  case 'paused':
    add('resume', 'Resume', {primary: true});
    add('hibernate', 'Hibernate');
    if (page) { add('checkpoint', 'Checkpoint'); add('fork', 'Fork'); add('restore', 'Restore'); }
    add('stop', 'Stop');
    break;
  case 'hibernated':
    add('resume', 'Resume', {primary: true});
    if (page) { add('fork', 'Fork'); add('restore', 'Restore'); }
    add('stop', 'Stop');
    break;
  case 'stopped':
    add('start', 'Start', {primary: true});
    if (page) { add('fork', 'Fork'); add('restore', 'Restore'); }
    break;
  case 'error':
    add('recover', 'Recover', {primary: true, title: 'Restore its checkpoint again'});
    add('stop', 'Stop');
    break;
  }
  if (s.state !== 'destroyed' && s.state !== 'creating') add('remove', 'Remove', {danger: true});
  return out;
}

// runAction carries out action a on s, from button btn, then refresh().
export async function runAction(app, s, a, btn, refresh) {
  const path = rest => app.api.sb(s.id || s.name, rest);
  let call;
  switch (a.id) {
  case 'pause': case 'resume': case 'hibernate': case 'stop': case 'start': case 'recover':
    call = () => app.api.post(path('/' + a.id));
    break;
  case 'remove': {
    // The API wants force for a live sandbox: this dialog is the asking.
    const live = s.state === 'running' || s.state === 'paused';
    const ok = await modal('Remove ' + s.name + '?', h('div.form',
      live ? h('p', 'It is ' + s.state + ': its processes are killed.') : null,
      h('p', 'Its files, runs and checkpoints go with it. This cannot be undone.')),
    [{label: 'Cancel'}, {label: 'Remove', primary: true, class: 'danger', value: true}]);
    if (!ok) return;
    call = async () => {
      await app.api.del(path(''), live ? {force: 'true'} : null);
      if (location.hash.startsWith('#/s/')) app.go('#/');
    };
    break;
  }
  case 'checkpoint': {
    const name = h('input', {placeholder: 'optional label, e.g. before-upgrade'});
    const fsOnly = h('input', {type: 'checkbox'});
    const ok = await modal('Checkpoint ' + s.name, h('div.form', field('Name', name),
      h('label.check', fsOnly, ' Files only (no memory: quicker, its processes are not kept)')),
    [{label: 'Cancel'}, {label: 'Take checkpoint', primary: true, value: true}]);
    if (!ok) return;
    call = () => app.api.post(path('/checkpoints'), {name: name.value.trim() || undefined, fs_only: fsOnly.checked || undefined});
    break;
  }
  case 'fork': {
    const name = h('input', {required: true, placeholder: s.name + '-fork'});
    const from = await checkpointChoice(app, s, true);
    const ok = await modal('Fork ' + s.name, h('div.form', field('Name of the new sandbox', name), field('From', from)),
      [{label: 'Cancel'}, {label: 'Fork', primary: true, value: true}]);
    if (!ok) return;
    call = async () => {
      const out = await app.api.post(path('/fork'), {name: name.value.trim(), from: from.value || undefined});
      const child = out.sandboxes?.[0];
      if (child) app.go('#/s/' + encodeURIComponent(child.name));
    };
    break;
  }
  case 'restore': {
    const from = await checkpointChoice(app, s, false);
    if (!from.options.length) { toast(s.name + ' has no checkpoints to restore'); return; }
    const ok = await modal('Restore ' + s.name, h('div.form', field('Checkpoint', from),
      h('p.muted', 'The sandbox is rewound in place: what changed since that checkpoint is lost.')),
    [{label: 'Cancel'}, {label: 'Restore', primary: true, class: 'danger', value: true}]);
    if (!ok) return;
    call = () => app.api.post(path('/restore'), {checkpoint: from.value});
    break;
  }
  default:
    return;
  }
  const label = btn?.textContent;
  if (btn) { btn.disabled = true; btn.textContent = label + '…'; }
  try {
    await call();
    toast(a.label + ' ' + s.name + ': done', 'ok');
  } catch (e) {
    toast(a.label + ' ' + s.name + ': ' + (e.full || e));
  } finally {
    if (btn) { btn.disabled = false; btn.textContent = label; }
    await refresh?.();
  }
}

function overviewTab(app, sb, body) {
  const render = s => {
    const u = s.usage;
    fill(body, h('div.grid',
      h('section.card', h('h3', 'Use against limits'),
        s.state !== 'running' || !u ? h('p.muted', 'Measured while it runs.') : [
          meter(u.memory_bytes, s.memory_bytes, 'Memory ' + bytes(u.memory_bytes) + ' of ' + bytes(s.memory_bytes)),
          s.pids ? meter(u.pids, s.pids, 'Processes ' + u.pids + ' of ' + s.pids) : h('p', 'Processes ' + u.pids),
          s.disk_bytes ? meter(u.disk_bytes, s.disk_bytes, 'Disk ' + bytes(u.disk_bytes) + ' of ' + bytes(s.disk_bytes)) :
            h('p', 'Disk ' + bytes(u.disk_bytes) + ' (no cap)'),
          meter(u.run_output_bytes, u.run_output_limit_bytes, 'Run output kept ' + bytes(u.run_output_bytes) + ' of ' + bytes(u.run_output_limit_bytes)),
          h('p', 'CPU time ' + u.cpu_seconds.toFixed(1) + ' s on ' + s.cpus + ' CPU'),
        ]),
      h('section.card', h('h3', 'Idle policy'), h('dl',
        dt('Next step', nextStep(s)), dt('Pause after', s.policy.pause_after), dt('Hibernate after', s.policy.hibernate_after),
        dt('TTL', s.policy.ttl), dt('Ran for', s.running_for), dt('Background counts', s.policy.background_active ? 'yes' : 'no'))),
      h('section.card', h('h3', 'About'), h('dl',
        dt('Id', h('code', s.id)), dt('Address', s.address || '–'), dt('Created', when(s.created_at)),
        dt('Origin', s.origin || '–'), dt('Head checkpoint', s.head || '–'),
        s.labels ? dt('Labels', Object.entries(s.labels).map(([k, v]) => h('span.tag', k + '=' + v))) : null))));
  };
  render(sb);
  return {update: render};
}

function dt(label, value) { return [h('dt', label), h('dd', value ?? '–')]; }

function historyTab(app, sb, body) {
  let timer;
  let stopped = false;
  const load = async () => {
    try {
      const evs = (await app.api.get(app.api.sb(sb.id, '/events'))).events;
      fill(body, h('table.list#history', h('thead', h('tr', ['When', 'Event', 'Change', 'Gen', 'Detail'].map(t => h('th', t)))),
        h('tbody', evs.slice().reverse().map(e => h('tr',
          h('td.muted', {title: when(e.time)}, ago(e.time)), h('td', e.type),
          h('td', e.from ? pill(e.from) : null, e.from || e.to ? ' → ' : null, e.to ? pill(e.to) : null),
          h('td.num', e.generation), h('td.detail', e.message || ''))))));
    } catch (e) { toast('History: ' + (e.full || e)); }
    if (!stopped) timer = setTimeout(load, 5000);
  };
  load();
  return {stop() { stopped = true; clearTimeout(timer); }};
}

// servicesTab lists the long-lived processes den keeps running in the
// sandbox (`den service ls`), with their states, refreshed while open.
function servicesTab(app, sb, body) {
  let timer;
  let stopped = false;
  const exit = x => !x ? '–' : x.error ? 'could not start' : x.signal ? 'killed (' + x.signal + ')' : 'exit ' + x.code;
  const load = async () => {
    try {
      const svcs = (await app.api.get(app.api.sb(sb.id, '/services'))).services;
      fill(body, svcs.length ? h('table.list#services',
        h('thead', h('tr', ['Service', 'State', 'PID', 'Restarts', 'Last exit', 'Policy', 'Command', 'Run'].map(t => h('th', t)))),
        h('tbody', svcs.map(v => h('tr', {dataset: {service: v.name, state: v.state}},
          h('td', v.name), h('td', pill(v.state)), h('td.num', v.pid || '–'), h('td.num', v.restarts),
          h('td', {title: v.last_exit ? when(v.last_exit.at) + (v.last_exit.error ? ': ' + v.last_exit.error : '') : null}, exit(v.last_exit)),
          h('td', v.restart), h('td', h('code', v.argv.join(' '))),
          h('td', v.run_id ? h('code', v.run_id) : '–'))))) :
        h('p.muted#services', 'No services. Add one with ', h('code', 'den service add ' + sb.name + ' SVC -- CMD...'), '.'));
    } catch (e) { toast('Services: ' + (e.full || e)); }
    if (!stopped) timer = setTimeout(load, 3000);
  };
  load();
  return {stop() { stopped = true; clearTimeout(timer); }};
}

function networkTab(app, sb, body, refresh) {
  const mode = h('select#net-mode', ['none', 'allow', 'open'].map(m => h('option', {value: m, selected: m === sb.network.mode}, m)));
  const allow = h('textarea#net-allow', {rows: 6, placeholder: 'one rule a line: pypi.org:443, 10.0.0.0/8, *.example.com:80,443'},
    (sb.network.allow || []).join('\n'));
  const save = async e => {
    e.preventDefault();
    const rules = allow.value.split('\n').map(s => s.trim()).filter(Boolean);
    try {
      await app.api.put(app.api.sb(sb.id, '/network'), {mode: mode.value, allow: rules.length ? rules : undefined});
      toast('Network policy saved', 'ok');
      refresh();
    } catch (ex) { toast('Network policy: ' + (ex.full || ex)); }
  };
  const port = h('input', {type: 'number', min: 1, max: 65535, placeholder: '8080', required: true});
  const pub = h('input', {type: 'checkbox'});
  const expose = async e => {
    e.preventDefault();
    try {
      await app.api.put(app.api.sb(sb.id, '/ports/' + Number(port.value)), {public: pub.checked || undefined});
      toast('Port ' + port.value + ' exposed', 'ok');
      refresh();
    } catch (ex) { toast('Exposing port ' + port.value + ': ' + (ex.full || ex)); }
  };
  const ports = h('ul.ports');
  const render = s => fill(ports, (s.ports || []).map(p => h('li', portLinks(app, {...s, ports: [p]}),
    p.public ? h('span.tag', 'public') : h('span.tag', 'private'),
    h('button.small', {onclick: async () => {
      try { await app.api.del(app.api.sb(s.id, '/ports/' + p.port)); refresh(); } catch (ex) { toast(ex.full || String(ex)); }
    }}, 'Unexpose'))));
  render(sb);
  fill(body, h('div.grid',
    h('section.card', h('h3', 'Egress'),
      h('p.muted', 'none: nothing outside; allow: only the rules below; open: the internet (never private networks).'),
      h('form.form', {onsubmit: save}, field('Mode', mode), field('Allow', allow), h('button.primary', {type: 'submit'}, 'Save'))),
    h('section.card', h('h3', 'Exposed ports'), ports,
      h('form.form.inline', {onsubmit: expose}, field('Port', port), h('label.check', pub, ' public'),
        h('button', {type: 'submit'}, 'Expose')))));
  return {update: render};
}
