#!/bin/bash
# Print the include cycles among the daemon's and the client library's files
# and exit 1 if there is one (a `make check` test: tests/check_include_cycles.sh).
# A file is a node by its name without extension, so daemon/conn/conn.c and
# daemon/conn/conn.h are one node "daemon/conn/conn": a file including "x.h" is an edge
# to x.c as well. Headers are looked up in the including file's folder, then
# by name in every folder under daemon/ and libclient/ (the build puts them all
# on the include path); anything else (common/, codecs/, proto/, system) is
# outside the graph. Also fails if the daemon includes a client library header.
# Usage: scripts/include-cycles.sh [SOURCE-TOP]
set -uo pipefail
top=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$top" || exit 1
dirs="daemon libclient"
edges() {
    local f inc here found
    local files
    files=$(find $dirs -name '*.[ch]' | sort)
    for f in $files; do
        here=$(dirname "$f")
        sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" |
            while read -r inc; do
                # the including file's folder first, then any folder of the graph (bare names)
                found=""
                if [ -e "$here/$inc" ]; then
                    found="$here/$inc"
                else
                    found=$(printf '%s\n' $files | grep -m1 -E "(^|/)${inc//./\\.}\$")
                fi
                [ -n "$found" ] && echo "${f%.*} ${found%.*}"
            done
    done
}
edges | sort -u | awk '
    $1 != $2 { edge[$1, $2] = 1; node[$1] = 1; node[$2] = 1
               split($1, a, "/"); split($2, b, "/")
               if (a[1] == "daemon" && b[1] == "libclient") { print "daemon includes the client library: " $1 " -> " $2; bad = 1 } }
    END {
        n = 0
        for (v in node) name[n++] = v
        for (i = 0; i < n; i++) for (j = 0; j < n; j++) reach[i, j] = ((name[i], name[j]) in edge)
        for (k = 0; k < n; k++) for (i = 0; i < n; i++) if (reach[i, k]) for (j = 0; j < n; j++)
            if (reach[k, j]) reach[i, j] = 1
        for (i = 0; i < n; i++) {
            if (done[i] || !reach[i, i]) continue
            line = ""
            for (j = 0; j < n; j++) if (reach[i, j] && reach[j, i]) { done[j] = 1; members[j] = 1 }
            # each member with the members it includes, so the loop can be read off
            for (j = 0; j < n; j++) {
                if (!members[j]) continue
                deps = ""
                for (k = 0; k < n; k++) if (members[k] && ((name[j], name[k]) in edge)) deps = deps " " name[k]
                line = line "\n  " name[j] " ->" deps
            }
            delete members
            print "cycle:" line
            cycles++
        }
        if (!cycles && !bad) print "no include cycles among the " n " modules of daemon/ and libclient/ that include or are included"
        exit (cycles || bad) ? 1 : 0
    }'
