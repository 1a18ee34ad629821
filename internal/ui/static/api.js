// The dashboard's only way to dend: its HTTP API, with the token the user
// signed in with. Nothing here decides what the user may do; the API does.

export class APIError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    super(e.message || ('HTTP ' + status));
    this.status = status;
    this.code = e.code || '';
    this.hint = e.hint || '';
  }
  get full() { return this.hint ? `${this.message} (${this.hint})` : this.message; }
}

const tokenKey = 'den.token';

export class API {
  constructor(token) { this.token = token; }

  static saved() {
    const t = sessionStorage.getItem(tokenKey);
    return t ? new API(t) : null;
  }
  save() { sessionStorage.setItem(tokenKey, this.token); }
  static forget() { sessionStorage.removeItem(tokenKey); }

  // fetch sends one request; body is JSON unless it is a Blob or File.
  async fetch(method, path, {body, query, signal, raw} = {}) {
    const url = new URL(path, location.origin);
    for (const [k, v] of Object.entries(query || {})) {
      if (v !== undefined && v !== null && v !== '') url.searchParams.set(k, v);
    }
    const headers = {Authorization: 'Bearer ' + this.token};
    let payload;
    if (body instanceof Blob) {
      payload = body;
      headers['Content-Type'] = 'application/octet-stream';
    } else if (body !== undefined) {
      payload = JSON.stringify(body);
      headers['Content-Type'] = 'application/json';
    }
    const res = await fetch(url, {method, headers, body: payload, signal, cache: 'no-store'});
    if (!res.ok) {
      let b = null;
      try { b = await res.json(); } catch { /* not the envelope */ }
      const err = new APIError(res.status, b);
      if (res.status === 401) window.dispatchEvent(new CustomEvent('den-unauthorized', {detail: err}));
      throw err;
    }
    if (raw) return res;
    if (res.status === 204) return null;
    return res.json();
  }

  get(path, query, signal) { return this.fetch('GET', path, {query, signal}); }
  post(path, body, query) { return this.fetch('POST', path, {body: body ?? {}, query}); }
  put(path, body, query) { return this.fetch('PUT', path, {body, query}); }
  patch(path, body) { return this.fetch('PATCH', path, {body}); }
  del(path, query) { return this.fetch('DELETE', path, {query}); }

  sb(name, rest = '') { return '/v1/sandboxes/' + encodeURIComponent(name) + rest; }

  // follow streams a run's output stream to onData (a Uint8Array at a
  // time) from byte offset from until the run ends or signal aborts. It
  // resumes where it was cut, and returns the offset reached.
  async follow(name, run, stream, from, onData, signal) {
    for (;;) {
      const res = await this.fetch('GET', this.sb(name, '/runs/' + encodeURIComponent(run) + '/logs'),
        {query: {stream, from, follow: 'true'}, signal, raw: true});
      const reader = res.body.getReader();
      for (;;) {
        const {done, value} = await reader.read();
        if (done) break;
        from += value.length;
        onData(value);
      }
      // Trailers are not visible to fetch: ask whether the run is over.
      const r = await this.get(this.sb(name, '/runs/' + encodeURIComponent(run)), null, signal);
      if (r.status !== 'running') {
        // What it wrote between the stream's end and now.
        const rest = await this.fetch('GET', this.sb(name, '/runs/' + encodeURIComponent(run) + '/logs'),
          {query: {stream, from}, signal, raw: true});
        const b = new Uint8Array(await rest.arrayBuffer());
        if (b.length) { from += b.length; onData(b); }
        return from;
      }
      await new Promise(ok => setTimeout(ok, 500));
    }
  }

  // download fetches path and hands it to the browser as a file.
  async download(path, query, filename) {
    const res = await this.fetch('GET', path, {query, raw: true});
    const url = URL.createObjectURL(await res.blob());
    const a = document.createElement('a');
    a.href = url;
    a.download = filename;
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }
}
