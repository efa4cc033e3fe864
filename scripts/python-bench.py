#!/usr/bin/python3
"""gpucomp.compress / gpucomp.decompress against Python's bz2 on one input.

    scripts/build-python.sh
    LD_LIBRARY_PATH=build/libclient/.libs PYTHONPATH=python scripts/python-bench.py [FILE] [--mib N]

The input is FILE's first N MiB (default 64), or with no FILE a sample of
/usr/include's sources repeated to N MiB. Requests go to the daemon at
$GPUCOMP_SOCKET (or the default socket), or run in process when none answers:
the backend line says which.
"""
import argparse
import bz2
import os
import sys
import time

import gpucomp


def sample(mib):
    want = mib << 20
    parts, size = [], 0
    for root, _, files in os.walk("/usr/include"):
        for name in sorted(files):
            try:
                with open(os.path.join(root, name), "rb") as f:
                    parts.append(f.read())
            except OSError:
                continue
            size += len(parts[-1])
            if size >= want:
                return b"".join(parts)[:want]
    data = b"".join(parts) or b"gpucomp sample " * 1024
    return (data * (want // len(data) + 1))[:want]


def timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", nargs="?")
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--level", type=int, default=9)
    a = ap.parse_args()
    if a.file:
        with open(a.file, "rb") as f:
            data = f.read(a.mib << 20)
    else:
        data = sample(a.mib)
    mb = len(data) / 1e6
    print(f"input: {len(data)} bytes, level {a.level}")
    rows = []
    for name, comp, decomp in (("bz2", bz2.compress, bz2.decompress),
                               ("gpucomp", gpucomp.compress, gpucomp.decompress)):
        packed, tc = timed(comp, data, a.level)
        backend = gpucomp.last_backend() if name == "gpucomp" else "libbz2 (in process)"
        out, td = timed(decomp, packed)
        if out != data:
            print(f"{name}: round trip FAILED", file=sys.stderr)
            return 1
        rows.append((name, tc, td))
        print(f"{name:8} compress {tc:7.3f} s ({mb / tc:7.1f} MB/s)  decompress {td:7.3f} s "
              f"({mb / td:7.1f} MB/s)  ratio {len(data) / len(packed):.3f}  backend: {backend}")
    (_, bc, bd), (_, gc, gd) = rows
    print(f"gpucomp against bz2: compress x{bc / gc:.2f}, decompress x{bd / gd:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
