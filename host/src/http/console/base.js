// The admin console's script, in parts (this one first) inlined into its page by `console.rs`, which wraps
// them in one strict function scope (and admitted there by its hash). No
// framework, nothing fetched but this origin's API.
//
// It holds the caller's credential in the tab's sessionStorage and calls the documented API routes with it;
// it has no route or power of its own, so what it shows and does is exactly what the API gives that
// credential. Everything the API returns (names, SKILL.md, file contents, messages) is put on the page as
// DOM text through `h()` below, never as HTML.

const CREDENTIAL = 'dial-host.console.credential';
// DIAL's single-blob resource types (the host's `BlobGroup::ALL`); every other type is a handler's folder
// type (v2).
const V1_TYPES = new Set(['files', 'prompts', 'conversations', 'applications']);
// Bounds on what one review or comparison fetches and diffs in the page.
const MAX_DIFFED_FILES = 60;
const MAX_DIFFED_BYTES = 256 * 1024;
const MAX_RENDERED_BYTES = 128 * 1024;
const MAX_DIFF_LINES = 2000;
// Requests one view keeps in flight at once (the browser's own limit per origin is 6).
const PARALLEL_REQUESTS = 6;
// A two-step confirmation disarms itself after this long, or when focus leaves its button.
const CONFIRM_WINDOW_MS = 8000;
// Signed out after this long without a key press, click or scroll (a JWT also ends at its expiry). A test or a
// stricter page may shorten it through sessionStorage; nothing can lengthen it.
const IDLE_LIMIT_MS = 15 * 60 * 1000;
const IDLE_OVERRIDE = 'dial-host.console.idle-seconds';
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

// Times in the reader's own zone, to the minute (the ISO instant is in the title of `timeNode`).
const TIME_FORMAT = new Intl.DateTimeFormat('en-GB', { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit',
  minute: '2-digit', timeZoneName: 'short' });
const when = (ms) => (typeof ms === 'number' ? TIME_FORMAT.format(new Date(ms)) : '—');
const timeNode = (ms) => (typeof ms === 'number' ? h('time', { datetime: new Date(ms).toISOString(), title: new Date(ms).toISOString() }, when(ms)) : '—');
/** How long ago, in the largest whole unit. */
function age(ms) {
  if (typeof ms !== 'number') return '—';
  const minutes = Math.max(0, Math.round((Date.now() - ms) / 60000));
  if (minutes < 1) return 'just now';
  if (minutes < 60) return `${minutes} min`;
  if (minutes < 48 * 60) return `${Math.round(minutes / 60)} h`;
  return `${Math.round(minutes / 1440)} days`;
}

/** Runs `task` over `items` with at most PARALLEL_REQUESTS at once; the results in order. */
async function inParallel(items, task) {
  const results = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await task(items[index], index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(PARALLEL_REQUESTS, items.length) }, worker));
  return results;
}

// Characters that reorder or hide text (bidi controls, zero-width and other invisible ones): a file name
// holding one can show as another name. They are shown as their code points, and flagged.
const HIDDEN_CHARACTERS = /[\u00ad\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb]/gu;
const hasHiddenCharacters = (text) => new RegExp(HIDDEN_CHARACTERS.source, 'u').test(text);
/** A name as text with each hidden character spelled out (`⟨U+202E⟩`), and a flag when there was one. */
function plainName(text) {
  if (!hasHiddenCharacters(text)) return code(text);
  const spelled = text.replace(HIDDEN_CHARACTERS, (c) => `⟨U+${c.codePointAt(0).toString(16).toUpperCase().padStart(4, '0')}⟩`);
  return h('span', { class: 'hidden-chars' }, code(spelled), ' ',
    h('span', { class: 'badge bad', title: 'Holds characters that reorder or hide text: it may not be what it looks like' }, 'hidden characters'));
}
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

const session = { admin: false, info: null, bucket: null, handlers: null, types: null };

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

/** Forgets the credential; `why` (an error) is shown on the sign-in form. Signed out for a reason (an expired
 *  token, idleness) the page keeps its address, so signing in again comes back to the same view. */
async function signOut(why) {
  sessionStorage.removeItem(CREDENTIAL);
  Object.assign(session, { admin: false, info: null, bucket: null, handlers: null, types: null });
  if (!why) window.history.replaceState(null, '', location.pathname);
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

// `nav`: the section a view belongs to (the detail of a publication is under Publications).
const VIEWS = {
  publications: { title: 'Publications', render: viewPublications },
  publication: { title: 'Publication', render: viewPublication, nav: 'publications' },
  public: { title: 'Public folders', render: viewPublic, admin: true },
  'public-folder': { title: 'Public folder', render: viewPublicFolder, admin: true, nav: 'public' },
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
    if (link.dataset.view === (view.nav || name)) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  document.title = `${view.title} · dial-host admin console`;
  const root = h('section', { 'aria-labelledby': 'view-title', id: `view-${name}` },
    h('h2', { id: 'view-title', tabindex: '-1' }, view.title));
  const container = document.getElementById('view');
  container.replaceChildren(root);
  // Each section shows what it has as it arrives; "Loading…" stays at the end until it is complete.
  const content = h('div', { 'aria-busy': 'true' });
  const loading = h('p', { class: 'muted loading', role: 'status' }, 'Loading…');
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

/** After an action: `element` replaced by `build(notice)` — what it shows, read afresh, with a copy of the action's
 *  `outcome` in its answer, focused there. If reading fails, the outcome stays on `element`. Returns `outcome`. */
async function showAfresh(element, build, outcome) {
  try {
    const fresh = await build(outcome.cloneNode(true));
    element.replaceWith(fresh);
    const answer = fresh.querySelector('.answer');
    answer.setAttribute('tabindex', '-1');
    answer.focus();
  } catch {
    // Done all the same: the outcome stays where it was.
  }
  return outcome;
}

/** A button whose click runs `action` and shows its outcome in `answer` (focused, so a keyboard or screen
 *  reader user lands on it). With `final`, a success removes the buttons beside it: the decision is made,
 *  and a second click could only be refused. */
function actionButton(label, attrs, answer, action, final, confirmation) {
  const button = h('button', { type: 'button', ...attrs }, label);
  let armed = false;
  let disarmTimer = 0;
  // The question stands for a few seconds and while focus stays on the button: a click later or elsewhere
  // first asks again.
  const disarm = (why) => {
    clearTimeout(disarmTimer);
    if (!armed) return;
    armed = false;
    button.textContent = label;
    if (attrs['aria-label']) button.setAttribute('aria-label', attrs['aria-label']);
    if (why && answer.isConnected) answer.replaceChildren(h('p', { class: 'muted disarmed' }, why));
  };
  button.addEventListener('blur', () => disarm('Not confirmed: nothing was done.'));
  button.addEventListener('click', async () => {
    // A decision that cannot be undone asks twice: the first click says what the second will do. `confirmation`
    // may be a function: asked only when it returns a question.
    let asking = confirmation;
    if (typeof confirmation === 'function' && !armed) {
      button.disabled = true;
      try {
        asking = await confirmation();
      } catch (error) {
        answer.replaceChildren(errorBox(error));
        return;
      } finally {
        button.disabled = false;
      }
    }
    if (asking && !armed) {
      armed = true;
      button.textContent = `Confirm: ${label}`;
      if (attrs['aria-label']) button.setAttribute('aria-label', `Confirm: ${attrs['aria-label']}`);
      answer.replaceChildren(h('div', { class: 'notice' }, asking,
        ` Click “Confirm: ${label}” within ${CONFIRM_WINDOW_MS / 1000} seconds to go on.`));
      button.focus();
      disarmTimer = setTimeout(() => disarm('Not confirmed in time: nothing was done.'), CONFIRM_WINDOW_MS);
      return;
    }
    clearTimeout(disarmTimer);
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
      // A credential that stopped being accepted: sign in again, and come back here.
      if (error instanceof ApiFailure && error.status === 401) {
        await signOut(error);
        return;
      }
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
