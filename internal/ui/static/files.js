// A sandbox's files: browse directories, download a file, upload into the
// directory shown.
import {h, fill, toast, bytes, ago, when} from './dom.js';

export function filesTab(app, sb, body) {
  let dir = '/';
  const crumbs = h('div.path');
  const list = h('tbody');
  const upload = h('input#upload', {type: 'file', multiple: true, onchange: () => send(upload.files)});
  fill(body,
    h('div.toolbar', crumbs, h('span.spacer'),
      h('label.button', upload, 'Upload here'),
      h('button', {onclick: () => open(dir)}, 'Refresh')),
    h('table.list.files#files', h('thead', h('tr', ['Name', 'Size', 'Mode', 'Owner', 'Modified'].map(t => h('th', t)))), list));

  async function open(path) {
    try {
      const files = (await app.api.get(app.api.sb(sb.id, '/files/list'), {path})).files;
      dir = path;
      files.sort((a, b) => (b.type === 'dir') - (a.type === 'dir') || a.name.localeCompare(b.name));
      const parts = path.split('/').filter(Boolean);
      fill(crumbs, h('a', {href: '#', onclick: e => { e.preventDefault(); open('/'); }}, '/'),
        parts.map((p, i) => [h('a', {href: '#', onclick: e => { e.preventDefault(); open('/' + parts.slice(0, i + 1).join('/')); }}, p), '/']));
      const up = path === '/' ? null : h('tr', h('td', h('a', {href: '#', onclick: e => { e.preventDefault(); open('/' + parts.slice(0, -1).join('/')); }}, '..')), h('td'), h('td'), h('td'), h('td'));
      fill(list, up, files.map(f => h('tr', {dataset: {name: f.name, type: f.type}},
        h('td.fname', f.type === 'dir' ?
          h('a.dir', {href: '#', onclick: e => { e.preventDefault(); open(join(path, f.name)); }}, f.name + '/') :
          f.type === 'file' ?
            h('a.file', {href: '#', title: 'Download', onclick: e => { e.preventDefault(); download(f); }}, f.name) :
            h('span', f.name, f.target ? h('span.muted', ' → ' + f.target) : null)),
        h('td.num', f.type === 'file' ? bytes(f.size) : ''),
        h('td', h('code', (f.mode & 0o7777).toString(8).padStart(4, '0'))),
        h('td.muted', f.owner || f.uid),
        h('td.muted', {title: when(f.mod_time)}, ago(f.mod_time)))));
    } catch (e) { toast('Listing ' + path + ': ' + (e.full || e)); }
  }

  async function download(f) {
    try { await app.api.download(app.api.sb(sb.id, '/files/content'), {path: f.path || join(dir, f.name)}, f.name); } catch (e) { toast('Downloading ' + f.name + ': ' + (e.full || e)); }
  }

  async function send(files) {
    for (const f of files) {
      try {
        await app.api.put(app.api.sb(sb.id, '/files/content'), f, {path: join(dir, f.name)});
        toast('Uploaded ' + f.name, 'ok');
      } catch (e) { toast('Uploading ' + f.name + ': ' + (e.full || e)); }
    }
    upload.value = '';
    open(dir);
  }

  open(dir);
  return {};
}

function join(dir, name) { return (dir.endsWith('/') ? dir : dir + '/') + name; }
