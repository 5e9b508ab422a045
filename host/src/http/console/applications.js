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
  const refresh = h('button', { type: 'button', class: 'refresh' }, 'Refresh');
  refresh.addEventListener('click', () => route());
  root.append(h('p', { class: 'muted' },
    'Configured applications, stored ones in public and in your bucket; any other by its deployment id. Admin consent ' +
    'approves a declaration as it is now; any change to it makes the consent stale until granted again.'), form,
  h('div', { class: 'actions' }, refresh), cards);
  const [configured, publicApps, ownApps] = await Promise.all([
    call('GET', '/openai/applications').then((list) => list.data.map((app) => app.id)),
    storedApplications('applications/public/'),
    storedApplications(`applications/${session.bucket}/`),
  ]);
  // Configured ids are names (`odd app #1`), stored ones URLs (already encoded): both become API paths.
  const ids = [...new Set([...configured, ...publicApps, ...ownApps].map((id) => checkedPath(id, 'deployment id', 1)))];
  if (!ids.length) cards.append(h('p', { class: 'notice' }, 'No applications.'));
  const slots = ids.map(() => h('div', {}));
  cards.append(...slots);
  await inParallel(ids, (id, index) => (current() ? applicationCard(slots[index], id) : null));
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

/** Where the data a grant releases goes: the application's name, endpoint host, owner and who may call it. */
function applicationSummary(app) {
  if (!app) return null;
  return h('dl', { class: 'front app-summary', 'aria-label': 'The application' },
    h('dt', {}, 'Display name'), h('dd', {}, app.displayName || '—'),
    h('dt', {}, 'Sends to'), h('dd', {}, app.endpointHost ? code(app.endpointHost) : 'no endpoint'),
    h('dt', {}, 'Owner'), h('dd', {}, app.owner),
    h('dt', {}, 'Callable by'), h('dd', {}, app.userRoles ? (app.userRoles.length ? `roles ${app.userRoles.join(', ')}` : 'nobody') : 'everyone'));
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
    applicationSummary(state.application),
    h('p', {}, 'Admin consent: ', h('span', { class: `badge consent-state ${label === 'live' ? 'live' : label === 'stale' ? 'stale' : 'none'}` }, label),
      state.grantedBy ? h('span', { class: 'muted' }, ` · granted by ${state.grantedBy} on ${when(state.grantedAt)}`) : null));
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
