// Building the page. Every value from the API enters the page as a text
// node or an attribute value set through the DOM, never as HTML, so a
// sandbox name, a file name or a command's output cannot become markup.

// h makes an element: h('a.link#home', {href: '#'}, 'text', child, [more]).
// Attributes named on* take functions (event handlers); null, undefined
// and false children are skipped.
export function h(spec, attrs, ...children) {
  // spec is tag, then any of .class and #id.
  const [tag, ...rest] = spec.split(/(?=[.#])/);
  const el = document.createElement(tag || 'div');
  const classes = [];
  for (const r of rest) {
    if (r[0] === '#') el.id = r.slice(1);
    else classes.push(r.slice(1));
  }
  if (classes.length) el.className = classes.join(' ');
  if (attrs && (typeof attrs !== 'object' || attrs instanceof Node || Array.isArray(attrs))) {
    children.unshift(attrs);
    attrs = null;
  }
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className += (el.className ? ' ' : '') + v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k in el && typeof v !== 'string') el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// clear empties el and fills it with children.
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export function bytes(n) {
  if (n === undefined || n === null) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n : n.toFixed(n < 10 ? 1 : 0)) + ' ' + units[i];
}

// span says how long d milliseconds is, roughly: 45s, 12m, 3h, 2d.
export function span(ms) {
  const s = Math.round(Math.abs(ms) / 1000);
  if (s < 60) return s + 's';
  if (s < 3600) return Math.round(s / 60) + 'm';
  if (s < 86400) return Math.round(s / 3600) + 'h';
  return Math.round(s / 86400) + 'd';
}

export function ago(t) {
  if (!t) return '–';
  return span(Date.now() - new Date(t).getTime()) + ' ago';
}

export function until(t) {
  const ms = new Date(t).getTime() - Date.now();
  return ms <= 0 ? 'now' : 'in ' + span(ms);
}

export function when(t) {
  if (!t) return '–';
  const d = new Date(t);
  return d.toLocaleString(undefined, {dateStyle: 'short', timeStyle: 'medium'});
}

// pill shows a sandbox or run state in its colour.
export function pill(state, extra) {
  return h('span.pill', {class: 'st-' + String(state).replace(/[^a-z]/g, ''), title: extra || null}, state);
}

// toast shows a short message at the bottom of the page.
let toastTimer;
export function toast(msg, kind = 'error') {
  if (kind === 'error') console.warn('den:', msg);
  const el = document.getElementById('toast');
  fill(el, h('div.toast', {class: kind}, msg));
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => el.replaceChildren(), kind === 'error' ? 8000 : 3000);
}

// modal shows a dialog with body and buttons; it resolves with the
// value of the button pressed, or null when dismissed.
export function modal(title, body, buttons) {
  return new Promise(resolve => {
    const dlg = h('dialog.modal');
    const done = v => { dlg.close(); dlg.remove(); resolve(v); };
    fill(dlg,
      h('form', {method: 'dialog', onsubmit: e => { e.preventDefault(); done(buttons.find(b => b.primary)?.value ?? true); }},
        h('h3', title), body,
        h('div.buttons', buttons.map(b => h('button', {
          type: b.primary ? 'submit' : 'button', class: b.class || (b.primary ? 'primary' : ''),
          onclick: b.primary ? null : () => done(b.value ?? null),
        }, b.label)))));
    dlg.addEventListener('cancel', () => done(null));
    document.body.append(dlg);
    dlg.showModal();
    dlg.querySelector('input, select, button[type=submit]')?.focus();
  });
}

// field is a labelled input for a form in a modal.
export function field(label, input, help) {
  return h('label.field', h('span', label), input, help ? h('small', help) : null);
}
