-- all_close.lua - closes an algorithm's maker (see all_prelude.lua).
return decide
end
