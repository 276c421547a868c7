#!/usr/bin/env node
// hit.js - sluice from Node: one key decided N times by the Functions library
// (FCALL sluice_hit), then, after a reset, by the module (SLUICE.HIT), printing
// each decision. The key is the C library's, sluice:{ID}:ALGO, as `sluice hit
// ID --store valkey://HOST:PORT` names it: all share one budget.
//
// Usage: NODE_PATH=/usr/share/nodejs node examples/node/hit.js [HOST [PORT
//        [ID [ALGO [MAX [WINDOW_MS [N [fcall|module|both]]]]]]]]
//        (defaults: 127.0.0.1 6379 user42 fixed 3 10000 5 both)
//
// Needs the npm client redis 4.x as Debian packages it (apt-get install
// node-redis, in /usr/share/nodejs: nodesource's node does not look there,
// hence NODE_PATH), a Redis 7+ server with the Functions library (sluice
// functions --load --store valkey://HOST:PORT) and sluice.so (redis-server
// --loadmodule /PATH/sluice.so). Exits 1 if any of them is missing.
'use strict';
let createClient;
try { ({ createClient } = require('redis')); } catch (e) {
  console.error('hit.js: no npm client redis: apt-get install node-redis, NODE_PATH=/usr/share/nodejs'); process.exit(1);
}
const argv = process.argv.slice(2);
const [host = '127.0.0.1', port = '6379', id = 'user42', algo = 'fixed',
  max = '3', windowMs = '10000', n = '5', vias = 'both'] = argv;
if (argv.length > 8 || !['fcall', 'module', 'both'].includes(vias) ||
    ![port, max, windowMs, n].every((a) => /^[0-9]+$/.test(a))) {
  console.error('Usage: node hit.js [HOST [PORT [ID [ALGO [MAX [WINDOW_MS [N [fcall|module|both]]]]]]]]'); process.exit(1);
}
const load = { fcall: `sluice functions --load --store valkey://${host}:${port}`,
  module: 'redis-server --loadmodule /PATH/sluice.so' };
// FCALL sluice_WHAT or SLUICE.WHAT on key: a hit answers [allowed,
// remaining, retry_after_ms, reset_after_ms], a reset 1 if it was there.
const call = (client, via, what, key, ...args) => client.sendCommand(via === 'fcall'
  ? ['FCALL', `sluice_${what}`, '1', key, ...args]
  : [`SLUICE.${what.toUpperCase()}`, key, ...args]);
async function main() {
  // No reconnection: an absent server is an error, not a wait.
  const client = createClient({ socket: { host, port: Number(port),
    connectTimeout: 5000, reconnectStrategy: () => new Error('no reconnect') } });
  client.on('error', () => {}); // connect()'s rejection says it
  await client.connect().catch((e) => { throw new Error(
    `no server answers at ${host}:${port}: ${e.socketError?.message ?? e.message}`); });
  // The key as the library names it: an id's '%', '{' and '}' escaped.
  const key = `sluice:{${id.replace(/%/g, '%25').replace(/{/g, '%7B').replace(/}/g, '%7D')}}:${algo}`;
  for (const via of vias === 'both' ? ['fcall', 'module'] : [vias]) {
    try {
      await call(client, via, 'reset', key);
      for (let i = 1; i <= Number(n); i++) {
        const [allowed, remaining, retry, reset] = await call(client, via, 'hit', key, algo, max, windowMs);
        console.log(`${via} hit ${i}: ${allowed === 1 ? 'allowed' : 'refused'} remaining=${remaining} ` +
          `retry_after_ms=${retry} reset_after_ms=${reset}`);
      }
    } catch (e) {
      const missing = /not found|unknown command/.test(e.message);
      throw new Error(`${via}: ${e.message}${missing ? `; load it with: ${load[via]}` : ''}`);
    }
  }
  await client.quit();
}

main().catch((e) => { console.error(`hit.js: ${e.message}`); process.exit(1); });
