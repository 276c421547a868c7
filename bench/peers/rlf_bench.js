#!/usr/bin/env node
/*
 * rlf_bench.js - the Node peer of sluice_bench_server: rate-limiter-flexible's
 * RateLimiterRedis on ioredis (versions pinned in package.json beside this).
 *
 * Runs one case against a server and prints one JSON line with what it
 * measured; sluice_bench_server runs it once per case and repeat, on the
 * server it runs sluice against.
 *
 * A consume() is one EVALSHA (ioredis' defineCommand "rlflxIncr": SET NX EX,
 * INCRBY, PTTL): a fixed window armed by the first hit. The limit admits
 * every hit ('--max' points per 1 s, 10^12 by default), as sluice's rows do.
 * '--callers' async loops each keep one consume() in flight, all on ONE
 * ioredis connection, which is how the library is used: ioredis writes each
 * command at once and matches replies in order, so the in-flight calls are
 * pipelined on that connection. Keys "user:N" are drawn uniformly from
 * '--keys'. Each consume() is timed from the call to its settling (which
 * includes waiting for the event loop); the server's CPU (INFO cpu) and
 * this process's CPU are read around the timed phase only, which follows
 * an untimed phase of '--warmup-seconds' (0.5) at the same concurrency, so
 * that V8 has compiled the path before it is timed.
 *
 * '--check' only loads the packages and PINGs the server. On any failure the
 * last line printed is {"error": "why"} and the exit status is 3.
 */
'use strict';

function fail(why) {
  process.stdout.write(JSON.stringify({ error: why }) + '\n');
  process.exit(3);
}

function parseArgs(argv) {
  const a = { url: null, callers: 1, keys: 1, seconds: 2, max: 1e12,
              warmupSeconds: 0.5, check: false };
  for (let i = 2; i < argv.length; i++) {
    const name = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) fail(`${name} needs a value`);
      return argv[++i];
    };
    if (name === '--url') a.url = next();
    else if (name === '--callers') a.callers = parseInt(next(), 10);
    else if (name === '--keys') a.keys = parseInt(next(), 10);
    else if (name === '--seconds') a.seconds = parseFloat(next());
    else if (name === '--max') a.max = parseFloat(next());
    else if (name === '--warmup-seconds') a.warmupSeconds = parseFloat(next());
    else if (name === '--check') a.check = true;
    else fail(`unknown option ${name}`);
  }
  if (!a.url) fail('--url is required');
  return a;
}

async function serverCpuS(client) {
  const info = await client.info('cpu');
  const num = (k) => parseFloat((info.match(new RegExp(`${k}:([0-9.]+)`)) || [0, 0])[1]);
  return num('used_cpu_sys') + num('used_cpu_user');
}

function percentile(sorted, q) {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] / 1000;
}

// A small deterministic generator per caller (xorshift32).
function rng(seed) {
  let x = seed >>> 0 || 1;
  return (n) => {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    return x % n;
  };
}

async function main() {
  const args = parseArgs(process.argv);
  let Redis, RateLimiterRedis, versions;
  try {
    Redis = require('ioredis');
    ({ RateLimiterRedis } = require('rate-limiter-flexible'));
    versions = {
      ioredis: require('ioredis/package.json').version,
      rate_limiter_flexible: require('rate-limiter-flexible/package.json').version,
    };
  } catch (e) {
    fail('rate-limiter-flexible or ioredis is not installed (npm ci --prefix ' +
         'bench/peers, or bench/run_server_bench.sh): ' + e.message.split('\n')[0]);
  }
  const client = new Redis(args.url, { lazyConnect: true, maxRetriesPerRequest: 1,
                                       enableOfflineQueue: true, commandTimeout: 5000 });
  client.on('error', () => {}); // reported by the calls that fail
  try {
    await client.connect();
    await client.ping();
  } catch (e) {
    fail(`cannot reach ${args.url}: ${e.message}`);
  }
  if (args.check) {
    process.stdout.write(JSON.stringify(Object.assign({ ok: true }, versions)) + '\n');
    client.disconnect();
    return;
  }

  const limiter = new RateLimiterRedis({ storeClient: client, points: args.max,
                                         duration: 1, keyPrefix: 'rlflx' });
  const keys = Array.from({ length: args.keys }, (_, i) => `user:${i}`);
  const hit = async (key) => {
    try {
      await limiter.consume(key, 1);
      return 1;
    } catch (res) {
      if (res instanceof Error) throw res;
      return 0; // refused: rejected with a RateLimiterRes
    }
  };

  // One phase: 'callers' loops until 'seconds' pass; with 'record', the
  // calls are counted and timed.
  const phase = async (seconds, record) => {
    const results = [];
    const caller = async (t) => {
      const pick = rng(t * 7919 + 1);
      const lat = [];
      let calls = 0, admitted = 0;
      const start = process.hrtime.bigint();
      const deadline = start + BigInt(Math.round(seconds * 1e9));
      let now = start;
      while (now < deadline) {
        const key = keys.length > 1 ? keys[pick(keys.length)] : keys[0];
        const t0 = process.hrtime.bigint();
        admitted += await hit(key);
        now = process.hrtime.bigint();
        if (record) lat.push(Number(now - t0));
        calls++;
      }
      results.push({ calls, admitted, elapsed: Number(now - start) / 1e9, lat });
    };
    await Promise.all(Array.from({ length: args.callers }, (_, t) => caller(t)));
    return results;
  };

  const contextSwitches = () => {
    const u = process.resourceUsage();
    return u.voluntaryContextSwitches + u.involuntaryContextSwitches;
  };
  let results, srv0, cpu0, cs0;
  try {
    // V8 compiles the hot path during this untimed phase, at the same
    // concurrency as the timed one.
    await phase(args.warmupSeconds, false);
    srv0 = await serverCpuS(client);
    cpu0 = process.cpuUsage();
    cs0 = contextSwitches();
    results = await phase(args.seconds, true);
  } catch (e) {
    fail(`rate-limiter-flexible failed: ${e.message}`);
  }
  const cpu = process.cpuUsage(cpu0);
  const cs = contextSwitches() - cs0;
  const srv1 = await serverCpuS(client);
  client.disconnect();

  const lat = [];
  for (const r of results) for (const x of r.lat) lat.push(x);
  lat.sort((a, b) => a - b);
  process.stdout.write(JSON.stringify(Object.assign({
    peer: 'rlf', algo: 'fixed', callers: args.callers, keys: args.keys,
    connections: 1,
    calls: results.reduce((s, r) => s + r.calls, 0),
    admitted: results.reduce((s, r) => s + r.admitted, 0),
    decisions_per_s: results.reduce((s, r) => s + (r.elapsed > 0 ? r.calls / r.elapsed : 0), 0),
    p50_us: percentile(lat, 0.5), p99_us: percentile(lat, 0.99),
    client_cpu_s: (cpu.user + cpu.system) / 1e6,
    client_context_switches: cs,
    server_cpu_s: srv1 - srv0,
  }, versions)) + '\n');
}

main().catch((e) => fail(e.message));
