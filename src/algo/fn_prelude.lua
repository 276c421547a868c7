--[[ fn_prelude.lua - the start of the Functions library (FUNCTION LOAD,
Redis 7+ / Valkey): `sluice functions` prints it, `--load` loads it. It is
assembled (CMakeLists.txt) from the very scripts the stores run with
EVALSHA:

  a generated first line: #!lua name=sluice, and VERSION
  this file,
  then for each algorithm in SLUICE_ALGO_MAP order, a generated opening
    "algos[#algos + 1] = {name = ..., has_burst = ..., check =
    function(max, w, burst)", its src/algo/NAME/fn_check.lua if it has one
    (its own bounds, beyond the common ones, as its C check() has them),
    fn_run.lua (", run = function(KEYS, ARGV)"), then prelude.lua,
    src/algo/NAME/NAME.lua and epilogue.lua (the algorithm's whole script,
    unchanged), and fn_close.lua,
  and fn_epilogue.lua, which checks the arguments and registers the
  functions.

So each algorithm's run(KEYS, ARGV) is its script, taking KEYS and ARGV
as the script takes them, and answering what it answers: a key is written
exactly as the script store writes it. ]]
local algos = {}
-- What an fn_check.lua may use: str(), and whether max x w <= 2^53, exactly
-- (2^53 - fmod(2^53, w) is exact, and so is its quotient by w).
local P53 = 9007199254740992
local function str(n) return string.format('%.0f', n) end
local function product_fits(max, w)
  return max <= (P53 - math.fmod(P53, w)) / w
end
