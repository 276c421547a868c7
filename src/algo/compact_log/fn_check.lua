-- fn_check.lua - compact-log's own bound on FCALL's arguments in the
-- Functions library (see src/algo/fn_prelude.lua), as clog_check() has it
-- (SLUICE_COMPACT_LOG_MAX): the body of a function of (max, w, burst)
-- answering what is wrong, or nil.
if max > 16384 then
  return 'compact-log needs max <= 16384 (max ' .. str(max) .. '): it keeps '
         .. '8 bytes per unit in the window'
end
