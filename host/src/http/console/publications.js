// ---- Publications -------------------------------------------------------------------------------------------

const STATUS_BADGE = { PENDING: 'warn', APPROVED: 'ok', REJECTED: 'bad', WITHDRAWN: 'bad' };
const publicationName = (publication) => publication.name || lastSegment(publication.url);
const publicationHref = (url) => `#publication?url=${encodeURIComponent(url)}`;

/** The queue (admins: pending from every author, then the decided ones with who decided) or the caller's own
 *  publications: one row each, read in parallel; each opens at its own address. */
async function viewPublications(root, params, current) {
  const refresh = h('button', { type: 'button', class: 'refresh' }, 'Refresh');
  refresh.addEventListener('click', () => route());
  root.append(h('div', { class: 'actions' }, refresh));
  if (!session.admin) {
    const { publications } = await call('POST', '/v1/ops/publication/list', { json: { url: `publications/${session.bucket}/` } });
    root.append(h('p', { class: 'muted' }, 'Your publications and their state.'));
    if (!publications.length) {
      root.append(h('p', { class: 'notice', id: 'no-publications' }, 'You have no publications.'));
      return;
    }
    publications.sort((a, b) => b.createdAt - a.createdAt);
    root.append(await queueTable(publications, current, true));
    return;
  }
  const [pending, decided] = await Promise.all([
    call('POST', '/v1/ops/publication/list', { json: { url: 'publications/public/' } }),
    call('POST', '/v1/ops/publication/list', { json: { url: 'publications/public/', decided: true } }),
  ]);
  root.append(h('h3', {}, 'Pending'), h('p', { class: 'muted' },
    'Oldest first. Open one to review each resource against what is at its target now, and to decide.'));
  if (!pending.publications.length) root.append(h('p', { class: 'notice', id: 'no-publications' }, 'No pending publications.'));
  else root.append(await queueTable(pending.publications.sort((a, b) => a.createdAt - b.createdAt), current, false));
  if (!current()) return;
  root.append(h('h3', {}, 'Decided'), decidedTable(decided.publications));
}

/** One row per publication: name (its link), author, age, files, the handlers' warnings, target. */
async function queueTable(summaries, current, withStatus) {
  const rows = await inParallel(summaries, async (summary) => {
    if (!current()) return null;
    let counts;
    try {
      counts = await reviewCounts(summary.url);
    } catch (error) {
      counts = { files: '—', warnings: describe(error) };
    }
    const name = h('a', { href: publicationHref(summary.url) }, summary.name || lastSegment(summary.url));
    const row = [name, summary.author || '—', h('span', { title: when(summary.createdAt) }, age(summary.createdAt)),
      String(counts.files), counts.warnings, plainName(shown(summary.targetFolder))];
    if (withStatus) row.push(h('span', { class: `badge ${STATUS_BADGE[summary.status] || 'warn'}` }, summary.status));
    return row;
  });
  const headings = ['Publication', 'Author', 'Age', 'Files', 'Warnings', 'Target folder'];
  if (withStatus) headings.push('State');
  return table(headings, rows.filter(Boolean), { class: 'queue' });
}

/** The files a pending publication adds and the warnings on them (its review copies, read in parallel). */
async function reviewCounts(url) {
  const publication = await call('POST', '/v1/ops/publication/get', { json: { url } });
  if (publication.status !== 'PENDING') return { files: publication.resources.length, warnings: '—' };
  const adds = publication.resources.filter((resource) => resource.action === 'ADD' && resource.reviewUrl);
  const counted = await inParallel(adds, async (resource) => {
    const copy = stripSlash(resource.reviewUrl);
    if (V1_TYPES.has(copy.split('/')[0])) return { files: 1, warnings: 0, hidden: 0 };
    const [files, metadata] = await Promise.all([filesOf(copy), call('GET', `/v2/metadata/${copy}`)]);
    const hidden = [...files.keys()].filter(hasHiddenCharacters).length;
    return { files: files.size, warnings: (metadata.warnings || []).length, hidden };
  });
  const sum = (field) => counted.reduce((total, one) => total + one[field], 0);
  const warnings = sum('warnings');
  const hidden = sum('hidden');
  const parts = [];
  if (warnings) parts.push(h('span', { class: 'badge warn' }, `${warnings} warning${warnings === 1 ? '' : 's'}`));
  if (hidden) parts.push(' ', h('span', { class: 'badge bad' }, `${hidden} name${hidden === 1 ? '' : 's'} with hidden characters`));
  return { files: sum('files') + publication.resources.length - adds.length, warnings: parts.length ? h('span', {}, parts) : 'none' };
}

function decidedTable(publications) {
  if (!publications.length) return h('p', { class: 'muted', id: 'no-decided' }, 'No decided publications yet.');
  publications.sort((a, b) => (b.decidedAt || 0) - (a.decidedAt || 0));
  return table(['Publication', 'Author', 'Decision', 'Decided by', 'When', 'Comment', 'Target folder'],
    publications.map((p) => [h('a', { href: publicationHref(p.url) }, p.name || lastSegment(p.url)), p.author || '—',
      h('span', { class: `badge ${STATUS_BADGE[p.status] || 'warn'}` }, p.status), p.decidedBy || '—', timeNode(p.decidedAt),
      p.comment || '—', plainName(shown(p.targetFolder))]), { class: 'decided' });
}

/** `#publication?url=…`: one publication, reviewed, with its decision. */
async function viewPublication(root, params) {
  const url = params.get('url') || '';
  root.append(h('p', {}, h('a', { href: '#publications', class: 'back' }, '← All publications')));
  root.append(await publicationCard(url));
}

/** The publication as the API has it now; `notice` (the outcome of the last action) goes in its answer. */
async function publicationCard(url, notice) {
  const publication = await call('POST', '/v1/ops/publication/get', { json: { url } });
  const name = publicationName(publication);
  const card = h('article', { class: 'card publication', 'data-url': publication.url },
    h('h3', { tabindex: '-1' }, name),
    h('p', { class: 'muted' }, code(publication.url), ` · by ${publication.author || 'unknown'} · `, timeNode(publication.createdAt), ' · ',
      h('span', { class: `badge ${STATUS_BADGE[publication.status] || 'warn'}` }, publication.status)),
    h('p', {}, 'Target folder: ', plainName(shown(publication.targetFolder))));
  if (publication.decidedBy) {
    card.append(h('p', { class: 'notice decision' }, `${publication.status === 'APPROVED' ? 'Approved' : 'Rejected'} by `,
      h('strong', {}, publication.decidedBy), ' on ', timeNode(publication.decidedAt),
      publication.comment ? [': “', publication.comment, '”'] : ' (no comment)'));
  } else if (publication.comment) {
    card.append(h('p', { class: 'notice comment' }, 'Comment: ', publication.comment));
  }
  card.append(h('h4', {}, 'Resources'), table(['Action', 'Source', 'Target', 'Review copy'],
    publication.resources.map((r) => [r.action, r.sourceUrl ? plainName(shown(r.sourceUrl)) : '—', plainName(shown(r.targetUrl)),
      r.reviewUrl ? plainName(shown(r.reviewUrl)) : '—'])));
  const pending = publication.status === 'PENDING';
  let consequences = { losers: [] };
  if (publication.rules && publication.rules.length) {
    consequences = await rulesConsequences(publication.targetFolder, publication.rules, pending);
    card.append(consequences.box);
  } else {
    card.append(h('p', { class: 'muted' }, 'No rules: the target folder keeps the rules it has.'));
  }
  // Review copies exist while a publication is pending; a decided one shows its resources only. Each review
  // is read in parallel with the others.
  const reviews = await inParallel(pending ? publication.resources : [], async (resource) => {
    const details = h('details', { class: 'review', open: publication.resources.length <= 3 },
      h('summary', {}, `${resource.action === 'DELETE' ? 'Removes' : 'Review of'} ${lastSegment(resource.targetUrl)}`));
    try {
      details.append(await review(resource));
    } catch (error) {
      details.append(errorBox(error));
    }
    return details;
  });
  card.append(...reviews);
  const answer = h('div', { class: 'answer', 'aria-live': 'polite' });
  if (session.admin && pending) {
    const commentId = `comment-${publication.url}`;
    const comment = h('input', { type: 'text', class: 'wide', id: commentId, placeholder: 'Optional' });
    const decide = (verb) => async () => {
      const body = { url: publication.url };
      if (comment.value.trim()) body.comment = comment.value.trim();
      const decided = await call('POST', `/v1/ops/publication/${verb}`, { json: body });
      const targets = decided.resources.map((r) => h('li', {}, urlCode(r.targetUrl)));
      const outcome = h('div', { class: 'success' },
        `${verb === 'approve' ? 'Approved' : 'Rejected'}: the publication is ${decided.status}.`,
        verb === 'approve' ? h('ul', {}, targets) : null);
      // The page shows the publication as it is now (decided, by whom), with this outcome.
      return showAfresh(card, (notice) => publicationCard(publication.url, notice), outcome);
    };
    const loses = () => (consequences.losers.length
      ? `Approving takes access away: ${consequences.losers.join('; ')} would no longer read ${publication.targetFolder} (${consequences.published} published resource${consequences.published === 1 ? '' : 's'} there now).`
      : null);
    card.append(h('label', { for: commentId }, `Comment to ${publication.author || 'the author'} on “${name}”`), ' ', comment,
      h('div', { class: 'actions' },
        actionButton('Approve', { class: 'primary approve', 'aria-label': `Approve ${name}` }, answer, decide('approve'), true, loses),
        actionButton('Reject', { class: 'danger reject', 'aria-label': `Reject ${name}` }, answer, decide('reject'), true,
          'Rejecting cannot be undone: the review copies are removed and the author sees your comment.')),
      answer);
  } else if (!session.admin && pending) {
    // The author may withdraw her own pending publication (the API's `publication/delete`).
    card.append(h('div', { class: 'actions' },
      actionButton('Withdraw', { class: 'danger withdraw-publication', 'aria-label': `Withdraw ${name}` }, answer, async () => {
        await call('POST', '/v1/ops/publication/delete', { json: { url: publication.url }, expect: 'text' });
        return h('div', { class: 'success' }, 'Withdrawn: the publication and its review copies are removed.');
      }, true, 'Withdrawing removes the publication and its review copies.')), answer);
  } else {
    card.append(answer);
  }
  if (notice) answer.replaceChildren(notice);
  return card;
}

// A publication adds only where nothing is (DIAL's rule): what is there now is shown, and approval is refused.
const OCCUPIED = 'Something is at the target now: approving will be refused (412) until it is removed. It is compared below.';

/** One resource of a publication: what it adds, against what is at its target now. */
async function review(resource) {
  const box = h('div', {});
  if (resource.action === 'DELETE') {
    box.append(h('p', {}, 'Deletes ', plainName(shown(resource.targetUrl)), ' from public.'));
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
    box.append(h('p', { class: 'target-state' }, before ? OCCUPIED : 'New at the target.'));
    const one = (meta) => new Map([[lastSegment(targetUrl), { href: '', etag: meta.etag, size: meta.contentLength }]]);
    const read = (side) => textOf(`/v1/${side ? reviewUrl : targetUrl}`);
    box.append(await compareFiles(before && one(before), one(after), read, ['public now', 'proposed']));
    return box;
  }
  const [after, before, metadata] = await Promise.all([filesOf(reviewUrl), filesOf(targetUrl).catch(notFoundAsNull),
    call('GET', `/v2/metadata/${reviewUrl}`)]);
  box.append(h('p', { class: 'target-state' }, before ? OCCUPIED : 'New at the target.'));
  box.append(handlerFindings(type, metadata, after));
  const readFile = (path) => (after.has(path) ? textOf(`/v2/${reviewUrl}/files/${after.get(path).href}`) : Promise.resolve(null));
  readFile.has = (path) => after.has(path);
  box.append(await definitionOf(type, metadata, after, readFile));
  const read = (side, file) => textOf(`/v2/${side ? reviewUrl : targetUrl}/files/${file.href}`);
  box.append(await compareFiles(before, after, read, ['public now', 'proposed']));
  return box;
}

/** What the type's handler said about the review copy (its warnings), and names that hide characters. */
function handlerFindings(type, metadata, files) {
  const box = h('div', { class: 'findings' });
  const warnings = metadata.warnings || [];
  const hidden = [...files.keys()].filter(hasHiddenCharacters);
  if (!warnings.length && !hidden.length) {
    box.append(h('p', { class: 'muted' }, `The ${type} handler found nothing to warn about.`));
    return box;
  }
  if (warnings.length) {
    box.append(h('h4', {}, `The ${type} handler's warnings`), h('ul', { class: 'warnings' },
      warnings.map((warning) => h('li', {}, warning.path ? [plainName(warning.path), ': '] : null, warning.message))));
  }
  if (hidden.length) {
    box.append(h('div', { class: 'error hidden-names', role: 'note' },
      `${hidden.length} file name${hidden.length === 1 ? '' : 's'} hold${hidden.length === 1 ? 's' : ''} characters that reorder or hide text (shown spelled out): `,
      h('ul', {}, hidden.map((path) => h('li', {}, plainName(path))))));
  }
  return box;
}

/** A skill's definition is its SKILL.md, rendered. Other types define themselves in their own files, which only
 *  their handler reads: what it read (the resource's metadata) is shown, and a README, if any, as a README. */
async function definitionOf(type, metadata, files, readFile) {
  const box = h('div', { class: 'definition' });
  const render = async (path, heading) => {
    const file = files.get(path);
    if (file.size > MAX_RENDERED_BYTES) {
      box.append(h('p', { class: 'muted' }, `${path} is too large to render here (${bytes(file.size)}).`));
      return;
    }
    const text = await readFile(path);
    box.append(h('h4', {}, heading), text === null ? h('p', { class: 'muted' }, 'Not text.') : renderMarkdown(text, readFile));
  };
  if (type === 'skills') {
    if (files.has('SKILL.md')) await render('SKILL.md', ['SKILL.md ', h('span', { class: 'muted' }, '(rendered)')]);
    return box;
  }
  const entries = Object.entries(metadata.metadata || {});
  box.append(h('h4', {}, `What the ${type} handler read from it`), entries.length
    ? table(['Field', 'Value'], entries.map(([key, value]) => [code(key), value]), { class: 'definition-metadata' })
    : h('p', { class: 'muted' }, 'The handler reported no metadata.'));
  const readme = [...files.keys()].find((path) => /^readme(\.md)?$/i.test(path));
  if (readme) await render(readme, [readme, ' ', h('span', { class: 'muted' }, '(the README, rendered: not read by the handler)')]);
  return box;
}
