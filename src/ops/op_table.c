/* op_table.c — the table of operations and the parser of op specs ("sobel", "gaussian:2.5"),
 * plus the one helper every neighbourhood op shares: one channel of interleaved RGB8 as floats.
 * A new op adds its declaration to OPS and nothing else.
 */
#include <string.h>

#include "ops/op.h"

static const sp_op *const OPS[] = {&sp_op_grey, &sp_op_od, &sp_op_sobel, &sp_op_gaussian,
                                   &sp_op_macenko, &sp_op_reinhard};

sp_status sp_op_parse(const char *spec, const sp_op **op, sp_op_params *params, sp_err *err) {
    *op = NULL;
    memset(params, 0, sizeof *params);
    if (spec == NULL || *spec == '\0') {
        return sp_err_set(err, SP_E_INVALID_ARG,
                          "no op given (grey, od, sobel, gaussian:SIGMA, macenko, reinhard)");
    }
    const char *colon = strchr(spec, ':');
    size_t name_len = colon ? (size_t)(colon - spec) : strlen(spec);
    for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i++) {
        if (strlen(OPS[i]->name) != name_len || memcmp(OPS[i]->name, spec, name_len) != 0) {
            continue;
        }
        if (OPS[i]->parse == NULL) {
            if (colon != NULL) {
                return sp_err_set(err, SP_E_INVALID_ARG, "op '%s' takes no parameter",
                                  OPS[i]->name);
            }
        } else {
            sp_status st = OPS[i]->parse(colon ? colon + 1 : NULL, params, err);
            if (st != SP_OK) {
                return st;
            }
        }
        *op = OPS[i];
        return SP_OK;
    }
    return sp_err_set(err, SP_E_INVALID_ARG,
                      "unknown op '%.*s' (grey, od, sobel, gaussian:SIGMA, macenko, reinhard)", (int)name_len,
                      spec);
}

void sp_op_rgb_channel_to_float(const uint8_t *src, int64_t stride, int c, int64_t w, int64_t h,
                                float *restrict out) {
    for (int64_t y = 0; y < h; y++) {
        const uint8_t *restrict s = src + y * stride + c;
        float *restrict o = out + y * w;
        for (int64_t x = 0; x < w; x++) {
            o[x] = (float)s[3 * x];
        }
    }
}
