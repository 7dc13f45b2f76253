// app.js: the Conquian page. Screens by the URL's hash: `#/` start and lobby, `#/join/<id>`
// an invitation, `#/t/<id>` a table (as its seat when this browser holds the seat's token,
// else as a spectator), `#/replay/<id>` the replay viewer. docs/web.md describes the page.

import { homeScreen, joinScreen } from './lobby.js';
import { replayScreen } from './replay-view.js';
import { tableScreen } from './table.js';
import { conn, rejection, show } from './ui.js';

// --- routing -------------------------------------------------------------------------------

let screen = null; // the current screen's cleanup
let generation = 0; // which route() call is the latest

async function route() {
  const mine = ++generation;
  const stale = () => mine !== generation; // the URL changed while a screen was loading
  screen?.();
  screen = null;
  show('');
  conn.textContent = '';
  const [, kind, id] = location.hash.replace(/^#\/?/, '/').split('/');
  try {
    let cleanup = null;
    if (kind === 't' && id) cleanup = await tableScreen(decodeURIComponent(id), stale);
    else if (kind === 'join' && id) joinScreen(decodeURIComponent(id));
    else if (kind === 'replay' && id) cleanup = await replayScreen(decodeURIComponent(id), stale);
    else cleanup = homeScreen();
    if (stale()) cleanup?.(); else screen = cleanup;
  } catch (error) {
    if (!stale()) show(rejection(error));
  }
}

window.addEventListener('hashchange', route);

route();
