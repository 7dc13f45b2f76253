// app.js: the Conquian page. Screens by the URL's hash: `#/` start and lobby, `#/join/<id>`
// an invitation, `#/t/<id>` a table (as its seat when this browser holds the seat's token,
// else as a spectator), `#/replay/<id>` the replay viewer. docs/web.md describes the page.

import { homeScreen, joinScreen } from './lobby.js';
import { replayScreen } from './replay-view.js';
import { tableScreen } from './table.js';
import { conn, rejection, show } from './ui.js';

// --- routing -------------------------------------------------------------------------------

let screen = null; // the current screen's cleanup

async function route() {
  screen?.();
  screen = null;
  show('');
  conn.textContent = '';
  const [, kind, id] = location.hash.replace(/^#\/?/, '/').split('/');
  try {
    if (kind === 't' && id) screen = await tableScreen(decodeURIComponent(id));
    else if (kind === 'join' && id) joinScreen(decodeURIComponent(id));
    else if (kind === 'replay' && id) screen = await replayScreen(decodeURIComponent(id));
    else screen = homeScreen();
  } catch (error) {
    show(rejection(error));
  }
}

window.addEventListener('hashchange', route);

route();
