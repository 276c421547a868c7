-- all_open.lua - opens the next algorithm's maker (see all_prelude.lua).
makers[#makers + 1] = function(max, w, consume, burst)
