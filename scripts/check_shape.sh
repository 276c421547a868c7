#!/usr/bin/env bash
# check_shape.sh - the size rules of the code: no function longer than
# FUNC_MAX lines (tables and help texts are not functions), and no source file
# in src/ longer than FILE_MAX lines. Prints each one over, longest first, and
# exits 1 if there is any.
#
#   bash scripts/check_shape.sh [DIR...]     (default: src cli bench tests)
#
# A function is what lies between a line that is exactly "{" and the next
# line that is exactly "}", the project's style for function bodies.
set -u
cd "$(dirname "$0")/.."
FUNC_MAX=${FUNC_MAX:-70}
FILE_MAX=${FILE_MAX:-700}
dirs=("$@")
[ ${#dirs[@]} -gt 0 ] || dirs=(src cli bench tests)
over=0
funcs=$(find "${dirs[@]}" -name '*.c' -o -name '*.h' 2>/dev/null | sort | xargs awk -v max="$FUNC_MAX" '
    FNR == 1 { start = 0 }
    /^[a-zA-Z_].*[a-zA-Z_0-9]\(/ && start == 0 { name = $0; sub(/\(.*/, "", name); n = split(name, w, /[ *]+/); name = w[n] }
    $0 == "{" { start = FNR; fname = name }
    $0 == "}" && start > 0 {
        len = FNR - start - 1
        if (len > max) printf "%d\t%s:%d\t%s()\n", len, FILENAME, start, fname
        start = 0
    }' | sort -rn)
if [ -n "$funcs" ]; then
    echo "functions over $FUNC_MAX lines:"
    printf '%s\n' "$funcs" | sed 's/^/  /'
    over=1
fi
files=$(find src -name '*.c' -o -name '*.h' -o -name '*.lua' | xargs wc -l | grep -v ' total$' |
        awk -v max="$FILE_MAX" '$1 > max' | sort -rn)
if [ -n "$files" ]; then
    echo "files in src/ over $FILE_MAX lines:"
    printf '%s\n' "$files" | sed 's/^/  /'
    over=1
fi
[ $over -eq 0 ] && echo "check_shape: every function <= $FUNC_MAX lines, every src/ file <= $FILE_MAX lines"
exit $over
