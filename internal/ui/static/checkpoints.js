// A sandbox's checkpoints as the tree their parents make.
import {h, fill, toast, modal, bytes, ago, when} from './dom.js';
import {runAction} from './sandbox.js';

export function checkpointsTab(app, sb, body, refresh) {
  let current = sb;
  const tree = h('div.tree#checkpoints');
  fill(body, h('div.toolbar', h('h3', 'Checkpoints'), h('span.spacer'),
    h('button.primary', {onclick: e => runAction(app, current, {id: 'checkpoint', label: 'Checkpoint'}, e.currentTarget, async () => { await refresh(); load(); })}, 'Take checkpoint')),
  tree);

  async function load() {
    try {
      const cks = (await app.api.get(app.api.sb(sb.id, '/checkpoints'))).checkpoints;
      if (!cks.length) { fill(tree, h('p.muted', 'No checkpoints yet.')); return; }
      const ids = new Set(cks.map(c => c.id));
      const kids = new Map();
      for (const c of cks) {
        const p = ids.has(c.parent) ? c.parent : '';
        if (!kids.has(p)) kids.set(p, []);
        kids.get(p).push(c);
      }
      const node = c => h('li', {dataset: {ckpt: c.id}},
        h('div.ck', {class: c.id === current.head ? 'head' : null},
          h('span.ckname', c.name || c.id.slice(0, 12)), h('span.tag', c.kind), c.memory ? h('span.tag', 'memory') : h('span.tag', 'files'),
          c.id === current.head ? h('span.tag.ok', 'head') : null,
          h('span.muted', 'gen ' + c.generation + ' · ' + bytes(c.memory_bytes + c.files_bytes) + ' · '),
          h('span.muted', {title: when(c.created_at)}, ago(c.created_at)),
          c.needed_by?.length ? h('span.muted', ' · needed by ' + c.needed_by.join(', ')) : null,
          h('span.spacer'),
          h('button.small', {onclick: () => restore(c)}, 'Restore'),
          h('button.small', {onclick: () => fork(c)}, 'Fork'),
          h('button.small.danger', {onclick: () => remove(c)}, 'Remove')),
        kids.has(c.id) ? h('ul', kids.get(c.id).map(node)) : null);
      fill(tree, h('ul', (kids.get('') || []).map(node)));
    } catch (e) { toast('Checkpoints: ' + (e.full || e)); }
  }

  async function restore(c) {
    const ok = await modal('Restore ' + current.name + ' to ' + (c.name || c.id.slice(0, 12)) + '?',
      h('p', 'The sandbox is rewound in place: what changed since is lost.'),
      [{label: 'Cancel'}, {label: 'Restore', primary: true, class: 'danger', value: true}]);
    if (!ok) return;
    try { await app.api.post(app.api.sb(sb.id, '/restore'), {checkpoint: c.id}); toast('Restored', 'ok'); } catch (e) { toast('Restore: ' + (e.full || e)); }
    await refresh(); load();
  }

  async function fork(c) {
    const name = h('input', {required: true, placeholder: current.name + '-fork'});
    const ok = await modal('Fork from ' + (c.name || c.id.slice(0, 12)), h('label.field', h('span', 'Name of the new sandbox'), name),
      [{label: 'Cancel'}, {label: 'Fork', primary: true, value: true}]);
    if (!ok) return;
    try {
      const out = await app.api.post(app.api.sb(sb.id, '/fork'), {name: name.value.trim(), from: c.id});
      app.go('#/s/' + encodeURIComponent(out.sandboxes[0].name));
    } catch (e) { toast('Fork: ' + (e.full || e)); }
  }

  async function remove(c) {
    const ok = await modal('Remove checkpoint ' + (c.name || c.id.slice(0, 12)) + '?', h('p', 'This cannot be undone.'),
      [{label: 'Cancel'}, {label: 'Remove', primary: true, class: 'danger', value: true}]);
    if (!ok) return;
    try { await app.api.del(app.api.sb(sb.id, '/checkpoints/' + encodeURIComponent(c.id))); } catch (e) { toast('Remove: ' + (e.full || e)); }
    load();
  }

  load();
  return {update(s) { const headMoved = s.head !== current.head; current = s; if (headMoved) load(); }};
}

// checkpointChoice is a select of s's checkpoints, newest first; with
// live, its first choice is the sandbox as it is now.
export async function checkpointChoice(app, s, live) {
  let cks = [];
  try { cks = (await app.api.get(app.api.sb(s.id, '/checkpoints'))).checkpoints; } catch (e) { toast('Checkpoints: ' + (e.full || e)); }
  return h('select', live ? h('option', {value: ''}, 'the sandbox as it is now') : null,
    cks.slice().reverse().map(c => h('option', {value: c.id}, (c.name || c.id.slice(0, 12)) + ' · ' + c.kind + ' · ' + ago(c.created_at))));
}
