#!/bin/bash
# Install everything gpucompd needs to build and test on Debian 12 / Ubuntu.
# clang-format-14: tests/check_format.sh (scripts/format.sh pins version 14).
# libclang-rt-14-dev: the sanitizer runtimes the fuzzers link (clang alone lacks them);
# python3 checks the CLI's JSON; python3-dev and python3-setuptools build the
# Python module (tests/check_python.sh skips without them); systemd gives the unit tests systemd-analyze and
# systemd-socket-activate (they skip without it); procps: /bin/kill, the unit's ExecReload.
# debhelper, dh-python, dpkg-dev, fakeroot, lintian: the Debian packages (scripts/build-deb.sh,
# scripts/test-deb.sh; dh-python for python3-gpucomp).
# CUDA is optional: if /usr/local/cuda exists, configure builds the GPU backend too.
set -euo pipefail
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
    build-essential autoconf automake libtool pkg-config \
    libevent-dev libprotobuf-c-dev protobuf-c-compiler libsystemd-dev \
    check libsubunit-dev libbz2-dev libpython3.11-testsuite bzip2 lbzip2 pbzip2 clang clang-format-14 \
    libclang-rt-14-dev python3 python3-dev python3-setuptools systemd procps \
    debhelper dh-python dpkg-dev fakeroot lintian >/dev/null
echo "install-deps: done"
