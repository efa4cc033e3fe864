"""Build the gpucomp extension against libgpucomp-client.

The library is found through pkg-config (an installed libgpucomp-client-dev),
or where GPUCOMP_INCLUDE_DIR and GPUCOMP_LIBRARY_DIR point (a build tree:
scripts/build-python.sh sets them).

    pip install --no-build-isolation ./python
"""
import os
import shlex
import subprocess

from setuptools import Extension, setup


def pkg_config(flag):
    try:
        out = subprocess.run(["pkg-config", flag, "gpucomp-client"], capture_output=True, text=True, check=True)
        return shlex.split(out.stdout)
    except (OSError, subprocess.CalledProcessError):
        return []


def dirs(env, flag, prefix):
    if os.environ.get(env):
        return os.environ[env].split(os.pathsep)
    return [f[len(prefix):] for f in pkg_config(flag) if f.startswith(prefix)]


here = os.path.dirname(os.path.abspath(__file__))
include_dirs = dirs("GPUCOMP_INCLUDE_DIR", "--cflags", "-I") or [os.path.join(here, "..", "libclient")]
library_dirs = dirs("GPUCOMP_LIBRARY_DIR", "--libs", "-L")

setup(
    name="gpucomp",
    version=os.environ.get("GPUCOMP_VERSION", "0.3.0"),
    description="bzip2 and rle compression served by gpucompd, shaped like Python's bz2",
    packages=["gpucomp"],
    ext_modules=[
        Extension(
            "gpucomp._gpucomp",
            sources=["gpucomp/_gpucomp.c"],
            include_dirs=include_dirs,
            library_dirs=library_dirs,
            libraries=["gpucomp-client"],
            extra_compile_args=["-std=c11", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE"],
        )
    ],
    python_requires=">=3.9",
)
