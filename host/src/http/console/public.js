// ---- Public folders: their rules, what is published there, what was deleted there -------------------------

const RULE_FUNCTIONS = ['EQUAL', 'CONTAIN', 'REGEX', 'TRUE', 'FALSE'];
const publicFolderHref = (folder) => `#public-folder?folder=${encodeURIComponent(folder)}`;

/** The folder a public resource is in: `public/a/b/` for `skills/public/a/b/x`. */
const folderOf = (url) => `${url.split('/').slice(1, -1).join('/')}/`;

/** The folder and each folder above it, `public/` first. */
function foldersAlong(folder) {
  const segments = folder.split('/').filter(Boolean);
  return segments.map((_, index) => `${segments.slice(0, index + 1).join('/')}/`);
}

const ruleText = (rule) => (['TRUE', 'FALSE'].includes(rule.function)
  ? `${rule.function} (${rule.function === 'TRUE' ? 'everyone' : 'no one'})`
  : `${rule.source} ${rule.function} ${(rule.targets || []).join(', ')}`);

/** A folder typed or taken from the address: `public/…/`, each segment encoded as the API expects. */
function publicFolder(raw) {
  const trimmed = raw.trim().replace(/^\/+/, '');
  const folder = trimmed.endsWith('/') ? trimmed : `${trimmed}/`;
  if (folder === 'public/') return folder;
  if (!folder.startsWith('public/')) throw new Error(`Not a public folder: ${raw} (public/<folder>/…)`);
  return `${checkedPath(folder.slice(0, -1), 'public folder', 2)}/`;
}

/** `#public`: every folder of public that holds something, with its own rules and how much it holds. */
async function viewPublic(root, params, current) {
  const refresh = h('button', { type: 'button', class: 'refresh' }, 'Refresh');
  refresh.addEventListener('click', () => route());
  const input = h('input', { id: 'public-folder-input', class: 'wide', placeholder: 'public/<folder>/' });
  const form = h('form', { 'aria-label': 'Open a public folder' },
    h('label', { for: 'public-folder-input' }, 'Any folder'), input, h('button', { type: 'submit' }, 'Open'));
  const problem = h('div', { class: 'answer', 'aria-live': 'polite' });
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    try {
      location.hash = publicFolderHref(publicFolder(input.value));
    } catch (error) {
      problem.replaceChildren(errorBox(error));
    }
  });
  root.append(h('div', { class: 'actions' }, refresh), form, problem, h('p', { class: 'muted' },
    'The folders that hold published resources. Open one to see the rules that decide who reads it, mend them, ' +
    'unpublish what is there or restore what was deleted. A folder with rules and nothing in it opens by name above.'));
  const items = await publishedItems('public/');
  if (!current()) return;
  const counts = new Map([['public/', { here: 0, below: 0 }]]);
  const count = (folder) => {
    if (!counts.has(folder)) counts.set(folder, { here: 0, below: 0 });
    return counts.get(folder);
  };
  for (const item of items) {
    const home = folderOf(item.url);
    foldersAlong(home).forEach((folder) => { count(folder).below += 1; });
    count(home).here += 1;
  }
  const folders = [...counts.keys()].sort();
  // The rules along a folder come with those of every folder above it: asking for each innermost one is enough.
  const innermost = folders.filter((folder) => !folders.some((other) => other !== folder && other.startsWith(folder)));
  const answers = await inParallel(innermost, (folder) => call('POST', '/v1/ops/publication/rule/list', { json: { url: folder } }));
  const rules = Object.assign({}, ...answers.map((answer) => answer.rules || {}));
  const rows = folders.map((folder) => {
    const own = rules[folder] || [];
    const above = foldersAlong(folder).slice(0, -1).filter((other) => (rules[other] || []).length);
    const said = own.length ? own.map(ruleText).join(' or ')
      : h('span', { class: 'muted' }, above.length ? `none of its own (${above.map(shown).join(', ')} apply)` : 'none: every reader of public');
    return [h('a', { href: publicFolderHref(folder) }, plainName(shown(folder))), said, String(counts.get(folder).here),
      String(counts.get(folder).below)];
  });
  root.append(table(['Folder', 'Its rules', 'Published in it', 'In it and below'], rows, { class: 'public-folders' }));
}

/** `#public-folder?folder=…`: one folder of public. */
async function viewPublicFolder(root, params) {
  root.append(h('p', {}, h('a', { href: '#public', class: 'back' }, '← All public folders')));
  root.append(await folderPage(publicFolder(params.get('folder') || 'public/')));
}

/** The folder as the API has it now; `notice` (the outcome of the last action) goes in its answer. */
async function folderPage(folder, notice) {
  const page = h('div', { class: 'public-folder', 'data-folder': folder });
  const [along, items, deleted] = await Promise.all([
    call('POST', '/v1/ops/publication/rule/list', { json: { url: folder } }),
    publishedItems(folder),
    deletedIn(folder),
  ]);
  const answer = h('div', { class: 'answer', id: 'public-answer', 'aria-live': 'polite' });
  if (notice) answer.replaceChildren(notice);
  // After an action the folder is read again, and the page shows it with the action's outcome.
  const renew = (outcome) => showAfresh(page, (fresh) => folderPage(folder, fresh), outcome);
  page.append(h('h3', {}, 'Folder ', plainName(shown(folder))), answer);

  const rules = along.rules || {};
  const own = rules[folder] || [];
  page.append(h('h3', {}, 'Rules'), h('p', { class: 'muted' },
    'A reader of public reads here when, on every folder down to this one that has rules, one of them admits them.'));
  for (const above of foldersAlong(folder).slice(0, -1).filter((other) => (rules[other] || []).length)) {
    page.append(h('h4', {}, 'Set on ', plainName(shown(above)), ' (they apply here too)'), rulesTable(rules[above], `Rules of ${above}`));
  }
  page.append(h('h4', {}, 'Set on this folder'), h('div', { class: 'rules-own' }, rulesTable(own, `Rules of ${folder}`)));
  if (folder === 'public/') {
    page.append(h('p', { class: 'notice' }, 'The API sets no rules on public/ itself: open a folder below it to mend its rules.'));
  } else {
    page.append(rulesEditor(folder, own, answer, renew));
  }

  const here = items.filter((item) => folderOf(item.url) === folder);
  const below = [...new Set(items.filter((item) => folderOf(item.url) !== folder)
    .map((item) => `${folder}${item.url.split('/').slice(1).join('/').slice(folder.length).split('/')[0]}/`))].sort();
  page.append(h('h3', { id: 'published-here' }, 'Published in this folder'), here.length
    ? table(['Resource', 'Type', 'Updated', 'Author', ''], here.map((item) => [plainName(shown(item.url)), item.group,
      timeNode(item.updatedAt), item.author || '—', unpublishButton(item, answer, renew)]), { class: 'published' })
    : h('p', { class: 'muted' }, 'Nothing is published directly in this folder.'));
  if (below.length) {
    page.append(h('h3', {}, 'Folders in it'), h('ul', { class: 'subfolders' },
      below.map((sub) => h('li', {}, h('a', { href: publicFolderHref(sub) }, plainName(shown(sub)))))));
  }
  page.append(h('h3', {}, 'Deleted here, still restorable'), deleted.length
    ? table(['Resource', 'Type', 'Deleted', 'Restorable until', 'Last written by', ''], deleted.map((item) => [
      plainName(shown(item.url)), item.group, timeNode(item.deletedAt), timeNode(item.restorableUntil), item.author || '—',
      actionButton('Restore', { class: 'restore-deleted', 'aria-label': `Restore ${shown(item.url)}` }, answer, async () => {
        await call('POST', `/v2/ops/${item.group}/restore`, { json: { url: item.url } });
        return renew(h('div', { class: 'success' }, 'Restored: ', urlCode(item.url), ' is published again, as it was.'));
      }, true)]), { class: 'deleted' })
    : h('p', { class: 'muted' }, 'Nothing deleted here can still be restored.'));
  return page;
}

/** The folder's deleted resources of every folder type that can still be restored. */
async function deletedIn(folder) {
  const path = folder.replace(/^public\//, '');
  const listed = await inParallel(await folderTypes(), async (group) => {
    const items = await listAll(`/v2/deleted/${group}/public/${path}?limit=1000`).catch(notFoundAsNull);
    return (items || []).map((item) => ({ ...item, group }));
  });
  return listed.flat();
}

/** Removing a resource from public is a publication with a DELETE action, filed and approved at once: it is on
 *  record (Decided) with the admin as its decider. */
function unpublishButton(item, answer, renew) {
  const name = lastSegment(item.url);
  const lasting = item.api === 'v2'
    ? 'It can be restored from “Deleted here” until the grace period ends.'
    : 'This cannot be undone: files, prompts and conversations keep no deleted copy.';
  return actionButton('Unpublish', { class: 'danger unpublish', 'data-url': item.url, 'aria-label': `Unpublish ${shown(item.url)}` }, answer, async () => {
    const filed = await call('POST', '/v1/ops/publication/create', { json: {
      name: `Unpublish ${name}`, targetFolder: folderOf(item.url), resources: [{ action: 'DELETE', targetUrl: item.url }] } });
    await call('POST', '/v1/ops/publication/approve', { json: { url: filed.url, comment: 'Unpublished in the admin console' } });
    return renew(h('div', { class: 'success' }, 'Unpublished: ', urlCode(item.url), ' is no longer in public.'));
  }, true, `Unpublishing removes ${shown(item.url)} from public for every reader. ${lasting}`);
}

/** The folder's rules as rows to change, the consequences of the change, and applying it: a publication with
 *  the rules alone, filed and approved at once (so it is on record with its decider, as any rules change). */
function rulesEditor(folder, own, answer, renew) {
  const rows = h('div', { class: 'rule-rows' });
  let added = 0;
  const addRow = (rule) => {
    const n = ++added;
    const fn = h('select', { id: `rule-function-${n}`, class: 'rule-function' },
      RULE_FUNCTIONS.map((name) => h('option', { value: name, selected: rule.function === name }, name)));
    const source = h('input', { id: `rule-source-${n}`, class: 'rule-source', value: rule.source || 'roles' });
    const targets = h('input', { id: `rule-targets-${n}`, class: 'rule-targets wide', value: (rule.targets || []).join(', '),
      placeholder: 'comma-separated' });
    const row = h('div', { class: 'row rule-row' },
      h('label', { for: `rule-function-${n}` }, 'Function'), fn, h('label', { for: `rule-source-${n}` }, 'Source'), source,
      h('label', { for: `rule-targets-${n}` }, 'Targets'), targets,
      h('button', { type: 'button', class: 'remove-rule', 'aria-label': `Remove rule ${n}`, onclick: () => row.remove() }, 'Remove'));
    rows.append(row);
  };
  (own.length ? own : [{ function: 'EQUAL', source: 'roles', targets: [] }]).forEach(addRow);
  const proposed = () => [...rows.querySelectorAll('.rule-row')].map((row) => {
    const rule = { function: row.querySelector('.rule-function').value, source: row.querySelector('.rule-source').value.trim() };
    const targets = row.querySelector('.rule-targets').value.split(',').map((target) => target.trim()).filter(Boolean);
    if (!['TRUE', 'FALSE'].includes(rule.function)) rule.targets = targets;
    return rule;
  });
  const check = async () => {
    const rules = proposed();
    if (!rules.length) throw new Error('A folder keeps at least one rule (the API replaces rules, it does not remove them): to admit every reader of public, keep one rule with the function TRUE.');
    const broken = rules.find((rule) => !rule.source || (rule.targets && !rule.targets.length));
    if (broken) throw new Error(`Each ${broken.function} rule needs a source and at least one target.`);
    return { rules, consequences: await rulesConsequences(folder, rules, true) };
  };
  const preview = h('div', { class: 'rules-check' });
  const checkButton = h('button', { type: 'button', class: 'check-rules' }, 'Show what it changes');
  checkButton.addEventListener('click', async () => {
    try {
      preview.replaceChildren((await check()).consequences.box);
    } catch (error) {
      preview.replaceChildren(errorBox(error));
    }
  });
  // Editing the rules takes focus off the button, which withdraws its question: what is applied is what was
  // asked about.
  const apply = actionButton('Apply rules', { class: 'primary apply-rules', 'aria-label': `Apply the rules to ${shown(folder)}` }, answer, async () => {
    const { rules } = await check();
    const filed = await call('POST', '/v1/ops/publication/create', { json: { name: `Rules of ${shown(folder)}`, targetFolder: folder, resources: [], rules } });
    await call('POST', '/v1/ops/publication/approve', { json: { url: filed.url, comment: 'Rules mended in the admin console' } });
    return renew(h('div', { class: 'success' }, 'Applied: the rules of ', urlCode(folder), ' are replaced.'));
  }, false, async () => {
    const { consequences } = await check();
    preview.replaceChildren(consequences.box);
    const losing = consequences.losers.length
      ? `It takes access away: ${consequences.losers.join('; ')} would no longer read ${shown(folder)} (${consequences.published} published resource${consequences.published === 1 ? '' : 's'} there now).`
      : 'Nobody who reads this folder now loses access.';
    return `Applying replaces the rules of ${shown(folder)} for every reader. ${losing}`;
  });
  return h('div', { class: 'rules-editor' }, h('h4', {}, 'Mend the rules of this folder'), h('p', { class: 'muted' },
    'Applying replaces the folder’s rules as approving a publication with rules does: the console files one with these ' +
    'rules and approves it, so the change is on record (Publications, Decided) with you as its decider.'),
  rows, h('div', { class: 'actions' },
    h('button', { type: 'button', class: 'add-rule', onclick: () => addRow({ function: 'EQUAL', source: 'roles', targets: [] }) }, 'Add a rule'),
    checkButton, apply), preview);
}
