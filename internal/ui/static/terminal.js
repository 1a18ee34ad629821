// A terminal in the sandbox: xterm.js over the exec WebSocket (the frames
// of api/stream.go). A browser cannot set the Authorization header on a
// WebSocket, so the token travels as a subprotocol, never in the URL.
import {Terminal} from './vendor/xterm/xterm.mjs';
import {FitAddon} from './vendor/xterm/addon-fit.mjs';
import {h, fill} from './dom.js';

const F = {stdout: 1, stderr: 2, started: 3, exit: 4, error: 5, stdin: 10, resize: 12};

// The shell `den shell` starts: bash where the image has it, else sh.
const shell = ['/bin/sh', '-c', 'if command -v bash >/dev/null 2>&1; then exec bash -l; else exec sh -l; fi'];

export function terminalTab(app, sb, body) {
  const status = h('span.muted#term-status', 'connecting…');
  const again = h('button.small', {hidden: true, onclick: () => connect()}, 'New session');
  const box = h('div.term#terminal');
  fill(body, h('div.toolbar', h('span', 'Shell in ', h('code', sb.name)), status, h('span.spacer'), again), box);

  const term = new Terminal({
    cursorBlink: true, fontSize: 14, scrollback: 5000, convertEol: false,
    fontFamily: 'ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace',
    theme: {background: '#0f1419', foreground: '#d7dde5', cursor: '#7aa2f7', selectionBackground: '#33467c'},
  });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.open(box);
  fit.fit();
  const enc = new TextEncoder();
  let ws = null;

  const frame = (kind, payload) => {
    const b = new Uint8Array(1 + payload.length);
    b[0] = kind;
    b.set(payload, 1);
    return b;
  };
  const send = (kind, payload) => { if (ws?.readyState === WebSocket.OPEN) ws.send(frame(kind, payload)); };
  term.onData(d => send(F.stdin, enc.encode(d)));
  term.onBinary(d => send(F.stdin, Uint8Array.from(d, c => c.charCodeAt(0))));
  term.onResize(({rows, cols}) => send(F.resize, enc.encode(JSON.stringify({rows, cols}))));
  const onWindow = () => fit.fit();
  window.addEventListener('resize', onWindow);

  function connect() {
    again.hidden = true;
    status.textContent = 'connecting…';
    const url = (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + app.api.sb(sb.id, '/exec/ws');
    ws = new WebSocket(url, ['den.exec.v1', 'den.token.' + app.api.token]);
    ws.binaryType = 'arraybuffer';
    const sock = ws;
    let ended = false;
    sock.onopen = () => {
      sock.send(JSON.stringify({argv: shell, tty: true, stdin: true, rows: term.rows, cols: term.cols, env: {TERM: 'xterm-256color'}}));
    };
    sock.onmessage = ev => {
      if (typeof ev.data === 'string') return;
      const b = new Uint8Array(ev.data);
      const payload = b.subarray(1);
      switch (b[0]) {
      case F.stdout: case F.stderr: term.write(payload); break;
      case F.started: status.textContent = 'connected'; status.className = 'ok'; term.focus(); break;
      case F.exit: {
        ended = true;
        const r = JSON.parse(new TextDecoder().decode(payload));
        term.write('\r\n\x1b[2m[session ended' + (r.exit_code !== undefined ? ': exit ' + r.exit_code : '') + ']\x1b[0m\r\n');
        break;
      }
      case F.error: {
        ended = true;
        const e = JSON.parse(new TextDecoder().decode(payload));
        term.write('\r\n\x1b[31m' + (e.error?.message || e.message || 'error') + '\x1b[0m\r\n');
        break;
      }
      }
    };
    sock.onclose = () => {
      if (ws !== sock) return;
      status.textContent = ended ? 'ended' : 'disconnected';
      status.className = 'muted';
      again.hidden = false;
    };
  }
  connect();
  return {stop() {
    window.removeEventListener('resize', onWindow);
    const s = ws;
    ws = null;
    s?.close();
    term.dispose();
  }};
}
