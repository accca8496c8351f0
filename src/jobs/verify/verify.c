/* verify.c — sp_zarr_verify: a store's files against its manifest (zarr/zarr_verify.c), then its
 * pixels against the pixel hash it records.
 *
 * The manifest proves that no file changed since it was written; the pixel hash proves that the
 * pixels are still the ones the converter wrote, whatever happened to the files — a store whose
 * chunks were re-encoded and whose manifest was regenerated passes the first check and fails this
 * one. The pixels are read back through the slide layer, as any reader of the store would see them
 * (a missing chunk reads as the fill value), so this lives above both the container and the slide
 * layer. A store that records no pixel hash (older stores, float32 results of process, which the
 * slide layer cannot read) is checked on its files alone.
 */
#include <string.h>

#include "base/err.h"
#include "zarr/zarr_store.h"

/* The property the Zarr reader publishes from the store's "slidepipe" attributes. */
#define PIXEL_HASH_PROPERTY "slidepipe.pixel-hash"

static sp_status check_pixels(const char *zarr_path,
                              void (*report)(void *user, const char *path, const char *problem),
                              void *report_user, int64_t *problems, char *pixel_hash, sp_err *err) {
    sp_slide *slide = NULL;
    if (sp_slide_open(zarr_path, &slide, NULL, 0) != SP_OK) {
        /* Not a store the slide layer reads; its files were checked. */
        return SP_OK;
    }
    const char *recorded = sp_slide_property_value(slide, PIXEL_HASH_PROPERTY);
    sp_status st = SP_OK;
    if (recorded != NULL) {
        char got[65], msg[SP_ERR_MSG_MAX];
        st = sp_pixel_hash(slide, 0, got, NULL, NULL, msg, sizeof msg);
        const char *problem = NULL;
        if (st == SP_E_NOMEM) {
            sp_err_set(err, st, "%s", msg);
        } else if (st != SP_OK) {
            problem = "unreadable";
            st = SP_OK;
        } else {
            memcpy(pixel_hash, got, 65);
            problem = strcmp(got, recorded) != 0 ? "changed" : NULL;
        }
        if (problem != NULL) {
            (*problems)++;
            if (report != NULL) {
                report(report_user, "pixel_hash", problem);
            }
        }
    }
    sp_slide_close(slide);
    return st;
}

sp_status sp_zarr_verify(const char *zarr_path,
                         void (*report)(void *user, const char *path, const char *problem),
                         void *report_user, int64_t *problems, char *dataset_hash, char *pixel_hash,
                         char *errbuf, size_t err_len) {
    sp_err err = {0};
    char pixels[65] = "";
    int64_t count = 0;
    sp_status st = sp_zarr_verify_files(zarr_path, report, report_user,
                                        problems != NULL ? &count : NULL, dataset_hash, &err);
    if (st == SP_OK) {
        st = check_pixels(zarr_path, report, report_user, &count, pixels, &err);
    }
    if (problems != NULL) {
        *problems = st == SP_OK ? count : 0;
    }
    if (dataset_hash != NULL && st != SP_OK) {
        dataset_hash[0] = '\0';
    }
    if (pixel_hash != NULL) {
        memcpy(pixel_hash, st == SP_OK ? pixels : "", st == SP_OK ? 65 : 1);
    }
    sp_err_report(st, &err, errbuf, err_len);
    return st;
}
