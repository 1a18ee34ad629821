// Pieces the sandboxes page and the sandbox page both show.
import {h, toast, bytes, until} from './dom.js';

// limits shows a sandbox's limits, with what it uses when known.
export function limits(s, u) {
  const mem = u ? meter(u.memory_bytes, s.memory_bytes, bytes(u.memory_bytes) + ' of ' + bytes(s.memory_bytes)) : null;
  return h('div.limits',
    h('span', s.cpus + ' CPU'), ' · ', h('span', bytes(s.memory_bytes)),
    s.disk_bytes ? [' · ', h('span', bytes(s.disk_bytes) + ' disk')] : null,
    mem);
}

export function meter(used, limit, label) {
  const frac = limit ? Math.min(1, used / limit) : 0;
  const level = frac > 0.9 ? 'high' : frac > 0.7 ? 'mid' : 'low';
  return h('div.meter', {title: label},
    h('div.bar', h('div.fill', {class: level, style: `width:${(frac * 100).toFixed(1)}%`})),
    h('small', label));
}

export function nextStep(s) {
  if (!s.next) return h('span.muted', '–');
  return h('span.next', {title: new Date(s.next.at).toLocaleString()}, s.next.action + ' ' + until(s.next.at));
}

// portLinks links each exposed port. A public port is a plain link; a
// private one is signed when clicked (a link that works without a token
// until it expires), since a new tab carries no token. Links name the
// sandbox by id: names are unique only per owner, and a link by name
// breaks for callers without a token once another owner takes the name.
export function portLinks(app, s) {
  if (!s.ports?.length) return h('span.muted', '–');
  return s.ports.map(p => {
    const path = app.api.sb(s.id, '/ports/' + p.port + '/proxy/');
    return h('a.port', {class: p.public ? 'public' : 'private',
      href: path, target: '_blank', rel: 'noopener noreferrer',
      title: p.public ? 'public: anyone with the link' : 'private: opens a signed link',
      onclick: p.public ? null : async e => {
        e.preventDefault();
        try {
          const u = await app.api.get(app.api.sb(s.id, '/ports/' + p.port + '/url'));
          window.open(u.url || u.path, '_blank', 'noopener,noreferrer');
        } catch (ex) { toast('Signing a link to port ' + p.port + ': ' + (ex.full || ex)); }
      },
    }, String(p.port));
  });
}
