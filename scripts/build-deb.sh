#!/bin/bash
# Build the Debian packages from debian/ with dpkg-buildpackage:
# gpucompd (daemon, gpucomp, systemd units, sysusers.d/tmpfiles.d snippets,
# /etc/gpucompd.conf, man pages), libgpucomp-client0 (shared library) and
# libgpucomp-client-dev (header, pkg-config file, static library, man 3 page),
# libgpucomp-bz2-1, gpucomp-bzip2 and python3-gpucomp (the Python module), then run
# lintian on them (errors fail the build).
#
# Usage: scripts/build-deb.sh [--check] [--no-lintian] [--cpu-only] [OUTDIR] [configure options...]
#   OUTDIR      where everything goes (default build-deb, ignored by git): the
#               copied source tree OUTDIR/gpucompd-VERSION, the .debs, .changes,
#               .buildinfo, the native source package, build.log, lintian.log
#   --check     run make check inside the package build (off by default: CI
#               runs the suites in scripts/test.sh)
#   --cpu-only  build profile pkg.gpucompd.nocuda (no CUDA backend even where
#               /usr/local/cuda exists); without it configure's auto-detection decides
#   configure options are passed through GPUCOMPD_CONFIGURE_FLAGS (debian/rules)
# The tree is copied first (git's tracked and untracked-but-not-ignored files),
# so the build leaves nothing in the working tree.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
check=0 lint=1 profiles=
while [ $# -gt 0 ]; do
    case $1 in
        --check) check=1 ;;
        --no-lintian) lint=0 ;;
        --cpu-only) profiles=pkg.gpucompd.nocuda ;;
        *) break ;;
    esac
    shift
done
out=${1:-build-deb}
shift || true
cd "$top"
for t in dpkg-buildpackage dpkg-parsechangelog dh; do
    command -v "$t" >/dev/null || { echo "build-deb: $t not found (scripts/install-deps.sh installs it)" >&2; exit 1; }
done
version=$(dpkg-parsechangelog -l debian/changelog -S Version)
arch=$(dpkg --print-architecture)
mkdir -p "$out"
out=$(cd "$out" && pwd)
src=$out/gpucompd-$version
rm -rf "$src" "$out"/gpucompd_"$version"* "$out"/libgpucomp-client*_"$version"_*.deb "$out"/gpucomp-bzip2_"$version"_*.deb \
    "$out"/python3-gpucomp_"$version"_*.deb
mkdir -p "$src"

# Copy the tree: tracked files still present plus untracked ones git does not ignore.
if git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -C "$top" ls-files -z -co --exclude-standard |
        while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
        tar -C "$top" --null -T - -cf - | tar -C "$src" -xf -
else
    tar -C "$top" --exclude='./build*' --exclude=./autom4te.cache -cf - . | tar -C "$src" -xf -
fi

opts="parallel=$(nproc)"
[ "$check" = 1 ] || { opts="$opts nocheck"; profiles=${profiles:+$profiles,}nocheck; }
echo "build-deb: dpkg-buildpackage in $src (DEB_BUILD_OPTIONS='$opts'${profiles:+, profiles $profiles})"
(
    cd "$src"
    export DEB_BUILD_OPTIONS=$opts GPUCOMPD_CONFIGURE_FLAGS="$*"
    dpkg-buildpackage -us -uc ${profiles:+-P"$profiles"}
) >"$out/build.log" 2>&1 || { tail -60 "$out/build.log"; echo "build-deb: dpkg-buildpackage failed (log: $out/build.log)" >&2; exit 1; }
grep -E '^ +backend:' "$out/build.log" | head -1 | sed 's/^ */build-deb: /' || true

changes=$out/gpucompd_${version}_${arch}.changes
for p in gpucompd libgpucomp-client0 libgpucomp-client-dev python3-gpucomp; do
    deb=$out/${p}_${version}_${arch}.deb
    [ -f "$deb" ] || { echo "build-deb: $deb missing" >&2; exit 1; }
    echo "built $deb"
done
if [ "$lint" = 1 ]; then
    if command -v lintian >/dev/null; then
        # Errors fail; warnings and notes are listed (explained in debian/source/lintian-overrides,
        # the packages' overrides and docs/DECISIONS.md, "Debian packages").
        lintian --fail-on error "$changes" >"$out/lintian.log" 2>&1 ||
            { cat "$out/lintian.log"; echo "build-deb: lintian reports errors" >&2; exit 1; }
        echo "build-deb: lintian: $(grep -c '^E:' "$out/lintian.log") errors," \
            "$(grep -c '^W:' "$out/lintian.log") warnings, $(grep -c '^I:' "$out/lintian.log") notes ($out/lintian.log)"
        grep -E '^[EW]:' "$out/lintian.log" || true
    else
        echo "build-deb: lintian not installed, not run"
    fi
fi
