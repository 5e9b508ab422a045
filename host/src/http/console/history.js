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
  const groups = await folderTypes();
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
        let restored;
        try {
          restored = await call('POST', `/v2/ops/${group}/restore`, { json: { url, version: version.version },
            headers: current ? { 'If-Match': current.etag } : {}, expect: 'response' });
        } catch (error) {
          if (!(error instanceof ApiFailure && error.status === 412)) throw error;
          // Someone committed since this table was read: show the history as it is now, and say so.
          const refreshed = await versionHistory(url);
          box.replaceWith(refreshed);
          const refusedAnswer = refreshed.querySelector('#history-answer');
          refusedAnswer.replaceChildren(h('div', { class: 'error' },
            `Not restored: ${shown(url)} changed since this page read its history (a newer version is current now, shown ` +
            `in the table). Nothing was changed. Restore ${version.version} again if you still want it over the new version.`));
          refusedAnswer.setAttribute('tabindex', '-1');
          refusedAnswer.focus();
          return [];
        }
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
