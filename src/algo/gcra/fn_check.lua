-- fn_check.lua - gcra's own bounds on FCALL's arguments in the Functions
-- library (see src/algo/fn_prelude.lua), as gcra_check() has them: the body
-- of a function of (max, w, burst) answering what is wrong, or nil. (A
-- burst above max is refused for every algorithm that takes one.)
if not product_fits(max, w) then
  return 'gcra needs max x window_ms <= 2^53 (max ' .. str(max) .. ', window '
         .. str(w) .. ' ms)'
end
