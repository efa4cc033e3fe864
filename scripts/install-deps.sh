#!/bin/bash
# Install everything gpucompd needs to build and test on Debian 12 / Ubuntu.
# python3 checks the CLI's JSON; systemd gives the unit tests systemd-analyze and
# systemd-socket-activate (they skip without it).
# CUDA is optional: if /usr/local/cuda exists, configure builds the GPU backend too.
set -euo pipefail
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
    build-essential autoconf automake libtool pkg-config \
    libevent-dev libprotobuf-c-dev protobuf-c-compiler libsystemd-dev \
    check libsubunit-dev libbz2-dev bzip2 lbzip2 pbzip2 clang \
    python3 systemd >/dev/null
echo "install-deps: done"
