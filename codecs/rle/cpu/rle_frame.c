/*
 * rle_frame.c - the rle frame around the chunk records (docs/FORMAT.md): the
 * options and the output bound, and the reading of a frame's header and
 * chunk index. The fixed header is written by rle_format.h's
 * rle_header_write_fixed, shared with the CUDA backend.
 *
 * Input that changes while we run (rle.c says why it may): the fixed header
 * is copied into rle_frame_info and checked there; the chunk index is copied
 * once (rle_frame_index_copy) and the header CRC checked again over the copy,
 * so record offsets and sizes come only from what was checked.
 */
#include <string.h>

#include "rle_internal.h"

int rle_options_resolve(const rle_options *in, rle_options *out, gc_error *err)
{
    rle_options o = in ? *in : (rle_options){ 0, 0, 0 };
    if (o.width == 0)
        o.width = 1;
    if (o.chunk_size == 0)
        o.chunk_size = RLE_DEFAULT_CHUNK_SIZE;
    if (!valid_width(o.width))
        return gc_fail(err, GC_E_INVALID, "rle: element width %u is not 1, 2, 4 or 8", o.width);
    if (o.chunk_size < RLE_MIN_CHUNK_SIZE || o.chunk_size > RLE_MAX_CHUNK_SIZE)
        return gc_fail(err, GC_E_INVALID, "rle: chunk size %u is outside [%u, %u]", (unsigned)o.chunk_size,
                       RLE_MIN_CHUNK_SIZE, RLE_MAX_CHUNK_SIZE);
    if (o.chunk_size % o.width != 0)
        return gc_fail(err, GC_E_INVALID, "rle: chunk size %u is not a multiple of the element width %u",
                       (unsigned)o.chunk_size, o.width);
    *out = o;
    return GC_OK;
}

size_t rle_compress_bound(size_t src_len, const rle_options *opt)
{
    rle_options o;
    if (rle_options_resolve(opt, &o, NULL) != GC_OK)
        return 0;
    uint64_t chunks = div_ceil(src_len - src_len % o.width, o.chunk_size);
    /* header + index + crc + one record header per chunk + every byte stored */
    uint64_t fixed = rle_header_size_for(chunks) + RLE_CHUNK_HEADER * chunks;
    size_t bound;
    if (fixed > SIZE_MAX || __builtin_add_overflow((size_t)fixed, src_len, &bound))
        return SIZE_MAX;
    return bound;
}

static int check_fixed_header(const uint8_t *src, rle_frame_info *info, gc_error *err)
{
    if (memcmp(src + RLE_MAGIC_OFFSET, RLE_MAGIC, 4) != 0)
        return gc_fail(err, GC_E_CORRUPT, "rle: frame: bad magic (not an rle frame)");
    if (src[RLE_VERSION_OFFSET] != RLE_VERSION)
        return gc_fail(err, GC_E_UNSUPPORTED, "rle: frame: version %u, only %u is supported",
                       src[RLE_VERSION_OFFSET], RLE_VERSION);
    info->width = src[RLE_WIDTH_OFFSET];
    info->tail_len = src[RLE_TAIL_LEN_OFFSET];
    info->chunk_size = load32(src + RLE_CHUNK_SIZE_OFFSET);
    info->original_size = load64(src + RLE_ORIGINAL_SIZE_OFFSET);
    info->chunk_count = load32(src + RLE_CHUNK_COUNT_OFFSET);
    memcpy(info->tail, src + RLE_TAIL_OFFSET, sizeof info->tail);
    if (!valid_width(info->width))
        return gc_fail(err, GC_E_CORRUPT, "rle: frame: element width %u is not 1, 2, 4 or 8", info->width);
    if (info->tail_len != info->original_size % info->width)
        return gc_fail(err, GC_E_CORRUPT, "rle: frame: tail_len %u, expected original_size %% width = %u",
                       info->tail_len, (unsigned)(info->original_size % info->width));
    if (src[RLE_RESERVED_OFFSET] != 0)
        return gc_fail(err, GC_E_CORRUPT, "rle: frame: reserved byte is 0x%02x, not 0", src[RLE_RESERVED_OFFSET]);
    if (info->chunk_size < RLE_MIN_CHUNK_SIZE || info->chunk_size > RLE_MAX_CHUNK_SIZE ||
        info->chunk_size % info->width != 0)
        return gc_fail(err, GC_E_CORRUPT, "rle: frame: chunk_size %u is not a multiple of %u in [%u, %u]",
                       (unsigned)info->chunk_size, info->width, RLE_MIN_CHUNK_SIZE, RLE_MAX_CHUNK_SIZE);
    uint64_t expect = div_ceil(info->original_size - info->tail_len, info->chunk_size);
    if (info->chunk_count != expect)
        return gc_fail(err, GC_E_CORRUPT, "rle: frame: chunk_count %u, original_size %llu needs %llu",
                       (unsigned)info->chunk_count, (unsigned long long)info->original_size,
                       (unsigned long long)expect);
    return GC_OK;
}

/* Every index entry (read once each from index, which is either the frame or
 * a private copy) holds at least a record header; together they fill the rest
 * of the frame exactly, or, when records_used is not NULL (a frame that may
 * be followed by more frames), no more than the records_len bytes present:
 * *records_used gets their sum. */
static int check_index(const rle_frame_info *info, const uint8_t *index, size_t records_len, size_t *records_used,
                       gc_error *err)
{
    uint64_t total = 0; /* < 2^32 entries of < 2^32 each: cannot overflow */
    for (uint32_t i = 0; i < info->chunk_count; i++) {
        uint32_t size = load32(index + RLE_INDEX_ENTRY * (size_t)i);
        if (size < RLE_CHUNK_HEADER)
            return gc_fail(err, GC_E_CORRUPT, "rle: chunk %u: index entry %u is shorter than a record header",
                           (unsigned)i, (unsigned)size);
        total += size;
    }
    if (total > records_len)
        return gc_fail(err, GC_E_TRUNCATED, "rle: frame: index needs %llu bytes of chunk records, %zu present",
                       (unsigned long long)total, records_len);
    if (records_used) {
        *records_used = (size_t)total;
        return GC_OK;
    }
    if (total < records_len)
        return gc_fail(err, GC_E_CORRUPT, "rle: frame: %llu trailing bytes after the last chunk",
                       (unsigned long long)(records_len - total));
    return GC_OK;
}

/* rle_frame_parse, or with frame_len not NULL rle_frame_parse_prefix. */
static int parse_frame(const uint8_t *src, size_t src_len, rle_frame_info *info, size_t *frame_len, gc_error *err)
{
    gc_error_clear(err);
    if (src_len < RLE_HEADER_FIXED)
        return gc_fail(err, GC_E_TRUNCATED, "rle: frame: %zu bytes, shorter than the header", src_len);
    int rc = check_fixed_header(src, info, err);
    if (rc != GC_OK)
        return rc;
    uint64_t header_size = rle_header_size_for(info->chunk_count);
    if (header_size > src_len)
        return gc_fail(err, GC_E_TRUNCATED, "rle: frame: header and index need %llu bytes, %zu present",
                       (unsigned long long)header_size, src_len);
    info->header_size = (size_t)header_size;
    uint32_t stored = load32(src + header_size - RLE_HEADER_CRC);
    uint32_t computed = crc32c(src, header_size - RLE_HEADER_CRC);
    if (stored != computed)
        return gc_fail(err, GC_E_CRC, "rle: frame: header CRC32C mismatch (stored 0x%08x, computed 0x%08x)",
                       (unsigned)stored, (unsigned)computed);
    size_t records = 0;
    rc = check_index(info, src + RLE_HEADER_FIXED, src_len - info->header_size, frame_len ? &records : NULL, err);
    if (rc == GC_OK && frame_len)
        *frame_len = info->header_size + records;
    return rc;
}

int rle_frame_parse(const uint8_t *src, size_t src_len, rle_frame_info *info, gc_error *err)
{
    return parse_frame(src, src_len, info, NULL, err);
}

int rle_frame_parse_prefix(const uint8_t *src, size_t src_len, rle_frame_info *info, size_t *frame_len,
                           gc_error *err)
{
    return parse_frame(src, src_len, info, frame_len, err);
}

int rle_frame_index_copy(const uint8_t *src, size_t src_len, const rle_frame_info *info, uint32_t *index,
                         gc_error *err)
{
    gc_error_clear(err);
    uint64_t header_size = rle_header_size_for(info->chunk_count);
    if (header_size != info->header_size || header_size > src_len)
        return gc_fail(err, GC_E_INVALID,
                       "rle: frame: index copy with a frame info that does "
                       "not describe this frame");
    size_t n = info->chunk_count;
    if (n)
        memcpy(index, src + RLE_INDEX_OFFSET, RLE_INDEX_ENTRY * n); /* the one read of the index */
    /* The header CRC again, over the copy: what is checked is what is used. */
    uint32_t computed = crc32c_update(crc32c(src, RLE_INDEX_OFFSET), index, RLE_INDEX_ENTRY * n);
    uint32_t stored = load32(src + header_size - RLE_HEADER_CRC);
    if (stored != computed)
        return gc_fail(err, GC_E_CRC,
                       "rle: frame: header CRC32C mismatch (stored 0x%08x, computed 0x%08x): "
                       "the frame changed while it was read",
                       (unsigned)stored, (unsigned)computed);
    return check_index(info, (const uint8_t *)index, src_len - info->header_size, NULL, err);
}

size_t rle_stream_part_bytes(const rle_options *opt)
{
    const size_t most = (size_t)32 << 20;
    size_t part = most / opt->chunk_size * opt->chunk_size;
    return part ? part : opt->chunk_size;
}

void rle_frame_extent(const uint8_t *p, size_t avail, uint64_t *index_end, uint64_t *len, uint64_t *original)
{
    *index_end = *len = *original = 0;
    if (avail < RLE_HEADER_FIXED)
        return;
    uint64_t count = rle_get_le32(p + RLE_CHUNK_COUNT_OFFSET);
    *index_end = rle_header_size_for(count);
    for (int i = 7; i >= 0; i--)
        *original = *original << 8 | p[RLE_ORIGINAL_SIZE_OFFSET + i];
    if (*index_end > avail)
        return;
    uint64_t total = *index_end; /* at most 2^32 entries below 2^32 each: no overflow */
    for (uint64_t i = 0; i < count; i++)
        total += rle_get_le32(p + RLE_INDEX_OFFSET + i * RLE_INDEX_ENTRY);
    *len = total;
}
