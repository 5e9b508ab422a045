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
  h('div', { class: 'actions' },
    actionButton('Reload handlers', { class: 'primary reload' }, answer, async () => {
      try {
        const report = await call('POST', '/v1/ops/handlers/reload', { json: {} });
        await relist();
        return [h('div', { class: (report.removed || []).length ? 'error' : 'success' }, `Reloaded: ${reloadSummary(report)}`), reloadReport(report)];
      } catch (error) {
        if (error instanceof ApiFailure && error.status === 422 && error.body) {
          await relist();
          return [h('div', { class: 'error' }, `Reloaded with failures (422): ${reloadSummary(error.body)} The failed files are named below.`),
            reloadReport(error.body)];
        }
        throw error;
      }
    }, false, reloadPreview)), answer);
}

/** Asked before a reload: what it would do now (the API's preview, which changes nothing). */
async function reloadPreview() {
  const preview = await call('POST', '/v1/ops/handlers/reload?preview=true', { json: {} }).catch((error) => {
    if (error instanceof ApiFailure && error.status === 422 && error.body) return error.body;
    throw error;
  });
  return [h('span', { class: 'preview' }, `Preview, nothing changed yet: ${reloadSummary(preview)}`), reloadReport(preview)];
}

/** A reload report in one sentence: what loads, changes and goes, and the failures. */
function reloadSummary(report) {
  const changed = (report.serving || []).filter((s) => s.change !== 'unchanged');
  const parts = [];
  if ((report.removed || []).length) {
    parts.push(`${report.removed.map((group) => `“${group}”`).join(', ')} no longer served: its resources cannot be read or written until its file is back`);
  }
  if (changed.length) parts.push(changed.map((s) => `${s.group} ${s.change}`).join(', '));
  if ((report.failed || []).length) parts.push(`${report.failed.length} file${report.failed.length === 1 ? '' : 's'} failed`);
  return parts.length ? `${parts.join('; ')}.` : 'no change, no failures.';
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
