#!/usr/bin/python3
"""limits_bench.py - the Python `limits` peer of sluice_bench_server.

Runs one case of Python's `limits` package (its Redis storage) against a
server and prints one JSON line with what it measured; sluice_bench_server
runs it once per case and repeat, on the server it runs sluice against.

  --algo fixed    FixedWindowRateLimiter: one EVALSHA per hit (limits'
                  incr_expire.lua: INCRBY, and EXPIRE when the key is new);
                  the client compares the count with the limit.
  --algo moving   MovingWindowRateLimiter ("moving window"): one EVALSHA per
                  hit (acquire_moving_window.lua: LINDEX, and if admitted
                  LPUSH, LTRIM, EXPIRE on a list of timestamps).

The limit admits every hit ('--max' per second, 10^12 by default), as
sluice's rows do. '--callers' threads share one RedisStorage, whose redis-py
connection pool gives each thread a connection of its own (up to '--callers'
connections). Each thread draws its keys "user:N" uniformly from '--keys'.
Every hit is timed with time.perf_counter_ns(); the server's CPU (INFO cpu)
and this process's CPU are read around the timed phase only.

'--check' only imports the packages and PINGs the server. On any failure the
last line printed is {"error": "why"} and the exit status is 3.

Needs Debian's python3-limits and python3-redis (Debian 12: limits 2.8.0,
redis-py 4.3.4), so run it with /usr/bin/python3, not another build.
"""
import argparse
import json
import random
import resource
import sys
import threading
import time


def fail(why):
    print(json.dumps({"error": why}))
    sys.exit(3)


def server_cpu_s(client):
    info = client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def context_switches():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_nvcsw + ru.ru_nivcsw


def percentile(sorted_ns, q):
    if not sorted_ns:
        return 0.0
    i = min(len(sorted_ns) - 1, int(q * len(sorted_ns)))
    return sorted_ns[i] / 1000.0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--url", required=True, help="redis://host:port[/db]")
    p.add_argument("--algo", choices=["fixed", "moving"], default="fixed")
    p.add_argument("--callers", type=int, default=1)
    p.add_argument("--keys", type=int, default=1)
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--max", type=int, default=10**12)
    p.add_argument("--warmup", type=int, default=20,
                   help="untimed hits per thread before the timed phase")
    p.add_argument("--check", action="store_true")
    args = p.parse_args()

    try:
        import limits
        import redis
        from limits.storage import RedisStorage
        from limits.strategies import (FixedWindowRateLimiter,
                                       MovingWindowRateLimiter)
    except ImportError as e:
        fail("python3-limits or python3-redis is not installed "
             "(apt-get install python3-limits python3-redis): %s" % e)

    try:
        storage = RedisStorage(args.url, max_connections=max(1, args.callers),
                               socket_timeout=5)
        admin = redis.Redis.from_url(args.url, socket_timeout=5)
        admin.ping()
    except Exception as e:  # the server is the harness's; say why it failed
        fail("cannot reach %s: %s" % (args.url, e))
    versions = {"limits": limits.__version__, "redis_py": redis.__version__}
    if args.check:
        print(json.dumps(dict(ok=True, **versions)))
        return

    limiter = (FixedWindowRateLimiter(storage) if args.algo == "fixed"
               else MovingWindowRateLimiter(storage))
    # Each algorithm keeps its own keys (a string for fixed, a list for
    # moving), so a case never meets the other's leftovers on a shared server.
    namespace = "LIMITER" if args.algo == "fixed" else "LIMITER_MW"
    item = limits.RateLimitItemPerSecond(args.max, 1, namespace=namespace)
    keys = ["user:%d" % i for i in range(args.keys)]
    ready = threading.Barrier(args.callers + 1)
    go = threading.Barrier(args.callers + 1)
    results = [None] * args.callers
    errors = []

    def caller(t):
        rng = random.Random(t * 7919 + 1)
        lat = []
        calls = admitted = 0
        try:
            for i in range(args.warmup):
                limiter.hit(item, keys[i % len(keys)])
        except Exception as e:
            errors.append(str(e))
        ready.wait()
        go.wait()
        start = time.perf_counter_ns()
        deadline = start + int(args.seconds * 1e9)
        now = start
        try:
            while now < deadline and not errors:
                key = keys[rng.randrange(len(keys))] if len(keys) > 1 \
                    else keys[0]
                t0 = time.perf_counter_ns()
                ok = limiter.hit(item, key)
                now = time.perf_counter_ns()
                lat.append(now - t0)
                calls += 1
                admitted += 1 if ok else 0
        except Exception as e:
            errors.append(str(e))
        results[t] = (calls, admitted, (now - start) / 1e9, lat)

    threads = [threading.Thread(target=caller, args=(t,))
               for t in range(args.callers)]
    for th in threads:
        th.start()
    ready.wait()
    srv0 = server_cpu_s(admin)
    cs0 = context_switches()
    cpu0 = time.process_time()
    go.wait()
    for th in threads:
        th.join()
    cpu1 = time.process_time()
    cs1 = context_switches()
    srv1 = server_cpu_s(admin)
    if errors:
        fail("limits failed: %s" % errors[0])

    calls = sum(r[0] for r in results)
    lat = sorted(x for r in results for x in r[3])
    print(json.dumps(dict(
        peer="limits", algo=args.algo, callers=args.callers, keys=args.keys,
        connections=args.callers, calls=calls,
        admitted=sum(r[1] for r in results),
        decisions_per_s=sum(r[0] / r[2] for r in results if r[2] > 0),
        p50_us=percentile(lat, 0.50), p99_us=percentile(lat, 0.99),
        client_cpu_s=cpu1 - cpu0, client_context_switches=cs1 - cs0,
        server_cpu_s=srv1 - srv0, **versions)))


if __name__ == "__main__":
    main()
