// A sandbox's runs: start one, list them, and show one's output, followed
// live while it runs.
import {h, fill, pill, toast, ago, when} from './dom.js';

const every = 3000;
const maxShown = 4 << 20; // characters of output kept on the page

export function runsTab(app, sb, body) {
  let stopped = false;
  let timer = null;
  let selected = null; // run id
  let follow = null; // AbortController of the output being read
  const cmd = h('input#run-cmd', {placeholder: 'a shell command, e.g. for i in 1 2 3; do echo $i; sleep 1; done', required: true, autocomplete: 'off'});
  const list = h('tbody');
  const outHead = h('div.outhead');
  const out = h('pre.output#run-output');
  fill(body,
    h('form.runform', {onsubmit: start}, cmd, h('button.primary', {type: 'submit'}, 'Run')),
    h('div.split',
      h('table.list.runs#runs', h('thead', h('tr', ['Status', 'Command', 'Started', ''].map(t => h('th', t)))), list),
      h('div.outpane', outHead, out)));

  async function start(e) {
    e.preventDefault();
    try {
      const run = await app.api.post(app.api.sb(sb.id, '/exec'), {argv: ['/bin/sh', '-c', cmd.value], detach: true});
      cmd.value = '';
      await load();
      select(run);
    } catch (ex) { toast('Starting the run: ' + (ex.full || ex)); }
  }

  async function poll() {
    await load();
    if (!stopped) timer = setTimeout(poll, every);
  }

  async function load() {
    try {
      const runs = (await app.api.get(app.api.sb(sb.id, '/runs'), {limit: 50})).runs;
      fill(list, runs.map(r => h('tr', {class: r.id === selected ? 'selected' : null, dataset: {run: r.id, status: r.status},
        onclick: () => select(r)},
      h('td', pill(r.status, exitText(r))), h('td.cmd', h('code', argvText(r))),
      h('td.muted', {title: when(r.started_at)}, ago(r.started_at)),
      h('td', r.status === 'running' ? h('button.small', {onclick: ev => { ev.stopPropagation(); signal(r); }}, 'Stop') : exitText(r)))));
      if (!runs.length) fill(list, h('tr', h('td.muted', {colSpan: 4}, 'No runs yet.')));
    } catch (ex) { if (!stopped) toast('Runs: ' + (ex.full || ex)); }
  }

  async function signal(r) {
    try { await app.api.post(app.api.sb(sb.id, '/runs/' + r.id + '/signal'), {signal: 'TERM'}); } catch (ex) { toast(ex.full || String(ex)); }
  }

  async function select(r) {
    follow?.abort();
    follow = new AbortController();
    const signal = follow.signal;
    selected = r.id;
    for (const tr of list.children) tr.classList.toggle('selected', tr.dataset.run === r.id);
    const status = h('span', pill(r.status));
    fill(outHead, h('code', argvText(r)), ' ', status, r.status === 'running' ? h('span.live', 'following') : null);
    out.replaceChildren();
    const writer = stream => {
      const dec = new TextDecoder();
      return b => {
        const text = dec.decode(b, {stream: true});
        if (!text) return;
        const atEnd = out.scrollTop + out.clientHeight >= out.scrollHeight - 4;
        out.append(stream === 'stderr' ? h('span.stderr', text) : document.createTextNode(text));
        while (out.textContent.length > maxShown && out.firstChild) out.firstChild.remove();
        if (atEnd) out.scrollTop = out.scrollHeight;
      };
    };
    try {
      if (r.status === 'running') {
        await Promise.all(['stdout', 'stderr'].map(s => app.api.follow(sb.id, r.id, s, 0, writer(s), signal)));
      } else {
        for (const s of ['stdout', 'stderr']) {
          const res = await app.api.fetch('GET', app.api.sb(sb.id, '/runs/' + r.id + '/logs'), {query: {stream: s}, signal, raw: true});
          writer(s)(new Uint8Array(await res.arrayBuffer()));
        }
      }
      if (signal.aborted) return;
      load();
      const end = await app.api.get(app.api.sb(sb.id, '/runs/' + r.id), null, signal);
      fill(outHead, h('code', argvText(end)), ' ', pill(end.status), ' ', h('span.muted', exitText(end)));
      if (!out.firstChild) out.append(h('span.muted', '(no output)'));
    } catch (ex) {
      if (!signal.aborted) toast('Output of the run: ' + (ex.full || ex));
    }
  }

  poll();
  return {stop() { stopped = true; clearTimeout(timer); follow?.abort(); }};
}

function argvText(r) {
  const a = r.argv || [];
  return a.length === 3 && a[0] === '/bin/sh' && a[1] === '-c' ? a[2] : a.join(' ');
}

function exitText(r) {
  if (r.status === 'running') return '';
  if (r.signal) return 'signal ' + r.signal + (r.limit_hit ? ' (' + r.limit_hit + ' limit)' : '');
  if (r.exit_code !== undefined && r.exit_code !== null) return 'exit ' + r.exit_code;
  return '';
}
