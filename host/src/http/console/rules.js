// ---- Rules on public folders, and what changing them does ---------------------------------------------------

/** Whether one rule admits a reader whose claim `source` holds `value` (the host's `Rule::matches`). */
function ruleMatches(rule, source, value) {
  if (rule.function === 'TRUE') return true;
  if (rule.function === 'FALSE' || rule.source !== source || value === null) return false;
  const targets = rule.targets || [];
  if (rule.function === 'EQUAL') return targets.some((target) => target.toLowerCase() === value.toLowerCase());
  if (rule.function === 'CONTAIN') return targets.some((target) => value.toLowerCase().includes(target.toLowerCase()));
  if (rule.function === 'REGEX') {
    return targets.some((target) => {
      try { return new RegExp(`^(?:${target})$`, 'u').test(value); } catch { return false; }
    });
  }
  return false;
}

/** A folder's rules admit a reader when it has none, or when one of them matches (the host's `admits_with`). */
const admits = (rules, source, value) => !rules || !rules.length || rules.some((rule) => ruleMatches(rule, source, value));

/** The readers a change of rules would shut out: one per claim value either set of rules names (and a reader
 *  with none of them), admitted by `before` and not by `after`. Described as `roles = user`. */
function readersLosing(before, after) {
  const readers = [];
  for (const rule of [...(before || []), ...(after || [])]) {
    if (!['EQUAL', 'CONTAIN', 'REGEX'].includes(rule.function)) continue;
    for (const target of rule.targets || []) {
      if (!readers.some((r) => r.source === rule.source && r.value === target)) readers.push({ source: rule.source, value: target });
    }
  }
  readers.push({ source: null, value: null });
  return readers
    .filter((reader) => admits(before, reader.source, reader.value) && !admits(after, reader.source, reader.value))
    .map((reader) => (reader.source === null ? 'readers with none of the values these rules name' : `${reader.source} = ${reader.value}`));
}

const rulesTable = (rules, caption) => (rules && rules.length
  ? table(['Function', 'Source', 'Targets'], rules.map((rule) => [rule.function, code(rule.source), (rule.targets || []).join(', ')]),
    { class: 'rules', 'aria-label': caption })
  : h('p', { class: 'muted' }, 'No rules: everyone who can read public reads it.'));

/** The folder's rules now beside `proposed`, who would lose access and what is published there: `{box, losers,
 *  published}`. With `pending` false (a decided publication) the rules are only shown. */
async function rulesConsequences(folder, proposed, pending) {
  const box = h('div', { class: 'consequences' });
  if (!pending) {
    box.append(h('h4', {}, 'Rules it set on the target folder'), rulesTable(proposed, 'Rules it set'));
    return { box, losers: [], published: 0 };
  }
  const [along, published] = await Promise.all([
    call('POST', '/v1/ops/publication/rule/list', { json: { url: folder } }),
    publishedUnder(folder),
  ]);
  const current = (along.rules || {})[folder] || [];
  const losers = readersLosing(current, proposed);
  box.append(h('h4', {}, 'Rules on the target folder: approving replaces them'),
    h('div', { class: 'side-by-side' },
      h('div', { class: 'rules-now' }, h('h5', {}, 'Now'), rulesTable(current, 'Rules now')),
      h('div', { class: 'rules-proposed' }, h('h5', {}, 'Proposed'), rulesTable(proposed, 'Rules proposed'))));
  if (losers.length) {
    box.classList.add('loses');
    box.append(h('div', { class: 'error losers', role: 'note' },
      `Approving takes access away from: ${losers.join('; ')}. They would no longer read ${published.length} resource${published.length === 1 ? '' : 's'} published under ${folder} now.`,
      published.length ? h('ul', {}, published.slice(0, 20).map((url) => h('li', {}, plainName(shown(url))))) : null));
  } else {
    box.append(h('p', { class: 'notice no-losers' }, 'Nobody who reads this folder now loses access.'));
  }
  return { box, losers, published: published.length };
}

/** The folder types served here (every caller may list them). */
async function folderTypes() {
  if (!session.types) session.types = (await call('GET', '/v2/types')).map((type) => type.group);
  return session.types;
}

/** Every resource under a `public/…/` folder, of every type: their listing entries (`url` without its
 *  trailing `/`, `group`, `api`, `updatedAt`, …). */
async function publishedItems(folder) {
  const path = folder.replace(/^public\//, '');
  const groups = [...V1_TYPES].map((type) => ['v1', type]).concat((await folderTypes()).map((group) => ['v2', group]));
  const listed = await inParallel(groups, async ([api, group]) => {
    const items = await listAll(`/${api}/metadata/${group}/public/${path}?recursive=true&limit=1000`).catch(notFoundAsNull);
    return (items || []).filter((item) => item.nodeType === 'ITEM').map((item) => ({ ...item, url: stripSlash(item.url), group, api }));
  });
  return listed.flat();
}

/** Every resource under a `public/…/` folder, of every type: their URLs. */
const publishedUnder = async (folder) => (await publishedItems(folder)).map((item) => item.url);
