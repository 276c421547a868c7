-- fn_run.lua - ends an algorithm's check and opens its run (see
-- fn_prelude.lua).
end,
  run = function(KEYS, ARGV)
