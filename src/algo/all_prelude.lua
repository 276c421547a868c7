--[[ all_prelude.lua - sluice_hit_all()'s script: every algorithm's decide()
in one script, for one request against several limits of one id, all or
nothing. It is assembled (CMakeLists.txt) from the same parts as the
single-limit scripts:

  prelude.lua, this file,
  then for each algorithm in SLUICE_ALGO_MAP order:
    all_open.lua, src/algo/NAME/NAME.lua, all_close.lua
  and all_epilogue.lua,

so makers[a + 1] is algorithm a's NAME.lua wrapped in a function of
(max, w, consume, burst): its decide() for one limit, reading that limit's
figures where the single script reads ARGV's (those names shadow the
prelude's).

KEYS[i]  limit i's key, all in one slot
ARGV[1], ARGV[2]  unused ("")
ARGV[3]  "1" to count if every limit admits, "0" to only look (peek)
ARGV[4]  now in ms, or "" to read the server's clock (TIME), once for all
ARGV[5]  a token unique to this call
ARGV[6]  the request's cost
ARGV[7 + 4(i - 1)], +1, +2, +3  limit i's algorithm (its SLUICE_ALGO_MAP
         value), max, window_ms and burst (0: the algorithm's default, max)
Reply    {allowed, remaining, retry_after_ms, reset_after_ms} of each limit
         in turn, flat: 4n integers. Every limit is first peeked; only if
         every one admits (and ARGV[3] is "1") is every one counted, and the
         reply holds the counting decisions; else the peeks, and nothing is
         counted. allowed is -1 for a key holding something else than its
         algorithm writes there (nothing counted then either). ]]
local makers = {}
