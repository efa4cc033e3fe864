#!/bin/sh
# No file of daemon/ or libclient/ includes, through others, a header whose
# file includes it back, and the daemon includes nothing of the client
# library (scripts/include-cycles.sh prints what it finds).
src=$(cd "$(dirname "$0")/.." && pwd)
exec bash "$src/scripts/include-cycles.sh" "$src"
