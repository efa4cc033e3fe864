#!/bin/sh
# What `make install` puts in place, from this build into a staging DESTDIR:
# the man pages with every build-time name substituted (no literal
# $(sysconfdir) or @...@), gpucompd(8) naming the configured config file, the
# README and the example programs under the doc directory, one version
# everywhere (configure, pkg-config, the header's "(x.y.z)" markers, the
# symbols file, debian/changelog), and the post-install steps (ldconfig, group
# gpucomp) doing nothing under DESTDIR or into a directory the loader does not search.
srcdir=${srcdir:-.}
b=$(cd "$(dirname "$GPUCOMPD")/.." && pwd) || exit 1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# The build's own values of make variables, expanded.
var() {
    printf 'v:\n\t@echo $(%s)\n' "$1" |
        MAKEFLAGS= MFLAGS= MAKELEVEL= make -s --no-print-directory -C "$b" -f Makefile -f - v
}
prefix=$(var prefix) sysconfdir=$(var sysconfdir) docdir=$(var docdir) mandir=$(var mandir)
libdir=$(var libdir) version=$(var VERSION)
[ -n "$version" ] && [ -n "$docdir" ] || { echo "FAIL: cannot read the build's variables"; exit 1; }

root=$tmp/root
if ! MAKEFLAGS= MFLAGS= MAKELEVEL= make -s -C "$b" install DESTDIR="$root" >"$tmp/out" 2>&1; then
    tail -30 "$tmp/out"; echo "FAIL: make install DESTDIR=..."; exit 1
fi
echo "ok: make install DESTDIR=$root"
if grep '^post-install:' "$tmp/out"; then bad "post-install steps acted under DESTDIR"; fi

for page in man1/gpucomp.1 man3/libgpucomp-client.3 man8/gpucompd.8; do
    f=$root$mandir/$page
    if [ ! -f "$f" ]; then bad "$page not installed"; continue; fi
    if grep -n -e '\$(' -e '@[a-zA-Z_]*@' "$f"; then bad "$page has a build-time name left in it"; fi
    grep -q "^\.TH .*\"gpucompd $version\"" "$f" || bad "$page does not say gpucompd $version"
done
grep -q "^\.I $sysconfdir/gpucompd.conf\$" "$root$mandir/man8/gpucompd.8" &&
    echo "ok: gpucompd(8) names $sysconfdir/gpucompd.conf" || bad "gpucompd(8) does not name $sysconfdir/gpucompd.conf"
grep -n '\$(' "$root$sysconfdir/gpucompd.conf" && bad "gpucompd.conf has a literal \$(...)"

was=$fail
for f in README.md ARCHITECTURE.md SECURITY.md examples/compress_file.c examples/stream_pipe.c examples/async_many.c; do
    [ -f "$root$docdir/$f" ] || bad "$docdir/$f not installed"
done
[ "$fail" = "$was" ] && echo "ok: README and examples under $docdir"

# One version: configure's, in pkg-config, and no newer one in the header or packaging.
was=$fail
grep -qx "Version: $version" "$root$libdir/pkgconfig/gpucomp-client.pc" || bad "gpucomp-client.pc is not version $version"
head -1 "$srcdir/debian/changelog" | grep -q "^gpucompd ($version)" || bad "debian/changelog's newest entry is not $version"
newest=$( (sed -n 's/.*(\([0-9][0-9]*\.[0-9][0-9]*\.[0-9][0-9]*\)).*/\1/p' "$srcdir/libclient/gpucomp.h"
           sed -n 's/^ gpucomp_[a-z0-9_]*@Base \([0-9.]*\)$/\1/p' "$srcdir/debian/libgpucomp-client0.symbols"
           echo "$version") | sort -V | tail -1)
[ "$newest" = "$version" ] || bad "gpucomp.h or the symbols file names version $newest, newer than the build's $version"
[ "$fail" = "$was" ] && echo "ok: version $version"

# Not staged and not into the loader's path (a user's prefix, distcheck's): nothing done, a note.
out=$(DESTDIR= sh "$srcdir/scripts/post-install.sh" group /nonexistent/gpucompd.conf "$tmp" 2>&1) ||
    bad "post-install.sh group failed outside the loader's path: $out"
out=$(DESTDIR= sh "$srcdir/scripts/post-install.sh" ldconfig "$tmp" 2>&1) || bad "post-install.sh ldconfig failed: $out"
echo "$out" | grep -q "not in the dynamic loader's path" || bad "post-install.sh ldconfig gave no note for $tmp: $out"
exit $fail
