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
    // The change in words too, for whoever does not see the colour or the sign.
    const said = kind === 'add' ? 'added: ' : kind === 'del' ? 'removed: ' : '';
    box.append(h('div', { class: kind }, said ? h('span', { class: 'sr-only' }, said) : null, `${op.op} ${op.text}`));
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
    return [plainName(path), h('span', { class: `badge ${state === 'unchanged' ? 'ok' : state === 'removed' ? 'bad' : 'warn'}` }, state),
      a ? bytes(a.size) : '—', b ? bytes(b.size) : '—', a ? code(a.etag) : '—', b ? code(b.etag) : '—'];
  });
  box.append(table(['File', 'Change', `Size (${labels[0]})`, `Size (${labels[1]})`, `MD5 (${labels[0]})`, `MD5 (${labels[1]})`], rows,
    { class: 'files-compared' }));
  const differing = paths.filter((path) => status(path) !== 'unchanged');
  for (const path of differing.slice(0, MAX_DIFFED_FILES)) {
    const a = before && before.get(path);
    const b = after.get(path);
    const heading = h('h4', {}, plainName(path));
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
