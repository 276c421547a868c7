#!/usr/bin/python3
"""hit.py - sluice from Python: one key decided N times by the Functions
library (FCALL sluice_hit), then, after a reset, by the module (SLUICE.HIT),
printing each decision. The key is the C library's, sluice:{ID}:ALGO, as
`sluice hit ID --store valkey://HOST:PORT` names it: all share one budget.

Usage: /usr/bin/python3 examples/python/hit.py [HOST [PORT [ID [ALGO [MAX
       [WINDOW_MS [N [fcall|module|both]]]]]]]]
       (defaults: 127.0.0.1 6379 user42 fixed 3 10000 5 both)

Needs Debian's python3-redis (apt-get install python3-redis; hence
/usr/bin/python3), a Redis 7+ server with the Functions library (sluice
functions --load --store valkey://HOST:PORT) and sluice.so (redis-server
--loadmodule /PATH/sluice.so). Exits 1 if any of them is missing.
"""
import sys
try:
    import redis
except ImportError:
    sys.exit("hit.py: no redis module: apt-get install python3-redis, then /usr/bin/python3")
LOAD = {"fcall": "sluice functions --load --store valkey://{0}:{1}",
        "module": "redis-server --loadmodule /PATH/sluice.so"}
USAGE = __doc__.split("\n\n")[1]
DEFAULTS = ["127.0.0.1", "6379", "user42", "fixed", "3", "10000", "5", "both"]


def call(r, via, what, key, *args):
    """FCALL sluice_WHAT or SLUICE.WHAT on key: a hit answers [allowed,
    remaining, retry_after_ms, reset_after_ms], a reset 1 if it was there."""
    if via == "fcall":
        return r.fcall("sluice_" + what, 1, key, *args)
    return r.execute_command("SLUICE." + what.upper(), key, *args)


def main(argv):
    if (argv[7:] not in ([], ["fcall"], ["module"], ["both"])
            or not all(a.isdigit() for a in argv[1:2] + argv[4:7])):
        sys.exit(USAGE)
    host, port, uid, algo, max_, window_ms, n, vias = argv + DEFAULTS[len(argv):]
    r = redis.Redis(host=host, port=int(port), socket_timeout=5)
    # The key as the library names it: an id's '%', '{' and '}' escaped.
    esc = uid.replace("%", "%25").replace("{", "%7B").replace("}", "%7D")
    key = "sluice:{%s}:%s" % (esc, algo)
    for via in ["fcall", "module"] if vias == "both" else [vias]:
        try:
            call(r, via, "reset", key)
            for i in range(1, int(n) + 1):
                d = call(r, via, "hit", key, algo, max_, window_ms)
                print("%s hit %d: %s remaining=%d retry_after_ms=%d reset_after_ms=%d"
                      % (via, i, "allowed" if d[0] == 1 else "refused", *d[1:]))
        except redis.ConnectionError as e:
            sys.exit("hit.py: no server answers at %s:%s: %s" % (host, port, e))
        except redis.ResponseError as e:
            missing = "not found" in str(e) or "unknown command" in str(e)
            sys.exit("hit.py: %s: %s%s" % (via, e, "; load it with: " +
                     LOAD[via].format(host, port) if missing else ""))


if __name__ == "__main__":
    main(sys.argv[1:])
