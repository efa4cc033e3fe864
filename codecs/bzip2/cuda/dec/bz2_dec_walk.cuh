/*
 * bz2_dec_walk.cuh - the decoder's walk over the stream framing (host
 * side): from bit 0, stream header, blocks, end-of-stream marker and stream
 * CRC, then the next stream; a stream's part resumes from its bz2_dstate,
 * head stream included (bz2_dstate_at_magic). A block is accepted only where the previous
 * one ended (so block magics that occur inside compressed data, false
 * candidates, are passed over) and only if its candidate decoded cleanly.
 */
#ifndef GC_BZ2_DEC_WALK_CUH
#define GC_BZ2_DEC_WALK_CUH

#include <stdint.h>

#include <functional>
#include <vector>

#include "bz2_dec_policy.cuh"
#include "bz2_dec_types.h"
#include "bzip2.h" /* bz2_dstate: a stream's part resumes from it and stops in it */

namespace gcgpu {

/* A block the walk accepted. */
struct DecAccepted {
    uint32_t cand;     /* candidate index (in the walk's cand[]) */
    uint32_t sno, bno; /* stream and block number, from 1 */
    uint32_t job;      /* set by the caller */
};

struct DecWalk {
    uint64_t len_bits = 0;
    bool in_stream = false; /* false: a stream header (or the end) comes next */
    bool done = false;
    uint64_t pos = 0; /* next bit to read */
    unsigned sno = 0, bno = 0;
    int level = 9;
    uint32_t combined = 0;
    uint64_t skipped = 0, accepted = 0; /* candidates passed over / taken */
    uint32_t last_cand = UINT32_MAX;
    /* bits known without asking the device: [known_at, known_at + 128) */
    uint64_t known_at = UINT64_MAX;
    uint8_t known[16];
    /* A stream's part (bz2_decompress_part's rules, docs/BZIP2.md "Streaming"):
     * trailing garbage ends the walk instead of failing it, and with more
     * input to come, a piece cut by the end of the input stops the walk at
     * its first bit (stopped) instead of failing it. */
    bool partial = false, more = false, seen_any = false;
    bool stopped = false, garbage = false;
    uint64_t garbage_at = 0; /* byte */
    /* A part that begins at a magic inside a "head" stream whose header it
     * does not see (bz2_dstate.head): as in the CPU engine, the head
     * stream's end-of-stream CRC is recorded, not checked, and its longest
     * block kept; bz2_dstate_follow checks both against the input before. */
    bool head = false, head_ended = false;
    uint32_t head_max_n = 0, head_blocks = 0, head_combined = 0, head_stored = 0;
};

/* Reads 16 bytes of the input from byte `at` (zeros past its end). */
using DecPeek = std::function<int(uint64_t at, uint8_t out[16], gc_error *err)>;

/*
 * Walk from w's state over candidates cand[0..ncand), whose wave
 * [c0, c1) has decoded into res[0..c1 - c0). Appends the accepted blocks to
 * acc. Returns GC_OK with w.done, or with *next set to the candidate the
 * walk needs next (>= c1: decode the wave from there), or the stream's
 * error (status and message naming stream and block).
 */
int bz2_dec_walk(DecWalk &w, const uint64_t *cand, uint32_t ncand, uint32_t c0, uint32_t c1, const DecCand *res,
                 const DecPeek &peek, std::vector<DecAccepted> &acc, uint32_t *next, gc_error *err);

/* w (its len_bits set) resumes a stream's part from p, more input
 * following or not (gc_gpu_job.part, part_more). */
void bz2_dec_walk_resume(DecWalk &w, const bz2_dstate &p, bool more);

/* Where a part's walk w over len input bytes stopped, as p (whose
 * out_soft is kept) and *used: what bz2_decompress_part leaves for the
 * same input. */
void bz2_dec_walk_part(const DecWalk &w, uint64_t len, bz2_dstate *p, size_t *used);

} // namespace gcgpu

#endif
