/* icc.c — colour management of a slide's reads: the embedded ICC profile a format found
 * (slide->icc_profile) handed to callers as stored, and, on request, the conversion of every
 * pixel read from the slide's levels to sRGB through LittleCMS. The transform is built once
 * per slide when conversion is turned on (so a broken profile is reported there, naming the
 * file, and never half-way through a read), with LittleCMS's one-pixel cache off so that many
 * threads may run it at once; reads find it through one atomic pointer. The rendering intent
 * is the profile's own (its header's), which is what OpenSlide's examples pass to Pillow's
 * ImageCms (getDefaultIntent), so converted pixels equal theirs. */
#include <lcms2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "slide/icc.h"

typedef struct icc_state {
    cmsContext ctx;
    cmsHTRANSFORM rgb;  /* TYPE_RGB_8 in place */
    cmsHTRANSFORM rgba; /* TYPE_RGBA_8 in place: alpha, an extra channel, is left as it was */
} icc_state;

/* Where LittleCMS's messages go while a transform is built (its user data is this). */
typedef struct icc_log {
    char msg[200];
} icc_log;

static void log_to_buffer(cmsContext ctx, cmsUInt32Number code, const char *text) {
    (void)code;
    icc_log *log = cmsGetContextUserData(ctx);
    if (log != NULL && log->msg[0] == '\0') {
        snprintf(log->msg, sizeof log->msg, "%s", text);
    }
}

/* After the build nothing is logged: the library never prints, and the buffer is gone. */
static void log_nowhere(cmsContext ctx, cmsUInt32Number code, const char *text) {
    (void)ctx;
    (void)code;
    (void)text;
}

static void state_free(icc_state *st) {
    if (st == NULL) {
        return;
    }
    if (st->rgb != NULL) {
        cmsDeleteTransform(st->rgb);
    }
    if (st->rgba != NULL) {
        cmsDeleteTransform(st->rgba);
    }
    if (st->ctx != NULL) {
        cmsDeleteContext(st->ctx);
    }
    free(st);
}

static const char *label(const sp_slide *s) {
    return s->open_name ? s->open_name : "slide";
}

static const char *space_name(cmsColorSpaceSignature space) {
    switch (space) {
    case cmsSigGrayData: return "grey";
    case cmsSigCmykData: return "CMYK";
    case cmsSigLabData: return "Lab";
    case cmsSigXYZData: return "XYZ";
    case cmsSigYCbCrData: return "YCbCr";
    default: return "a non-RGB space";
    }
}

/* Build the two transforms from the slide's profile into *out. */
static sp_status build(const sp_slide *s, icc_state **out, sp_err *err) {
    *out = NULL;
    icc_log log = {{0}};
    icc_state *st = calloc(1, sizeof *st);
    if (st == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "%s: out of memory building the ICC transform",
                          label(s));
    }
    st->ctx = cmsCreateContext(NULL, &log);
    if (st->ctx == NULL) {
        free(st);
        return sp_err_set(err, SP_E_NOMEM, "%s: out of memory building the ICC transform",
                          label(s));
    }
    cmsSetLogErrorHandlerTHR(st->ctx, log_to_buffer);
    sp_status status = SP_OK;
    cmsHPROFILE in = NULL, srgb = NULL;
    if (s->icc_profile_len > UINT32_MAX) {
        status = sp_err_set(err, SP_E_LIMIT, "%s: the embedded ICC profile is too large", label(s));
    } else {
        in = cmsOpenProfileFromMemTHR(st->ctx, s->icc_profile, (cmsUInt32Number)s->icc_profile_len);
        if (in == NULL) {
            status = sp_err_set(err, SP_E_CORRUPT,
                                "%s: the embedded ICC profile (%zu bytes) cannot be read%s%s",
                                label(s), s->icc_profile_len, log.msg[0] ? ": " : "", log.msg);
        }
    }
    if (status == SP_OK && cmsGetColorSpace(in) != cmsSigRgbData) {
        status = sp_err_set(err, SP_E_UNSUPPORTED,
                            "%s: the embedded ICC profile describes %s data, not RGB", label(s),
                            space_name(cmsGetColorSpace(in)));
    }
    if (status == SP_OK && (srgb = cmsCreate_sRGBProfileTHR(st->ctx)) == NULL) {
        status =
            sp_err_set(err, SP_E_NOMEM, "%s: out of memory building the ICC transform", label(s));
    }
    if (status == SP_OK) {
        cmsUInt32Number intent = cmsGetHeaderRenderingIntent(in);
        if (intent > INTENT_ABSOLUTE_COLORIMETRIC) {
            intent = INTENT_PERCEPTUAL;
        }
        st->rgb = cmsCreateTransformTHR(st->ctx, in, TYPE_RGB_8, srgb, TYPE_RGB_8, intent,
                                        cmsFLAGS_NOCACHE);
        /* Without cmsFLAGS_COPY_ALPHA LittleCMS does not write extra channels, so in place the
         * alpha stays; measured 66 MP/s against 45 with the flag (one core, 8-bit RGBA). */
        st->rgba = st->rgb == NULL ? NULL
                                   : cmsCreateTransformTHR(st->ctx, in, TYPE_RGBA_8, srgb,
                                                           TYPE_RGBA_8, intent, cmsFLAGS_NOCACHE);
        if (st->rgb == NULL || st->rgba == NULL) {
            status = sp_err_set(err, SP_E_CORRUPT,
                                "%s: no transform from the embedded ICC profile to sRGB%s%s",
                                label(s), log.msg[0] ? ": " : "", log.msg);
        }
    }
    if (in != NULL) {
        cmsCloseProfile(in);
    }
    if (srgb != NULL) {
        cmsCloseProfile(srgb);
    }
    cmsSetLogErrorHandlerTHR(st->ctx, log_nowhere);
    if (status != SP_OK) {
        state_free(st);
        return status;
    }
    *out = st;
    return SP_OK;
}

sp_status sp_slide_icc_profile(const sp_slide *s, const uint8_t **data, size_t *len) {
    if (s == NULL || data == NULL || len == NULL) {
        return SP_E_INVALID_ARG;
    }
    *data = s->icc_profile;
    *len = s->icc_profile != NULL ? s->icc_profile_len : 0;
    return s->icc_profile != NULL ? SP_OK : SP_E_NOT_FOUND;
}

sp_status sp_slide_set_icc_transform(sp_slide *s, int enable, char *errbuf, size_t err_len) {
    sp_err err = {0};
    sp_status status = SP_OK;
    if (s == NULL) {
        status = sp_err_set(&err, SP_E_INVALID_ARG, "sp_slide_set_icc_transform: null slide");
    } else if (!enable) {
        icc_state *old =
            __atomic_exchange_n((icc_state **)&s->icc_transform, NULL, __ATOMIC_ACQ_REL);
        state_free(old);
    } else if (s->icc_transform != NULL) {
        status = SP_OK;
    } else if (s->icc_profile == NULL) {
        status = sp_err_set(&err, SP_E_NOT_FOUND, "%s: the slide embeds no ICC profile", label(s));
    } else {
        icc_state *st = NULL;
        status = build(s, &st, &err);
        if (status == SP_OK) {
            __atomic_store_n((icc_state **)&s->icc_transform, st, __ATOMIC_RELEASE);
        }
    }
    if (status != SP_OK) {
        sp_err_copy_out(&err, errbuf, err_len);
    }
    return status;
}

bool sp_slide_icc_active(const sp_slide *s) {
    return __atomic_load_n((icc_state *const *)&s->icc_transform, __ATOMIC_ACQUIRE) != NULL;
}

void sp_slide_icc_apply(const sp_slide *s, sp_pixel_format fmt, void *dst, int64_t stride,
                        int64_t w, int64_t h) {
    const icc_state *st = __atomic_load_n((icc_state *const *)&s->icc_transform, __ATOMIC_ACQUIRE);
    if (st == NULL || w <= 0 || h <= 0) {
        return;
    }
    bool rgba = fmt == SP_PIXEL_RGBA8;
    cmsHTRANSFORM t = rgba ? st->rgba : st->rgb;
    uint8_t *rows = dst;
    /* Rows one at a time: the caller's stride may exceed what LittleCMS's 32-bit strides hold. */
    for (int64_t y = 0; y < h; y++) {
        uint8_t *row = rows + y * stride;
        for (int64_t x0 = 0; x0 < w; x0 += 1 << 20) {
            int64_t n = w - x0 < (1 << 20) ? w - x0 : (1 << 20);
            uint8_t *p = row + x0 * (rgba ? 4 : 3);
            cmsDoTransform(t, p, p, (cmsUInt32Number)n);
        }
        if (rgba) {
            /* Outside the image and in missing tiles a pixel stays (0,0,0,0), as without ICC. */
            for (int64_t x = 0; x < w; x++) {
                uint8_t *p = row + x * 4;
                if (p[3] == 0) {
                    p[0] = p[1] = p[2] = 0;
                }
            }
        }
    }
}

void sp_slide_icc_free(sp_slide *s) {
    state_free(s->icc_transform);
    s->icc_transform = NULL;
    free(s->icc_profile);
    s->icc_profile = NULL;
    s->icc_profile_len = 0;
}
