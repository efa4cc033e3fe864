#!/bin/bash
# docs/ARCHITECTURE.md is the map of the tree: every path it names under one of
# the tree's folders must exist (a glob must match), so a move or rename that
# forgets the map fails here. Build products (.la, .a) and the NAME placeholder
# of "codecs/NAME/..." are not files of the tree.
src=$(cd "$(dirname "$0")/.." && pwd)
cd "$src" || exit 1
missing=0
checked=0
while read -r path; do
    case $path in *.la | *.a | *NAME*) continue ;; esac
    checked=$((checked + 1))
    if ! compgen -G "$path" >/dev/null; then
        echo "FAIL: docs/ARCHITECTURE.md names $path, which does not exist"
        missing=$((missing + 1))
    fi
done < <(grep -oE '\b(daemon|common|codecs|gpu|libclient|programs|proto|tests|scripts|systemd|debian|docs)/[A-Za-z0-9_./*-]*[A-Za-z0-9_*]' \
    docs/ARCHITECTURE.md | sort -u)
echo "$checked paths checked, $missing missing"
[ "$checked" -gt 0 ] && [ "$missing" -eq 0 ]
