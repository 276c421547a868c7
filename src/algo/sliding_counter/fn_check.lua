-- fn_check.lua - sliding-counter's own bound on FCALL's arguments in the
-- Functions library (see src/algo/fn_prelude.lua), as counter_check() has
-- it: the body of a function of (max, w, burst) answering what is wrong, or
-- nil.
if not product_fits(max, w) then
  return 'sliding-counter needs max x window_ms <= 2^53 (max ' .. str(max)
         .. ', window ' .. str(w) .. ' ms)'
end
