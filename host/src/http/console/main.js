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
  watchIdleness();
  start();
});

/** Signs out a credential left alone: a key never expires by itself, and an open tab should not keep one. */
function watchIdleness() {
  let lastActive = Date.now();
  const active = () => { lastActive = Date.now(); };
  for (const event of ['keydown', 'pointerdown', 'wheel', 'touchstart']) window.addEventListener(event, active, { passive: true });
  setInterval(() => {
    if (!sessionStorage.getItem(CREDENTIAL)) { lastActive = Date.now(); return; }
    const override = Number(sessionStorage.getItem(IDLE_OVERRIDE)) * 1000;
    const limit = override > 0 ? Math.min(override, IDLE_LIMIT_MS) : IDLE_LIMIT_MS;
    if (Date.now() - lastActive >= limit) {
      lastActive = Date.now();
      const minutes = limit >= 60000 ? `${Math.round(limit / 60000)} minutes` : `${Math.round(limit / 1000)} seconds`;
      signOut(new Error(`Signed out after ${minutes} without activity. Sign in again to go on where you were.`));
    }
  }, 1000);
}
