--[[ fn_prelude.lua - the start of the Functions library (FUNCTION LOAD,
Redis 7+ / Valkey): `sluice functions` prints it, `--load` loads it. It is
assembled (CMakeLists.txt) from the very scripts the stores run with
EVALSHA:

  a generated first line: #!lua name=sluice, and VERSION
  this file,
  then for each algorithm in SLUICE_ALGO_MAP order, a generated opening
    "algos[#algos + 1] = {name = ..., has_burst = ..., product = ...,
    run = function(KEYS, ARGV)", then prelude.lua, src/algo/NAME/NAME.lua
    and epilogue.lua (the algorithm's whole script, unchanged), and
    fn_close.lua,
  and fn_epilogue.lua, which checks the arguments and registers the
  functions.

So each algorithm's run(KEYS, ARGV) is its script, taking KEYS and ARGV
as the script takes them, and answering what it answers: a key is written
exactly as the script store writes it. ]]
local algos = {}
