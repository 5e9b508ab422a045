// ---- Markdown (SKILL.md), rendered as DOM -----------------------------------------------------------------

// A link's or image's target: anything but spaces, with balanced parentheses inside (`wiki/Foo_(bar)`).
const LINK_TARGET = String.raw`((?:[^()\s]|\([^()\s]*\))+)`;
const INLINE = new RegExp(String.raw`(` + '`[^`]+`' + String.raw`)|(\*\*[^*]+\*\*|(?<!\w)__[^_]+__(?!\w))|(\*[^*\s][^*]*\*|(?<!\w)_[^_\s][^_]*_(?!\w))|(!?)\[([^\]]*)\]\(` + LINK_TARGET + String.raw`\)`, 'g');

/** Inline Markdown as DOM. `files` (optional): `{has(path), open(path)}`, the resource's own files, which
 *  relative links open in the page. */
function inline(text, files) {
  const nodes = [];
  // Underscores emphasise only at word boundaries (`snake_case_name` and `__init__`-like text stay as they are).
  let last = 0;
  for (const match of text.matchAll(INLINE)) {
    nodes.push(text.slice(last, match.index));
    const [, codeSpan, strong, em, bang, label, target] = match;
    if (codeSpan) nodes.push(h('code', {}, codeSpan.slice(1, -1)));
    else if (strong) nodes.push(h('strong', {}, inline(strong.slice(2, -2), files)));
    else if (em) nodes.push(h('em', {}, inline(em.slice(1, -1), files)));
    else if (bang) {
      // Images are not fetched (the page loads nothing but the API): named, with where they point.
      nodes.push(h('span', { class: 'image-ref' }, `[image${label ? `: ${label}` : ''}] (`, h('code', {}, target), ')'));
    } else if (/^(https?:|mailto:)/i.test(target)) {
      nodes.push(h('a', { href: target, rel: 'noopener noreferrer', target: '_blank' }, inline(label, files)));
    } else if (files && files.has(ownPath(target))) {
      const path = ownPath(target);
      nodes.push(h('a', { href: '#', class: 'file-link', 'data-path': path,
        onclick: (event) => { event.preventDefault(); files.open(path); } }, inline(label, files)));
    } else nodes.push(h('span', {}, inline(label, files), ' (', h('code', {}, target), ')'));
    last = match.index + match[0].length;
  }
  nodes.push(text.slice(last));
  return nodes.filter((node) => node !== '');
}

/** A relative link's file path in the resource: `./a/b.md#x` → `a/b.md` (percent-escapes decoded). */
function ownPath(target) {
  if (/^[a-z][a-z0-9+.-]*:|^[#/]/i.test(target)) return null;
  return target.replace(/[?#].*$/, '').replace(/^(\.\/)+/, '').split('/').map(safeDecode).join('/');
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

/** `readFile(path)` (optional): a file of the same resource as text, for its relative links; what they open
 *  shows below the rendering. */
function renderMarkdown(text, readFile) {
  const root = h('div', { class: 'markdown' });
  const viewer = h('div', { class: 'file-view', 'aria-live': 'polite' });
  const files = readFile && {
    has: (path) => path !== null && readFile.has(path),
    open: async (path) => {
      viewer.replaceChildren(h('p', { class: 'muted' }, `Opening ${path}…`));
      try {
        const content = await readFile(path);
        viewer.replaceChildren(h('h5', {}, plainName(path)), content === null ? h('p', { class: 'muted' }, 'Not text.') : h('pre', {}, content));
      } catch (error) {
        viewer.replaceChildren(errorBox(error));
      }
    },
  };
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
      root.append(h(`h${Math.min(6, match[1].length + 3)}`, {}, inline(match[2], files)));
      i++;
    } else if (/^(\*{3,}|-{3,}|_{3,})\s*$/.test(line)) {
      root.append(h('hr', {}));
      i++;
    } else if (/^>/.test(line)) {
      const quoted = [];
      for (; i < lines.length && /^>/.test(lines[i]); i++) quoted.push(lines[i].replace(/^>\s?/, ''));
      root.append(h('blockquote', {}, h('p', {}, inline(quoted.join(' '), files))));
    } else if ((match = /^\s*([-*+]|\d+[.)])\s+/.exec(line))) {
      const ordered = /\d/.test(match[1]);
      const list = h(ordered ? 'ol' : 'ul', {});
      for (; i < lines.length && /^\s*([-*+]|\d+[.)])\s+/.test(lines[i]); i++) {
        list.append(h('li', {}, inline(lines[i].replace(/^\s*([-*+]|\d+[.)])\s+/, ''), files)));
      }
      root.append(list);
    } else if (/^\|/.test(line)) {
      const rows = [];
      for (; i < lines.length && /^\|/.test(lines[i]); i++) {
        if (/^\|[\s:|-]+\|?\s*$/.test(lines[i])) continue;
        rows.push(lines[i].replace(/^\||\|\s*$/g, '').split('|').map((cell) => inline(cell.trim(), files)));
      }
      if (rows.length) root.append(table(rows[0], rows.slice(1)));
    } else {
      const paragraph = [];
      for (; i < lines.length && lines[i].trim() && !(paragraph.length && isBlockStart(lines[i])); i++) {
        paragraph.push(lines[i].trim());
      }
      root.append(h('p', {}, inline(paragraph.join(' '), files)));
    }
  }
  if (files) root.append(viewer);
  return root;
}
