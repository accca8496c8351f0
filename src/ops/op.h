/* op.h — how an operation is declared to the engine: its name and parameters, the halo it needs,
 * its input and output types, and one function per backend.
 *
 * The engine hands an op a block: interleaved RGB8 input covering the output block plus `halo`
 * pixels on every side (the neighbours' real pixels inside the level, a reflection at the level's
 * border), and planar output (one plane per channel). The op computes every output pixel of the
 * block from that input alone, with the same arithmetic wherever the pixel lies, so a level
 * processed as many blocks equals the level processed as one block, bit for bit. The CPU function
 * is the reference; the CUDA backend registers its kernels by the op's name (cuda/cuda_ops.h),
 * so that ops never name a backend.
 */
#ifndef SP_OPS_OP_H
#define SP_OPS_OP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "slidepipe.h"
#include "zarr/zarr_store.h"

/* Loops that compilers vectorise get an AVX2 copy beside the baseline x86-64 one, picked when the
 * program loads (function multiversioning). Both copies do the same integer and IEEE float
 * operations (no FMA: ops build with -ffp-contract=off), so their results are identical. */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SP_OPS_NO_CLONES /* its runtime is not up yet when the clones' resolvers run */
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define SP_OPS_NO_CLONES
#endif
#if defined(__x86_64__) && defined(__ELF__) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(SP_OPS_NO_CLONES)
#define SP_OPS_SIMD __attribute__((target_clones("avx2", "default")))
#else
#define SP_OPS_SIMD
#endif

/* An op's parameters, parsed from its spec ("gaussian:1.5") or found by its prepare hook. */
typedef struct sp_op_params {
    double sigma;             /* gaussian: the standard deviation in pixels */
    sp_stains source, target; /* macenko: the slide's stains and the ones to map them to */
    sp_reinhard_stats colour_source, colour_target; /* reinhard: the slide's and the target's */
} sp_op_params;

/* One block of work. */
typedef struct sp_op_block {
    const uint8_t *src;    /* RGB8 pixel (-halo, -halo) relative to the block's first output */
    int64_t src_stride;    /* bytes between input rows */
    int64_t width, height; /* output pixels */
    void *dst;             /* channel 0, row 0 of the output (uint8_t or float) */
    int64_t dst_stride;    /* elements between output rows */
    int64_t dst_plane;     /* elements between output channel planes */
    float *scratch;        /* op->scratch_floats(params, width, height) floats, private */
} sp_op_block;

typedef struct sp_op {
    const char *name;
    /* Parse the text after "NAME:" (NULL when there is none) into params; NULL for ops that
     * take no parameter. Fails with SP_E_INVALID_ARG and a message. */
    sp_status (*parse)(const char *arg, sp_op_params *params, sp_err *err);
    /* What the op learns from the whole slide before the run (macenko: its stains), into
     * params; NULL for ops that need nothing. Called once, before anything is written; its
     * error (with a message) ends the run. */
    sp_status (*prepare)(sp_slide *slide, sp_op_params *params, sp_err *err);
    /* Pixels of context needed on each side of an output pixel. */
    int (*halo)(const sp_op_params *params);
    sp_pixel_format input; /* what the engine reads: SP_PIXEL_RGB8 */
    sp_zarr_dtype output;  /* SP_ZARR_U8 or SP_ZARR_F32 */
    int channels;          /* output planes */
    /* Scratch floats a block of width x height needs (0 for none). */
    size_t (*scratch_floats)(const sp_op_params *params, int64_t width, int64_t height);
    /* The CPU reference. Never fails on valid blocks; returns SP_OK. */
    sp_status (*cpu)(const sp_op_params *params, const sp_op_block *block);
} sp_op;

extern const sp_op sp_op_rgb; /* the identity, as planes: not in the op table (convert uses it) */
extern const sp_op sp_op_grey;
extern const sp_op sp_op_od;
extern const sp_op sp_op_sobel;
extern const sp_op sp_op_gaussian;
extern const sp_op sp_op_macenko;
extern const sp_op sp_op_reinhard;

/* Find the op named by `spec` ("grey", "od", "sobel", "gaussian:SIGMA", "macenko", "reinhard") and parse its
 * parameters; SP_E_INVALID_ARG with a message naming the problem otherwise. */
sp_status sp_op_parse(const char *spec, const sp_op **op, sp_op_params *params, sp_err *err);

/* The od op's 256 values, -ln(max(i, 1) / 255) rounded to float (the CUDA backend uses the same
 * table). */
const float *sp_op_od_table(void);

/* The gaussian op's radius, int(4 sigma + 0.5), and its weights w[0..radius] (scipy's
 * normalisation, computed in double, rounded to float), shared with the CUDA backend. */
int sp_op_gaussian_radius(double sigma);
void sp_op_gaussian_weights(double sigma, int radius, float *weights);

/* Deinterleave channel `c` of an RGB8 block (w x h pixels, rows of `stride` bytes) into floats
 * (rows of w). */
void sp_op_rgb_channel_to_float(const uint8_t *src, int64_t stride, int c, int64_t w, int64_t h,
                                float *restrict out);

#endif
