# Sourced by the scripts that build the engine without autotools (fuzz.sh,
# build-gpu.sh, bench_bzip2_cpu.sh): the include path and the source lists,
# relative to the top of the tree, as Makefile.am's GC_ENGINE_INCLUDES and
# GC_DAEMON_INCLUDES have them.
ENGINE_DIRS="common codecs/rle codecs/rle/cuda codecs/bzip2 codecs/bzip2/cpu codecs/bzip2/cuda
    codecs/bzip2/cuda/enc codecs/bzip2/cuda/dec gpu"
engine_includes() { # engine_includes [TOP]: -I flags for every engine folder
    local d
    for d in $ENGINE_DIRS; do printf -- '-I%s ' "${1:+$1/}$d"; done
}
ENGINE_COMMON_SOURCES="common/gc_status.c common/parallel.c common/scratch.c common/crc32c.c"
engine_rle_sources() { ls "${1:+$1/}"codecs/rle/cpu/rle*.c | tr '\n' ' '; }
engine_bz2_sources() { ls "${1:+$1/}"codecs/bzip2/cpu/bz2_*.c | tr '\n' ' '; }
engine_cuda_sources() { ls gpu/*.cu codecs/*/cuda/*.cu codecs/*/cuda/*/*.cu 2>/dev/null | tr '\n' ' '; }
DAEMON_DIRS="daemon daemon/conn daemon/request daemon/sched daemon/device daemon/mem daemon/config"
daemon_includes() { # daemon_includes: -I flags for the daemon's folders (Makefile.am's GC_DAEMON_INCLUDES)
    local d
    for d in $DAEMON_DIRS; do printf -- '-I%s ' "$d"; done
}
