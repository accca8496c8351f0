/* engine.h — the tile engine: streams one level of a slide through an op into a sink, in memory
 * that depends on the tile size and thread count, never on the slide's size.
 *
 * The level is cut into output tiles on a chunk grid (chunk x chunk, smaller at the right and
 * bottom edges). For each tile the engine reads the tile plus the op's halo with
 * sp_slide_read_region (the neighbours' real pixels; through the slide's tile cache), builds the
 * part of the halo that lies outside the level by reflection (scipy.ndimage's mode 'reflect':
 * d c b a | a b c d | d c b a), runs the op and hands the finished chunk to the sink. At most
 * `in_flight` input tiles exist at once; workers prefer computing a tile that has been read over
 * reading a new one, and read the next tiles while others compute, so reading and decoding tile
 * N+1 overlaps computing tile N (with two workers or more; the default is two per core).
 * Because every op computes each pixel from its input alone with the same arithmetic, the
 * tile-wise result equals the whole-level result bit for bit.
 *
 * Row mode, for levels whose storage tiles are too large for the tile cache (which would decode
 * such a tile again for every chunk it touches): the level is read in bands of whole tile rows,
 * one read per band, so each stored tile is decoded once; the rows go into a ring of the rows a
 * chunk row needs, and each chunk row is computed on the library's thread pool as soon as its
 * rows are in. Memory: one band of tile rows and the ring, the level's width each. The result
 * is the same bytes as tile mode.
 *
 * The global mode is the baseline the tile engine is measured against: it reads the whole level
 * (plus reflected border) into memory, runs the op over it at once (split into row stripes, one
 * per thread) into a whole-level output, then hands the chunks to the sink.
 */
#ifndef SP_ENGINE_ENGINE_H
#define SP_ENGINE_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "ops/op.h"
#include "slidepipe.h"

/* Receives one finished chunk: op->channels planes of chunk x chunk elements (C order c,y,x),
 * zeros past the level's edge. Called from worker threads, concurrently; `chunk` is valid only
 * during the call. */
typedef sp_status (*sp_engine_sink_fn)(void *ctx, int64_t chunk_row, int64_t chunk_col,
                                       const void *chunk, sp_err *err);

typedef struct sp_engine_job {
    sp_slide *slide;
    int32_t level;
    const sp_op *op;
    sp_op_params params;
    int64_t chunk; /* output tile side, >= 1 */
    int threads;   /* workers, >= 1 */
    int in_flight; /* input tiles held at once; 0 = 2 x threads */
    bool global;   /* the whole-level baseline instead of tiles */
    bool rows;     /* row mode even where the level's tiles fit the tile cache (for tests) */
    bool cuda;     /* tiles: run the op on the GPU (each worker with its own stream) */
    sp_engine_sink_fn sink;
    void *sink_ctx;
    /* May be NULL. Called once, from any thread, when the run fails (a read, the op, a sink), so
     * that a sink which waits for chunks still to come (convert's pyramid) can stop waiting. */
    void (*sink_abort)(void *sink_ctx);
    sp_progress_fn progress; /* may be NULL; called one call at a time, from the workers */
    void *progress_user;
} sp_engine_job;

/* What a run held, for tests and benchmarks. */
typedef struct sp_engine_stats {
    int64_t tiles;         /* chunks handed to the sink */
    int64_t max_in_flight; /* most input tiles held at once (tile mode) */
    uint64_t buffer_bytes; /* bytes of pixel buffers allocated by the engine */
} sp_engine_stats;

/* Run the job; `stats` may be NULL. On failure nothing more is handed to the sink and the first
 * error (a read, the sink, memory) is returned with its message. */
sp_status sp_engine_run(const sp_engine_job *job, sp_engine_stats *stats, sp_err *err);

#endif
