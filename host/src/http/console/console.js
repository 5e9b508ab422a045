// The admin console's script, inlined into its page by `console.rs` (and admitted there by its hash). No
// framework, nothing fetched but this origin's API.
//
// It holds the caller's credential in the tab's sessionStorage and calls the documented API routes with it;
// it has no route or power of its own, so what it shows and does is exactly what the API gives that
// credential. Everything the API returns (names, SKILL.md, file contents, messages) is put on the page as
// DOM text through `h()` below, never as HTML.
'use strict';

(() => {
  const CREDENTIAL = 'dial-host.console.credential';
  // DIAL's single-blob resource types (the host's `BlobGroup::ALL`); every other type is a handler's folder
  // type (v2).
  const V1_TYPES = new Set(['files', 'prompts', 'conversations', 'applications']);
  // Bounds on what one review or comparison fetches and diffs in the page.
  const MAX_DIFFED_FILES = 60;
  const MAX_DIFFED_BYTES = 256 * 1024;
  const MAX_RENDERED_BYTES = 128 * 1024;
  const MAX_DIFF_LINES = 2000;
  // Publications rendered at once (each with its reviews); more on request.
  const PUBLICATIONS_PER_PAGE = 10;
  const MAX_DIFF_CELLS = 4_000_000;

  // ---- DOM -------------------------------------------------------------------------------------------

  /** An element with attributes (`on…` are listeners) and children (strings become text nodes). */
  function h(tag, attrs, ...children) {
    const element = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (name.startsWith('on')) element.addEventListener(name.slice(2), value);
      else if (value === true) element.setAttribute(name, '');
      else element.setAttribute(name, String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === undefined || child === null || child === false) continue;
      element.append(child instanceof Node ? child : String(child));
    }
    return element;
  }

  function table(headings, rows, attrs) {
    return h('div', { class: 'table-wrap' },
      h('table', attrs || {},
        h('thead', {}, h('tr', {}, headings.map((heading) => h('th', { scope: 'col' }, heading)))),
        h('tbody', {}, rows.map((cells) => h('tr', {}, cells.map((cell) => h('td', {}, cell)))))));
  }

  /** An error as the API said it. Inside an answer area (already a live region) it is plain; alone, an alert. */
  function errorBox(error, alone) {
    return h('div', { class: 'error', role: alone ? 'alert' : null }, describe(error));
  }

  function describe(error) {
    if (error instanceof ApiFailure) {
      const status = error.status ? `${error.status}` : 'no answer';
      return `${error.method} ${error.path} → ${status}: ${error.message}`;
    }
    return String(error && error.message ? error.message : error);
  }

  const when = (ms) => (typeof ms === 'number' ? new Date(ms).toISOString().replace('T', ' ').slice(0, 23) + ' UTC' : '—');
  const bytes = (n) => (typeof n === 'number' ? `${n.toLocaleString('en')} B` : '—');
  const code = (text) => h('code', {}, text);
  const stripSlash = (url) => url.replace(/\/+$/, '');
  const lastSegment = (url) => safeDecode(stripSlash(url).split('/').pop() || url);
  /** A resource URL as people read it: each segment decoded (the API's URLs are percent-encoded). */
  const shown = (url) => url.split('/').map(safeDecode).join('/');
  const urlCode = (path) => code(shown(path));

  // ---- The API, with the tab's credential --------------------------------------------------------------

  class ApiFailure extends Error {
    constructor(method, path, status, message, body) {
      super(message);
      Object.assign(this, { method, path, status, body });
    }
  }

  function credentialHeaders() {
    const credential = sessionStorage.getItem(CREDENTIAL);
    // The host reads a bearer value as a JWT when it is one and as an API key otherwise: one header for both.
    return credential ? { Authorization: `Bearer ${credential}` } : {};
  }

  /** A resource URL or deployment id typed or taken from the page's address, made safe to put in an API path:
   *  each segment percent-encoded as the API expects (whether it was typed encoded or not, so `?`, `#` and `%`
   *  are parts of names), and no empty, `.` or `..` segment (which would reach another route). */
  function checkedPath(path, what, minSegments) {
    const segments = path.split('/').map(safeDecode);
    if (segments.length < minSegments || segments.some((segment) => ['', '.', '..'].includes(segment))) {
      throw new Error(`Not a ${what}: ${path} (${minSegments > 1 ? '<type>/<bucket>/<path>, ' : ''}no empty, "." or ".." segment)`);
    }
    return segments.map(encodeURIComponent).join('/');
  }

  function safeDecode(segment) {
    try { return decodeURIComponent(segment); } catch { return segment; }
  }

  /** One API call. `expect`: 'json' (default), 'text' or 'response'. Failures throw an ApiFailure with the
   *  API's own message. */
  async function call(method, path, { json, headers = {}, expect = 'json' } = {}) {
    const init = { method, headers: { ...credentialHeaders(), ...headers }, cache: 'no-store', credentials: 'omit' };
    if (json !== undefined) {
      init.body = JSON.stringify(json);
      init.headers['Content-Type'] = 'application/json';
    }
    let response;
    try {
      response = await fetch(path, { ...init, referrerPolicy: 'no-referrer' });
    } catch (error) {
      throw new ApiFailure(method, path, 0, `the server did not answer (${error.message})`);
    }
    if (!response.ok) {
      const text = (await response.text()).trim();
      let body;
      try { body = JSON.parse(text); } catch { body = undefined; }
      const message = body && typeof body === 'object' && body.error && body.error.message ? body.error.message : text;
      throw new ApiFailure(method, path, response.status, message || response.statusText, body);
    }
    if (expect === 'response') return response;
    const text = await response.text();
    if (expect === 'text') return text;
    return text ? JSON.parse(text) : null;
  }

  const notFoundAsNull = (error) => {
    if (error instanceof ApiFailure && error.status === 404) return null;
    throw error;
  };

  /** Every entry of a paged answer (`path` with its query; the entries under `field`), page after page,
   *  following `nextToken`, up to `max`. */
  async function listAll(path, field = 'items', max = 5000) {
    const entries = [];
    let token = '';
    do {
      const page = await call('GET', `${path}${token ? `&token=${encodeURIComponent(token)}` : ''}`);
      entries.push(...(page[field] || []));
      token = page.nextToken || '';
    } while (token && entries.length < max);
    return entries;
  }

  // ---- Session -------------------------------------------------------------------------------------------

  const session = { admin: false, info: null, bucket: null, handlers: null };

  async function probe() {
    session.info = await call('GET', '/v1/user/info');
    session.bucket = (await call('GET', '/v1/bucket')).bucket;
    try {
      session.handlers = await call('GET', '/v1/ops/handlers');
      session.admin = true;
    } catch (error) {
      if (!(error instanceof ApiFailure) || error.status !== 403) throw error;
      session.handlers = null;
      session.admin = false;
    }
  }

  function who() {
    const info = session.info || {};
    const claims = info.userClaims || {};
    const name = info.project ? `key of project ${info.project}` : (claims.sub || claims.email || 'a user');
    const roles = (info.roles || []).join(', ') || 'none';
    return [
      h('span', {}, 'Signed in: ', h('strong', {}, name), h('span', { class: 'muted' }, ` · roles: ${roles}`)),
      h('span', { class: `badge ${session.admin ? 'ok' : 'warn'}`, id: 'role-badge' }, session.admin ? 'admin' : 'not an admin'),
      h('button', { type: 'button', id: 'signout', onclick: () => signOut() }, 'Sign out'),
    ];
  }

  /** Forgets the credential; `why` (an error) is shown on the sign-in form. */
  async function signOut(why) {
    sessionStorage.removeItem(CREDENTIAL);
    Object.assign(session, { admin: false, info: null, bucket: null, handlers: null });
    window.history.replaceState(null, '', location.pathname);
    await start();
    if (why) document.getElementById('message').replaceChildren(errorBox(why, true));
  }

  async function start() {
    const signin = document.getElementById('signin');
    const nav = document.getElementById('nav');
    const whoBox = document.getElementById('who');
    document.getElementById('view').replaceChildren();
    document.getElementById('message').replaceChildren();
    whoBox.replaceChildren();
    if (!sessionStorage.getItem(CREDENTIAL)) {
      signin.hidden = false;
      nav.hidden = true;
      document.getElementById('credential').focus();
      return;
    }
    try {
      await probe();
    } catch (error) {
      // A refused credential is forgotten; any other failure (the server away a moment) keeps it, to retry.
      const refused = error instanceof ApiFailure && error.status === 401;
      if (refused) sessionStorage.removeItem(CREDENTIAL);
      signin.hidden = !refused;
      nav.hidden = true;
      const retry = refused ? null : h('button', { type: 'button', id: 'retry', onclick: () => start() }, 'Try again');
      document.getElementById('message').replaceChildren(errorBox(error, true), retry || '');
      (retry || document.getElementById('credential')).focus();
      return;
    }
    signin.hidden = true;
    nav.hidden = false;
    for (const link of nav.querySelectorAll('[data-admin]')) link.hidden = !session.admin;
    whoBox.replaceChildren(...who());
    if (!session.admin) {
      document.getElementById('message').replaceChildren(h('p', { class: 'notice', id: 'not-admin' },
        'This credential is not an admin\'s: the API refuses it the handler list, so the console shows only what ' +
        'the API gives you (your publications, your resources\' history) and no admin actions.'));
    }
    await route();
    focusTitle();
  }

  function focusTitle() {
    const title = document.getElementById('view-title');
    if (title) title.focus();
  }

  // ---- Navigation ------------------------------------------------------------------------------------------

  const VIEWS = {
    publications: { title: 'Publications', render: viewPublications },
    applications: { title: 'Applications and consent', render: viewApplications, admin: true },
    handlers: { title: 'Handlers', render: viewHandlers, admin: true },
    history: { title: 'Resource history', render: viewHistory },
  };

  function parseHash() {
    const [name, query] = location.hash.replace(/^#/, '').split('?');
    return { name: VIEWS[name] ? name : 'publications', params: new URLSearchParams(query || '') };
  }

  let rendering = 0;

  async function route() {
    if (!session.info) return;
    const { name, params } = parseHash();
    const view = VIEWS[name];
    const ticket = ++rendering;
    for (const link of document.querySelectorAll('#nav a')) {
      if (link.dataset.view === name) link.setAttribute('aria-current', 'page');
      else link.removeAttribute('aria-current');
    }
    document.title = `${view.title} · dial-host admin console`;
    const root = h('section', { 'aria-labelledby': 'view-title', id: `view-${name}` },
      h('h2', { id: 'view-title', tabindex: '-1' }, view.title));
    const container = document.getElementById('view');
    container.replaceChildren(root);
    // Each section shows what it has as it arrives; "Loading…" stays at the end until it is complete.
    const content = h('div', { 'aria-busy': 'true' });
    const loading = h('p', { class: 'muted loading' }, 'Loading…');
    root.append(content, loading);
    try {
      if (view.admin && !session.admin) {
        content.append(h('p', { class: 'notice' }, 'Only admins can use this section; the API refuses it to this credential.'));
      } else {
        await view.render(content, params, () => ticket === rendering);
      }
    } catch (error) {
      // A credential that stopped being accepted (an expired JWT, a removed key): sign in again.
      if (error instanceof ApiFailure && error.status === 401) {
        await signOut(error);
        return;
      }
      if (ticket === rendering) content.append(errorBox(error, true));
    } finally {
      content.removeAttribute('aria-busy');
      loading.remove();
    }
  }

  /** A button whose click runs `action` and shows its outcome in `answer` (focused, so a keyboard or screen
   *  reader user lands on it). With `final`, a success removes the buttons beside it: the decision is made,
   *  and a second click could only be refused. */
  function actionButton(label, attrs, answer, action, final, confirmation) {
    const button = h('button', { type: 'button', ...attrs }, label);
    let armed = false;
    button.addEventListener('click', async () => {
      // A decision that cannot be undone asks twice: the first click says what the second will do.
      if (confirmation && !armed) {
        armed = true;
        button.textContent = `Confirm: ${label}`;
        if (attrs['aria-label']) button.setAttribute('aria-label', `Confirm: ${attrs['aria-label']}`);
        answer.replaceChildren(h('p', { class: 'notice' }, `${confirmation} Click “Confirm: ${label}” to go on.`));
        return;
      }
      armed = false;
      button.textContent = label;
      if (attrs['aria-label']) button.setAttribute('aria-label', attrs['aria-label']);
      const group = button.closest('.actions');
      const buttons = group ? [...group.querySelectorAll('button')] : [button];
      buttons.forEach((b) => { b.disabled = true; });
      answer.replaceChildren(h('p', { class: 'muted' }, 'Working…'));
      let decided = false;
      try {
        const outcome = await action();
        answer.replaceChildren(...[outcome].flat());
        decided = final;
      } catch (error) {
        answer.replaceChildren(errorBox(error));
      } finally {
        if (decided && group) group.remove();
        else buttons.forEach((b) => { b.disabled = false; });
        if (answer.isConnected) {
          answer.setAttribute('tabindex', '-1');
          answer.focus();
        }
      }
    });
    return button;
  }

  // ---- Comparing two sets of files -----------------------------------------------------------------------

  /** The files of a v2 resource (a retained version with `version`): path → {href, etag, size}. */
  async function filesOf(url, version) {
    const files = new Map();
    const base = `/v2/metadata/${stripSlash(url)}/files/`;
    let token = '';
    do {
      const query = new URLSearchParams({ recursive: 'true', limit: '1000' });
      if (token) query.set('token', token);
      if (version) query.set('version', version);
      const page = await call('GET', `${base}?${query}`);
      // The listing's own URL of the files folder, encoded as its items' URLs are (a typed URL may not be).
      const prefix = page.url;
      for (const item of page.items || []) {
        if (item.nodeType !== 'ITEM') continue;
        if (!item.url.startsWith(prefix)) throw new Error(`A listed file outside ${prefix}: ${item.url}`);
        const href = item.url.slice(prefix.length);
        const path = href.split('/').map(safeDecode).join('/');
        files.set(path, { href, etag: item.etag, size: item.contentLength });
      }
      token = page.nextToken || '';
    } while (token);
    return files;
  }

  function splitLines(text) {
    const lines = text.split(/\r?\n/);
    if (lines.length > 1 && lines[lines.length - 1] === '') lines.pop();
    return lines;
  }

  /** A line diff (longest common subsequence): [{op: ' ' | '-' | '+', text}]. */
  function lineDiff(before, after) {
    let start = 0;
    while (start < before.length && start < after.length && before[start] === after[start]) start++;
    let endA = before.length;
    let endB = after.length;
    while (endA > start && endB > start && before[endA - 1] === after[endB - 1]) { endA--; endB--; }
    const a = before.slice(start, endA);
    const b = after.slice(start, endB);
    const ops = before.slice(0, start).map((text) => ({ op: ' ', text }));
    if ((a.length + 1) * (b.length + 1) > MAX_DIFF_CELLS) {
      a.forEach((text) => ops.push({ op: '-', text }));
      b.forEach((text) => ops.push({ op: '+', text }));
    } else {
      const width = b.length + 1;
      const lcs = new Uint32Array((a.length + 1) * width);
      for (let i = a.length - 1; i >= 0; i--) {
        for (let j = b.length - 1; j >= 0; j--) {
          lcs[i * width + j] = a[i] === b[j] ? lcs[(i + 1) * width + j + 1] + 1
            : Math.max(lcs[(i + 1) * width + j], lcs[i * width + j + 1]);
        }
      }
      let i = 0;
      let j = 0;
      while (i < a.length || j < b.length) {
        // Removals before additions where either keeps the longest common run, as diff prints them.
        if (i < a.length && j < b.length && a[i] === b[j]) { ops.push({ op: ' ', text: a[i] }); i++; j++; }
        else if (i < a.length && (j === b.length || lcs[(i + 1) * width + j] >= lcs[i * width + j + 1])) {
          ops.push({ op: '-', text: a[i] }); i++;
        } else { ops.push({ op: '+', text: b[j] }); j++; }
      }
    }
    before.slice(endA).forEach((text) => ops.push({ op: ' ', text }));
    return ops;
  }

  /** The diff as lines, runs of unchanged lines beyond three of context folded. */
  function renderDiff(ops, label) {
    const box = h('div', { class: 'diff', role: 'group', 'aria-label': label });
    const changed = ops.map((op) => op.op !== ' ');
    const near = (index) => changed.slice(Math.max(0, index - 3), index + 4).some(Boolean);
    let folded = 0;
    const flush = () => {
      if (folded) box.append(h('div', { class: 'hunk' }, `  … ${folded} unchanged line${folded === 1 ? '' : 's'} …`));
      folded = 0;
    };
    let shownLines = 0;
    ops.forEach((op, index) => {
      if (shownLines > MAX_DIFF_LINES) return;
      if (op.op === ' ' && !near(index)) { folded++; return; }
      flush();
      if (++shownLines > MAX_DIFF_LINES) {
        box.append(h('div', { class: 'hunk' }, `  … the rest (${ops.length - index} lines) not shown …`));
        folded = 0;
        return;
      }
      const kind = op.op === '+' ? 'add' : op.op === '-' ? 'del' : 'same';
      box.append(h('div', { class: kind }, `${op.op} ${op.text}`));
    });
    flush();
    if (!changed.some(Boolean)) box.append(h('div', { class: 'hunk' }, '  (no line differs)'));
    return box;
  }

  /** A file's content as text, or null when it is binary (not UTF-8, or holding NUL). */
  async function textOf(path) {
    const response = await call('GET', path, { expect: 'response' });
    const buffer = await response.arrayBuffer();
    try {
      const text = new TextDecoder('utf-8', { fatal: true }).decode(buffer);
      return text.includes('\u0000') ? null : text;
    } catch {
      return null;
    }
  }

  /** Files before (null: nothing there) and after, compared: a table (sizes and MD5 hashes) and, per changed
   *  text file, its lines. `read(side, file)` fetches one file's text. */
  async function compareFiles(before, after, read, labels) {
    const box = h('div', { class: 'comparison' });
    const paths = [...new Set([...(before ? before.keys() : []), ...after.keys()])].sort();
    const status = (path) => {
      const a = before && before.get(path);
      const b = after.get(path);
      if (!a) return 'added';
      if (!b) return 'removed';
      return a.etag === b.etag && a.size === b.size ? 'unchanged' : 'changed';
    };
    const rows = paths.map((path) => {
      const a = before && before.get(path);
      const b = after.get(path);
      const state = status(path);
      return [code(path), h('span', { class: `badge ${state === 'unchanged' ? 'ok' : state === 'removed' ? 'bad' : 'warn'}` }, state),
        a ? bytes(a.size) : '—', b ? bytes(b.size) : '—', a ? code(a.etag) : '—', b ? code(b.etag) : '—'];
    });
    box.append(table(['File', 'Change', `Size (${labels[0]})`, `Size (${labels[1]})`, `MD5 (${labels[0]})`, `MD5 (${labels[1]})`], rows,
      { class: 'files-compared' }));
    const differing = paths.filter((path) => status(path) !== 'unchanged');
    for (const path of differing.slice(0, MAX_DIFFED_FILES)) {
      const a = before && before.get(path);
      const b = after.get(path);
      const heading = h('h4', {}, code(path));
      if ((a && a.size > MAX_DIFFED_BYTES) || (b && b.size > MAX_DIFFED_BYTES)) {
        box.append(heading, h('p', { class: 'muted' }, 'Too large to compare line by line here: sizes and hashes above.'));
        continue;
      }
      const [textA, textB] = await Promise.all([a ? read(0, a) : '', b ? read(1, b) : '']);
      if (textA === null || textB === null) {
        box.append(heading, h('p', { class: 'muted' }, 'Binary file: compared by size and hash above.'));
        continue;
      }
      box.append(heading, renderDiff(lineDiff(textA ? splitLines(textA) : [], textB ? splitLines(textB) : []), `Changes in ${path}`));
    }
    if (differing.length > MAX_DIFFED_FILES) {
      box.append(h('p', { class: 'muted' }, `${differing.length - MAX_DIFFED_FILES} more changed files: sizes and hashes above.`));
    }
    if (!differing.length) box.append(h('p', { class: 'notice' }, 'The files are identical.'));
    return box;
  }

  // ---- Markdown (SKILL.md), rendered as DOM -----------------------------------------------------------------

  function inline(text) {
    const nodes = [];
    // Underscores emphasise only at word boundaries (`snake_case_name` and `__init__`-like text stay as they are).
    const pattern = /(`[^`]+`)|(\*\*[^*]+\*\*|(?<!\w)__[^_]+__(?!\w))|(\*[^*\s][^*]*\*|(?<!\w)_[^_\s][^_]*_(?!\w))|\[([^\]]+)\]\(([^)\s]+)\)/g;
    let last = 0;
    for (const match of text.matchAll(pattern)) {
      nodes.push(text.slice(last, match.index));
      if (match[1]) nodes.push(h('code', {}, match[1].slice(1, -1)));
      else if (match[2]) nodes.push(h('strong', {}, inline(match[2].slice(2, -2))));
      else if (match[3]) nodes.push(h('em', {}, inline(match[3].slice(1, -1))));
      else if (/^(https?:|mailto:)/i.test(match[5])) {
        nodes.push(h('a', { href: match[5], rel: 'noopener noreferrer', target: '_blank' }, inline(match[4])));
      } else nodes.push(h('span', {}, inline(match[4]), ' (', h('code', {}, match[5]), ')'));
      last = match.index + match[0].length;
    }
    nodes.push(text.slice(last));
    return nodes.filter((node) => node !== '');
  }

  function frontmatter(yaml) {
    const list = h('dl', { class: 'front', 'aria-label': 'Frontmatter' });
    let value = null;
    for (const line of yaml.split(/\r?\n/)) {
      const field = /^([A-Za-z0-9_-]+):\s*(.*)$/.exec(line);
      if (field) {
        value = h('dd', {}, field[2].replace(/^(["'])(.*)\1$/, '$2'));
        list.append(h('dt', {}, field[1]), value);
      } else if (value && line.trim()) {
        value.append(` ${line.trim()}`);
      }
    }
    return list;
  }

  function renderMarkdown(text) {
    const root = h('div', { class: 'markdown' });
    let body = text;
    const front = /^---\r?\n([\s\S]*?)\r?\n---[ \t]*(\r?\n|$)/.exec(text);
    if (front) {
      root.append(frontmatter(front[1]));
      body = text.slice(front[0].length);
    }
    const lines = body.split(/\r?\n/);
    const isBlockStart = (line) => /^(```|~~~|#{1,6}\s|>|\s*([-*+]|\d+[.)])\s|\|)/.test(line) || /^(\*{3,}|-{3,}|_{3,})\s*$/.test(line);
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      let match;
      if (!line.trim()) { i++; continue; }
      if ((match = /^(```|~~~)/.exec(line))) {
        const fence = match[1];
        const codeLines = [];
        for (i++; i < lines.length && !lines[i].startsWith(fence); i++) codeLines.push(lines[i]);
        i++;
        root.append(h('pre', {}, h('code', {}, codeLines.join('\n'))));
      } else if ((match = /^(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line))) {
        root.append(h(`h${Math.min(6, match[1].length + 3)}`, {}, inline(match[2])));
        i++;
      } else if (/^(\*{3,}|-{3,}|_{3,})\s*$/.test(line)) {
        root.append(h('hr', {}));
        i++;
      } else if (/^>/.test(line)) {
        const quoted = [];
        for (; i < lines.length && /^>/.test(lines[i]); i++) quoted.push(lines[i].replace(/^>\s?/, ''));
        root.append(h('blockquote', {}, h('p', {}, inline(quoted.join(' ')))));
      } else if ((match = /^\s*([-*+]|\d+[.)])\s+/.exec(line))) {
        const ordered = /\d/.test(match[1]);
        const list = h(ordered ? 'ol' : 'ul', {});
        for (; i < lines.length && /^\s*([-*+]|\d+[.)])\s+/.test(lines[i]); i++) {
          list.append(h('li', {}, inline(lines[i].replace(/^\s*([-*+]|\d+[.)])\s+/, ''))));
        }
        root.append(list);
      } else if (/^\|/.test(line)) {
        const rows = [];
        for (; i < lines.length && /^\|/.test(lines[i]); i++) {
          if (/^\|[\s:|-]+\|?\s*$/.test(lines[i])) continue;
          rows.push(lines[i].replace(/^\||\|\s*$/g, '').split('|').map((cell) => inline(cell.trim())));
        }
        if (rows.length) root.append(table(rows[0], rows.slice(1)));
      } else {
        const paragraph = [];
        for (; i < lines.length && lines[i].trim() && !(paragraph.length && isBlockStart(lines[i])); i++) {
          paragraph.push(lines[i].trim());
        }
        root.append(h('p', {}, inline(paragraph.join(' '))));
      }
    }
    return root;
  }

  /** The definition file of a folder resource: SKILL.md at its root (else the first Markdown file there). */
  function definitionFile(files) {
    if (files.has('SKILL.md')) return 'SKILL.md';
    return [...files.keys()].find((path) => !path.includes('/') && /\.md$/i.test(path)) || null;
  }

  // ---- Publications -------------------------------------------------------------------------------------------

  async function viewPublications(root, params, current) {
    const url = session.admin ? 'publications/public/' : `publications/${session.bucket}/`;
    const { publications } = await call('POST', '/v1/ops/publication/list', { json: { url } });
    const shown = session.admin ? publications.filter((p) => p.status === 'PENDING') : publications;
    root.append(h('p', { class: 'muted' }, session.admin
      ? 'Pending publications from every author, oldest first. Each resource\'s review copy is compared with what is at its target now.'
      : 'Your publications and their state.'));
    if (!shown.length) {
      root.append(h('p', { class: 'notice', id: 'no-publications' },
        session.admin ? 'No pending publications.' : 'You have no publications.'));
      return;
    }
    shown.sort((a, b) => a.createdAt - b.createdAt);
    await publicationPage(root, shown, 0, current);
  }

  /** Publications `from`… of `all`, then a button for the next ones. */
  async function publicationPage(root, all, from, current) {
    const page = all.slice(from, from + PUBLICATIONS_PER_PAGE);
    for (const summary of page) {
      if (!current()) return;
      // One publication decided or withdrawn since the list was read fails alone.
      const slot = h('div', {});
      root.append(slot);
      try {
        slot.replaceWith(await publicationCard(summary));
      } catch (error) {
        slot.replaceWith(h('article', { class: 'card publication', 'data-url': summary.url }, h('h3', {}, summary.url), errorBox(error)));
      }
    }
    const rest = all.length - from - page.length;
    if (rest > 0 && current()) {
      const more = h('button', { type: 'button', class: 'more' }, `Show ${Math.min(rest, PUBLICATIONS_PER_PAGE)} more of ${rest}`);
      more.addEventListener('click', async () => {
        more.disabled = true;
        const holder = h('div', {});
        more.replaceWith(holder);
        await publicationPage(holder, all, from + PUBLICATIONS_PER_PAGE, () => holder.isConnected);
        const next = holder.querySelector('article h3');
        if (next) { next.setAttribute('tabindex', '-1'); next.focus(); }
      });
      root.append(more);
    }
  }

  const STATUS_BADGE = { PENDING: 'warn', APPROVED: 'ok', REJECTED: 'bad', WITHDRAWN: 'bad' };

  async function publicationCard(summary) {
    const publication = await call('POST', '/v1/ops/publication/get', { json: { url: summary.url } });
    const card = h('article', { class: 'card publication', 'data-url': publication.url },
      h('h3', {}, publication.name || lastSegment(publication.url)),
      h('p', { class: 'muted' }, code(publication.url), ` · by ${publication.author || 'unknown'} · ${when(publication.createdAt)} · `,
        h('span', { class: `badge ${STATUS_BADGE[publication.status] || 'warn'}` }, publication.status)),
      h('p', {}, 'Target folder: ', urlCode(publication.targetFolder)),
      publication.comment ? h('p', { class: 'notice comment' }, 'Comment: ', publication.comment) : null);
    card.append(h('h4', {}, 'Resources'), table(['Action', 'Source', 'Target', 'Review copy'],
      publication.resources.map((r) => [r.action, r.sourceUrl ? urlCode(r.sourceUrl) : '—', urlCode(r.targetUrl), r.reviewUrl ? urlCode(r.reviewUrl) : '—'])));
    if (publication.rules && publication.rules.length) {
      card.append(h('h4', {}, 'Rules on the target folder'), table(['Function', 'Source', 'Targets'],
        publication.rules.map((rule) => [rule.function, code(rule.source), (rule.targets || []).join(', ')])));
    } else {
      card.append(h('p', { class: 'muted' }, 'No rules: the target folder keeps the rules it has.'));
    }
    // Review copies exist while a publication is pending; a decided one shows its resources only.
    for (const resource of publication.status === 'PENDING' ? publication.resources : []) {
      const details = h('details', { class: 'review', open: publication.resources.length <= 3 },
        h('summary', {}, `${resource.action === 'DELETE' ? 'Removes' : 'Review of'} ${lastSegment(resource.targetUrl)}`));
      try {
        details.append(await review(resource));
      } catch (error) {
        details.append(errorBox(error));
      }
      card.append(details);
    }
    if (session.admin && publication.status === 'PENDING') {
      const answer = h('div', { class: 'answer', 'aria-live': 'polite' });
      const name = publication.name || lastSegment(publication.url);
      const comment = h('input', { type: 'text', class: 'wide', id: `comment-${publication.url}`, placeholder: 'Comment to the author (optional)' });
      const decide = (verb) => async () => {
        const body = { url: publication.url };
        if (comment.value.trim()) body.comment = comment.value.trim();
        const decided = await call('POST', `/v1/ops/publication/${verb}`, { json: body });
        const targets = decided.resources.map((r) => h('li', {}, urlCode(r.targetUrl)));
        return h('div', { class: 'success' },
          `${verb === 'approve' ? 'Approved' : 'Rejected'}: the publication is ${decided.status}.`,
          verb === 'approve' ? h('ul', {}, targets) : null);
      };
      card.append(h('label', { for: `comment-${publication.url}` }, 'Comment'), ' ', comment,
        h('div', { class: 'actions' },
          actionButton('Approve', { class: 'primary approve', 'aria-label': `Approve ${name}` }, answer, decide('approve'), true),
          actionButton('Reject', { class: 'danger reject', 'aria-label': `Reject ${name}` }, answer, decide('reject'), true,
            'Rejecting cannot be undone: the review copies are removed and the author sees your comment.')),
        answer);
    } else if (!session.admin && publication.status === 'PENDING') {
      // The author may withdraw her own pending publication (the API's `publication/delete`).
      const answer = h('div', { class: 'answer', 'aria-live': 'polite' });
      card.append(h('div', { class: 'actions' },
        actionButton('Withdraw', { class: 'danger withdraw-publication', 'aria-label': `Withdraw ${publication.name || lastSegment(publication.url)}` }, answer, async () => {
          await call('POST', '/v1/ops/publication/delete', { json: { url: publication.url }, expect: 'text' });
          return h('div', { class: 'success' }, 'Withdrawn: the publication and its review copies are removed.');
        }, true, 'Withdrawing removes the publication and its review copies.')), answer);
    }
    return card;
  }

  // A publication adds only where nothing is (DIAL's rule): what is there now is shown, and approval is refused.
  const OCCUPIED = 'Something is at the target now: approving will be refused (412) until it is removed. It is compared below.';

  /** One resource of a publication: what it adds, against what is at its target now. */
  async function review(resource) {
    const box = h('div', {});
    if (resource.action === 'DELETE') {
      box.append(h('p', {}, 'Deletes ', urlCode(resource.targetUrl), ' from public.'));
      return box;
    }
    const reviewUrl = stripSlash(resource.reviewUrl || resource.sourceUrl);
    const targetUrl = stripSlash(resource.targetUrl);
    const type = targetUrl.split('/')[0];
    if (V1_TYPES.has(type)) {
      const [after, before] = await Promise.all([
        call('GET', `/v1/metadata/${reviewUrl}`),
        call('GET', `/v1/metadata/${targetUrl}`).catch(notFoundAsNull),
      ]);
      box.append(h('p', {}, before ? OCCUPIED : 'New at the target.'));
      const one = (meta) => new Map([[lastSegment(targetUrl), { href: '', etag: meta.etag, size: meta.contentLength }]]);
      const read = (side) => textOf(`/v1/${side ? reviewUrl : targetUrl}`);
      box.append(await compareFiles(before && one(before), one(after), read, ['public now', 'proposed']));
      return box;
    }
    const [after, before] = await Promise.all([filesOf(reviewUrl), filesOf(targetUrl).catch(notFoundAsNull)]);
    box.append(h('p', {}, before ? OCCUPIED : 'New at the target.'));
    const definition = definitionFile(after);
    if (definition && after.get(definition).size > MAX_RENDERED_BYTES) {
      box.append(h('p', { class: 'muted' }, `${definition} is too large to render here (${bytes(after.get(definition).size)}).`));
    } else if (definition) {
      const text = await textOf(`/v2/${reviewUrl}/files/${after.get(definition).href}`);
      box.append(h('h4', {}, definition, ' ', h('span', { class: 'muted' }, '(rendered)')),
        text === null ? h('p', { class: 'muted' }, 'Not text.') : renderMarkdown(text));
    }
    const read = (side, file) => textOf(`/v2/${side ? reviewUrl : targetUrl}/files/${file.href}`);
    box.append(await compareFiles(before, after, read, ['public now', 'proposed']));
    return box;
  }

  // ---- Applications and consent ----------------------------------------------------------------------------

  async function storedApplications(folder) {
    const items = (await listAll(`/v1/metadata/${folder}?recursive=true&limit=1000`).catch(notFoundAsNull)) || [];
    return items.filter((item) => item.nodeType === 'ITEM').map((item) => item.url);
  }

  async function viewApplications(root, params, current) {
    const cards = h('div', { id: 'application-cards' });
    const input = h('input', { id: 'deployment-id', class: 'wide', placeholder: 'applications/<bucket>/<path>, or a configured name' });
    const form = h('form', { 'aria-label': 'Open a deployment' },
      h('label', { for: 'deployment-id' }, 'Deployment id'), input, h('button', { type: 'submit' }, 'Open'));
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      const id = input.value.trim().replace(/^\/+/, '');
      if (!id) return;
      const card = h('div', {});
      cards.prepend(card);
      try {
        await applicationCard(card, checkedPath(id, 'deployment id', 1));
      } catch (error) {
        card.replaceChildren(errorBox(error, true));
      }
    });
    root.append(h('p', { class: 'muted' },
      'Configured applications, stored ones in public and in your bucket; any other by its deployment id. Admin consent ' +
      'approves a declaration as it is now; any change to it makes the consent stale until granted again.'), form, cards);
    const [configured, publicApps, ownApps] = await Promise.all([
      call('GET', '/openai/applications').then((list) => list.data.map((app) => app.id)),
      storedApplications('applications/public/'),
      storedApplications(`applications/${session.bucket}/`),
    ]);
    const ids = [...new Set([...configured, ...publicApps, ...ownApps])];
    if (!ids.length) cards.append(h('p', { class: 'notice' }, 'No applications.'));
    for (const id of ids) {
      if (!current()) return;
      const card = h('div', {});
      cards.append(card);
      await applicationCard(card, id);
    }
  }

  const accessText = (record) => (record.access || []).join(', ');
  const recordKey = (record) => record.linkId || record.url;

  /** Approved snapshot → today's declaration, record by record (by link id). */
  function declarationChanges(approved, now) {
    const before = new Map(approved.map((record) => [recordKey(record), record]));
    const after = new Map(now.map((record) => [recordKey(record), record]));
    const rows = [];
    for (const [key, record] of before) {
      const current = after.get(key);
      if (!current) { rows.push(['removed', key, code(record.url), '—', accessText(record), '—', String(!!record.required), '—']); continue; }
      if (current.url !== record.url || accessText(current) !== accessText(record) || !!current.required !== !!record.required) {
        rows.push(['changed', key, code(record.url), code(current.url), accessText(record), accessText(current),
          String(!!record.required), String(!!current.required)]);
      }
    }
    for (const [key, record] of after) {
      if (!before.has(key)) rows.push(['added', key, '—', code(record.url), '—', accessText(record), '—', String(!!record.required)]);
    }
    return rows;
  }

  /** Renders the application's card into `card`; `notice` (an error of the last action) goes in its answer. */
  async function applicationCard(card, id, notice) {
    card.replaceChildren(h('p', { class: 'muted' }, `Loading ${id}…`));
    let state;
    try {
      state = await call('GET', `/v1/consent/${id}/admin-consent?declaration=true`);
    } catch (error) {
      card.replaceChildren(h('article', { class: 'card application', 'data-id': id }, h('h3', {}, shown(id)), errorBox(error)));
      return;
    }
    const declared = (state.declaration && state.declaration.resources) || [];
    const label = state.consented ? 'live' : state.stale ? 'stale' : declared.length ? 'none' : 'nothing declared';
    const article = h('article', { class: 'card application', 'data-id': id },
      h('h3', { tabindex: '-1' }, shown(id)),
      h('p', {}, 'Admin consent: ', h('span', { class: `badge consent-state ${label === 'live' ? 'live' : label === 'stale' ? 'stale' : 'none'}` }, label),
        state.grantedBy ? h('span', { class: 'muted' }, ` · granted by ${state.grantedBy} at ${when(state.grantedAt)}`) : null));
    if (declared.length) {
      article.append(h('h4', {}, 'Declared resource dependencies'), table(['Link id', 'Target', 'Access', 'Required'],
        declared.map((record) => [record.linkId || '—', code(record.url), accessText(record), record.required ? 'yes' : 'no']),
        { class: 'declaration' }));
    } else {
      article.append(h('p', { class: 'muted' }, 'Declares no resource dependencies: nothing to consent to.'));
    }
    if (state.stale && state.consent) {
      const changes = declarationChanges(state.consent.resources || [], declared);
      article.append(h('h4', {}, 'Changed since the approval'), changes.length ? table(
        ['Change', 'Link id', 'Target (approved)', 'Target (now)', 'Access (approved)', 'Access (now)', 'Required (approved)', 'Required (now)'],
        changes, { class: 'stale-diff' }) : h('p', { class: 'muted' }, 'No record differs in target, access or required: the records changed in some other way (their number or form).'));
    }
    const answer = h('div', { class: 'answer', 'aria-live': 'polite' });
    const actions = h('div', { class: 'actions' });
    if (declared.length && !state.consented) {
      // The grant names the declaration shown here: if the application declares something else by now, the
      // API refuses it (412) and the card shows what it declares.
      actions.append(actionButton(state.stale ? 'Grant again' : 'Grant consent', { class: 'primary grant', 'aria-label': `Grant consent to ${shown(id)}` }, answer,
        () => decideConsent(card, id, () => call('POST', `/v1/consent/${id}/admin-consent`, { json: { declaration: state.declaration } }))));
    }
    if (state.consent) {
      actions.append(actionButton('Withdraw consent', { class: 'danger withdraw', 'aria-label': `Withdraw consent to ${shown(id)}` }, answer,
        () => decideConsent(card, id, () => call('DELETE', `/v1/consent/${id}/admin-consent`, { expect: 'text' })),
        false, 'Withdrawing takes the grants away from the next call of every user.'));
    }
    article.append(actions, answer);
    if (notice) answer.replaceChildren(notice);
    card.replaceChildren(article);
  }

  /** A consent decision, then the card as the API has it now (with the refusal, if any). */
  async function decideConsent(card, id, decide) {
    let refusal;
    try {
      await decide();
    } catch (error) {
      refusal = errorBox(error);
    }
    await applicationCard(card, id, refusal);
    const heading = card.querySelector('h3');
    if (heading) heading.focus();
    return [];
  }

  // ---- Handlers --------------------------------------------------------------------------------------------

  const sourceText = (source) => (source && source.kind === 'file' ? source.path : source && source.kind === 'builtin' ? 'built-in' : JSON.stringify(source));
  const limitsText = (limits) => {
    const entries = Object.entries(limits || {}).filter(([, value]) => value !== null && value !== undefined);
    return entries.length ? entries.map(([key, value]) => `${key}: ${value}`).join('; ') : 'host defaults';
  };

  function handlersTable(handlers) {
    return table(['Group', 'Type', 'Version', 'Source', 'SHA-256', 'Strict', 'Limits'],
      handlers.map((handler) => [code(handler.group), `${handler.typeName} (${handler.displayName})`, handler.handlerVersion,
        h('span', { class: 'break' }, sourceText(handler.source)), h('code', { title: handler.sha256 }, handler.sha256.slice(0, 16) + '…'),
        handler.strict ? 'yes' : 'no', limitsText(handler.limits)]), { class: 'handlers' });
  }

  async function viewHandlers(root) {
    session.handlers = await call('GET', '/v1/ops/handlers');
    let listed = handlersTable(session.handlers);
    // After a reload the table shows what serves now, beside the report.
    const relist = async () => {
      session.handlers = await call('GET', '/v1/ops/handlers');
      const fresh = handlersTable(session.handlers);
      listed.replaceWith(fresh);
      listed = fresh;
    };
    const answer = h('div', { class: 'answer', id: 'reload-answer', 'aria-live': 'polite' });
    root.append(listed,
    h('p', { class: 'muted' }, 'Reload re-reads the handlers directory of this instance: new files load, changed ones replace ' +
      'their old version, removed ones unload; a file that fails leaves what it would replace serving. Reload each instance.'),
    h('div', { class: 'actions' }, actionButton('Reload handlers', { class: 'primary reload' }, answer, async () => {
      try {
        const report = await call('POST', '/v1/ops/handlers/reload', { json: {} });
        await relist();
        return [h('div', { class: 'success' }, 'Reloaded with no failures.'), reloadReport(report)];
      } catch (error) {
        if (error instanceof ApiFailure && error.status === 422 && error.body) {
          await relist();
          return [h('div', { class: 'error' }, 'Reloaded with failures (422): the failed files are named below.'),
            reloadReport(error.body)];
        }
        throw error;
      }
    })), answer);
  }

  function reloadReport(report) {
    const box = h('div', { class: 'reload-report' });
    box.append(h('h4', {}, 'Serving'), table(['Group', 'Version', 'Change', 'Source', 'SHA-256'],
      (report.serving || []).map((s) => [code(s.group), s.handlerVersion, h('span', { class: 'badge ok change' }, s.change),
        h('span', { class: 'break' }, sourceText(s.source)), h('code', { title: s.sha256 }, s.sha256.slice(0, 16) + '…')])));
    if ((report.failed || []).length) {
      box.append(h('h4', {}, 'Failed'), table(['Source', 'Error', 'Still serving'], report.failed.map((f) => [h('span', { class: 'break' }, sourceText(f.source)), f.error, f.stillServing || 'nothing']), { class: 'failed' }));
    }
    if ((report.removed || []).length) box.append(h('h4', {}, 'Removed'), h('ul', {}, report.removed.map((group) => h('li', {}, code(group)))));
    return box;
  }

  // ---- A resource's history ---------------------------------------------------------------------------------

  async function viewHistory(root, params) {
    const asked = stripSlash(params.get('url') || '');
    const input = h('input', { id: 'resource-url', class: 'wide', value: shown(asked), placeholder: 'skills/<bucket>/<path>' });
    const form = h('form', { 'aria-label': 'Show a resource\'s history' },
      h('label', { for: 'resource-url' }, 'Resource URL'), input, h('button', { type: 'submit' }, 'Show history'));
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      const wanted = stripSlash(input.value.trim().replace(/^\/+/, '').replace(/^v2\//, ''));
      if (!wanted) return;
      const hash = `#history?url=${encodeURIComponent(wanted)}`;
      // The same URL again: show it afresh (no hash change would).
      if (location.hash === hash) route(); else location.hash = hash;
    });
    root.append(form);
    if (!asked) {
      root.append(await ownResources());
      return;
    }
    root.append(await versionHistory(checkedPath(asked, 'resource URL', 3)));
  }

  /** The caller's own folder resources, to pick one. */
  async function ownResources() {
    const groups = session.handlers ? session.handlers.map((handler) => handler.group) : ['skills'];
    const box = h('div', {}, h('h3', {}, 'Your resources'));
    const list = h('ul', { class: 'own-resources' });
    for (const group of groups) {
      const listed = await listAll(`/v2/metadata/${group}/${session.bucket}/?recursive=true&limit=1000`).catch(notFoundAsNull);
      for (const item of listed || []) {
        if (item.nodeType !== 'ITEM') continue;
        const url = stripSlash(item.url);
        list.append(h('li', {}, h('a', { href: `#history?url=${encodeURIComponent(url)}` }, shown(url))));
      }
    }
    box.append(list.children.length ? list : h('p', { class: 'muted' }, 'None in your bucket; enter any resource URL you can read.'));
    return box;
  }

  async function versionHistory(url) {
    const box = h('div', { id: 'history', 'data-url': url });
    const versions = await listAll(`/v2/versions/${url}?limit=1000`, 'versions', Infinity);
    const current = versions.find((version) => version.current);
    const group = url.split('/')[0];
    const answer = h('div', { class: 'answer', id: 'history-answer', 'aria-live': 'polite' });
    const comparison = h('div', { id: 'comparison' });
    const radio = (name, version, checked) => h('input', { type: 'radio', name, value: version.version, checked,
      'aria-label': `${name === 'from' ? 'Compare from' : 'Compare to'} version ${version.version}` });
    const rows = versions.map((version, index) => [
      radio('from', version, index === Math.min(1, versions.length - 1)), radio('to', version, index === 0),
      code(version.version), when(version.createdAt), version.author || '—', String(version.files), bytes(version.bytes),
      version.current ? h('span', { class: 'badge ok' }, 'current') : '',
      h('div', { class: 'row' },
        h('button', { type: 'button', class: 'download', 'data-version': version.version, 'aria-label': `Download version ${version.version}`,
          onclick: () => download(url, version.version, answer) }, 'Download'),
        version.current ? null : actionButton('Restore', { class: 'restore', 'data-version': version.version, 'aria-label': `Restore version ${version.version}` }, answer, async () => {
          const restored = await call('POST', `/v2/ops/${group}/restore`, { json: { url, version: version.version },
            headers: current ? { 'If-Match': current.etag } : {}, expect: 'response' });
          const etag = restored.headers.get('ETag');
          const refreshed = await versionHistory(url);
          box.replaceWith(refreshed);
          const restoredAnswer = refreshed.querySelector('#history-answer');
          restoredAnswer.replaceChildren(h('div', { class: 'success' },
            `Restored version ${version.version}: it is current again as a new version${etag ? ` (ETag ${etag})` : ''}.`));
          restoredAnswer.setAttribute('tabindex', '-1');
          restoredAnswer.focus();
          return [];
        }, false, 'Restoring commits this version as a new one; when the history is full its oldest version is dropped.')),
    ]);
    const compare = h('button', { type: 'button', class: 'compare' }, 'Compare selected versions');
    compare.addEventListener('click', async () => {
      const from = box.querySelector('input[name=from]:checked');
      const to = box.querySelector('input[name=to]:checked');
      if (!from || !to) return;
      comparison.replaceChildren(h('p', { class: 'muted' }, 'Comparing…'));
      try {
        const [before, after] = await Promise.all([filesOf(url, from.value), filesOf(url, to.value)]);
        const read = (side, file) => textOf(`/v2/${url}/files/${file.href}?version=${encodeURIComponent(side ? to.value : from.value)}`);
        comparison.replaceChildren(h('h3', {}, 'From ', code(from.value), ' to ', code(to.value)),
          await compareFiles(before, after, read, ['from', 'to']));
      } catch (error) {
        comparison.replaceChildren(errorBox(error, true));
      }
    });
    box.append(h('h3', {}, code(shown(url))),
      table(['From', 'To', 'Version', 'Created', 'Author', 'Files', 'Size', 'State', 'Actions'], rows, { class: 'versions' }),
      h('div', { class: 'actions' }, compare), answer, comparison);
    return box;
  }

  async function download(url, version, answer) {
    try {
      const response = await call('GET', `/v2/${url}?version=${encodeURIComponent(version)}`, { expect: 'response' });
      const blob = await response.blob();
      const link = h('a', { href: URL.createObjectURL(blob), download: `${lastSegment(url)}-${version}.zip` });
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(link.href), 60_000);
      answer.replaceChildren(h('div', { class: 'success' }, `Downloaded version ${version} (${bytes(blob.size)}).`));
    } catch (error) {
      answer.replaceChildren(errorBox(error));
    }
  }

  // ---- Start -------------------------------------------------------------------------------------------------

  document.addEventListener('DOMContentLoaded', () => {
    document.getElementById('signin-form').addEventListener('submit', (event) => {
      event.preventDefault();
      const field = document.getElementById('credential');
      const credential = field.value.trim().replace(/^bearer\s+/i, '');
      field.value = '';
      if (!credential) return;
      // Header values are printable ASCII; anything else never reaches the server, so say so here.
      if (!/^[\x21-\x7e]+$/.test(credential)) {
        document.getElementById('message').replaceChildren(errorBox(new Error(
          'A key or token is printable ASCII without spaces; this one is not (was something else pasted?).'), true));
        field.focus();
        return;
      }
      sessionStorage.setItem(CREDENTIAL, credential);
      start();
    });
    // The skip link moves focus; it is not a section of its own.
    document.querySelector('.skip').addEventListener('click', (event) => {
      event.preventDefault();
      document.getElementById('main').focus();
    });
    window.addEventListener('hashchange', () => {
      route().then(focusTitle);
    });
    start();
  });
})();
