/* fuzz_zarr.c — libFuzzer target for the OME-Zarr metadata parsers and the shard index
 * (src/formats/zarr_meta.c). The input is offered as each of the documents a store holds: a v2
 * ".zarray", a v3 array "zarr.json", a v2 ".zattrs" and a v3 group "zarr.json". An array that
 * parses has its first and last chunk keys built and, when sharded, the tail of the input taken
 * as a shard ending in its index (checked and looked up entry by entry, as the reader does); the
 * raw input is also parsed as the index of a small fixed shard layout, so index bytes are
 * fuzzed with and without a JSON prefix. The input is copied to an exact-size buffer: the
 * parsers are told the length and must never read past it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/zarr_meta.h"

/* Walk a shard held in `shard` (size bytes) the way zarr.c does. */
static void walk_shard(const sp_zarr_array_meta *m, const uint8_t *shard, size_t size) {
    uint64_t need = sp_zarr_shard_index_bytes(m);
    if (need > size) {
        return;
    }
    const uint8_t *index = m->index_at_start ? shard : shard + (size - need);
    sp_err err = {0};
    if (sp_zarr_shard_index_check(m, index, (size_t)need, size, &err) != SP_OK) {
        /* The reader stops here; look the entries up anyway, the lookup must stay in bounds. */
        sp_err_clear(&err);
    }
    for (uint64_t i = 0; i < m->shard_chunks && i < 256; i++) {
        bool present;
        uint64_t offset, nbytes;
        sp_err e = {0};
        if (sp_zarr_shard_entry(m, index, size, i, &present, &offset, &nbytes, &e) == SP_OK &&
            present) {
            /* Touch the first and last byte: ASan reports a range outside the shard. */
            volatile uint8_t sink = nbytes ? shard[offset] ^ shard[offset + nbytes - 1] : 0;
            (void)sink;
        }
    }
}

static void array_doc(const char *text, size_t size, int format, const sp_limits *limits,
                      const uint8_t *data) {
    sp_zarr_array_meta m;
    sp_err err = {0};
    if (sp_zarr_parse_array(text, size, format, limits, &m, &err) != SP_OK) {
        return;
    }
    int64_t first[SP_ZARR_MAX_DIMS] = {0}, last[SP_ZARR_MAX_DIMS] = {0};
    for (int d = 0; d < m.ndim; d++) {
        last[d] = (m.shape[d] - 1) / m.file[d];
    }
    char key[256];
    sp_zarr_chunk_key(&m, first, key, sizeof key, &err);
    sp_zarr_chunk_key(&m, last, key, sizeof key, &err);
    sp_zarr_chunk_key(&m, last, key, 4, &err); /* too short on purpose */
    if (m.sharded && m.shard_chunks <= 4096) {
        walk_shard(&m, data, size);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sp_limits limits;
    sp_limits_default(&limits);
    limits.value[SP_LIMIT_MAX_METADATA] = 1 << 20;
    limits.value[SP_LIMIT_MAX_ALLOC] = 64 << 20;
    char *text = malloc(size ? size : 1);
    if (text == NULL) {
        return 0;
    }
    memcpy(text, data, size);

    array_doc(text, size, 2, &limits, data);
    array_doc(text, size, 3, &limits, data);
    for (int format = 2; format <= 3; format++) {
        sp_zarr_group_meta g;
        sp_err err = {0};
        if (sp_zarr_parse_group(text, size, format, &limits, &g, &err) == SP_OK) {
            for (int32_t i = 0; i < g.n_datasets; i++) {
                (void)sp_zarr_path_is_safe(g.datasets[i].path);
            }
            sp_zarr_group_free(&g);
        }
    }

    /* The raw bytes as the index of a shard of 2 x 2 inner chunks, in both places, with and
     * without a checksum, over a shard as long as the input. */
    sp_zarr_array_meta m = {.ndim = 2, .sharded = true, .shard_chunks = 4};
    for (int variant = 0; variant < 4; variant++) {
        m.index_at_start = variant & 1;
        m.index_crc32c = (variant & 2) != 0;
        walk_shard(&m, data, size);
    }
    free(text);
    return 0;
}
