#!/bin/sh
# What `make install` does after copying the files (install-exec-hook and
# install-data-hook, libclient/libclient.am and systemd/systemd.am):
#   post-install.sh ldconfig LIBDIR          refresh the loader's cache, so that
#                                            gpucomp finds libgpucomp-client.so.0
#   post-install.sh group SNIPPET LIBDIR     create group gpucomp, which the socket
#                                            unit and the daemon's default access need:
#                                            systemd-sysusers on SNIPPET, else groupadd
# Both act only on an install onto this system: DESTDIR empty (a package build
# stages into DESTDIR and has its own maintainer scripts), run as root, and
# LIBDIR one the dynamic loader searches (/usr/local/lib after a plain
# ./configure, /usr/lib/... for --prefix=/usr). Anything else, a user's own
# prefix or make distcheck's temporary one, is left alone, with a note where
# the install will not work as it stands.
set -eu

# A tool that may live in an sbin directory missing from PATH (su without -).
tool() {
    command -v "$1" 2>/dev/null && return 0
    for d in /usr/sbin /sbin /usr/bin /bin; do
        [ -x "$d/$1" ] && { echo "$d/$1"; return 0; }
    done
    return 1
}

# True if dir (existing) is one of the directories the dynamic loader searches.
loader_dir() {
    ldconfig=$(tool ldconfig) || return 1
    want=$(cd "$1" 2>/dev/null && pwd -P) || return 1
    for d in $("$ldconfig" -v -N -X 2>/dev/null | sed -n 's|^\(/[^:]*\):.*|\1|p'); do
        [ "$(cd "$d" 2>/dev/null && pwd -P)" = "$want" ] && return 0
    done
    return 1
}

# True when this install is onto the running system, as root, in the loader's path.
system_install() {
    [ -z "${DESTDIR:-}" ] || return 1
    if ! loader_dir "$1"; then
        echo "post-install: $1 is not in the dynamic loader's path: run programs with" \
             "LD_LIBRARY_PATH=$1 or add it to /etc/ld.so.conf.d/ and run ldconfig"
        return 1
    fi
    if [ "$(id -u)" -ne 0 ]; then
        echo "post-install: not root: run ldconfig, and create group gpucomp (systemd-sysusers), as root"
        return 1
    fi
}

case ${1:-} in
ldconfig)
    system_install "$2" || exit 0
    "$(tool ldconfig)"
    echo "post-install: ldconfig: the loader's cache now has $2"
    ;;
group)
    # system_install's notes were printed by the ldconfig step already.
    system_install "$3" >/dev/null || exit 0
    if getent group gpucomp >/dev/null; then
        exit 0
    elif sysusers=$(tool systemd-sysusers); then
        "$sysusers" "$2"
    else
        "$(tool groupadd)" --system gpucomp
    fi
    getent group gpucomp >/dev/null || { echo "post-install: group gpucomp was not created" >&2; exit 1; }
    echo "post-install: created group gpucomp ($(getent group gpucomp)); add users with usermod -aG gpucomp USER"
    ;;
*)
    echo "usage: post-install.sh ldconfig LIBDIR | group SNIPPET LIBDIR" >&2
    exit 2
    ;;
esac
