/* fuzz_ome_xml.c — libFuzzer target for the OME-XML parser alone (src/formats/ome_xml.c): the
 * input is the XML text. A parsed document is then walked the way the OME-TIFF format walks it
 * (plane 0 of every Image to an IFD, the single-file check, every plane of small images), so
 * the mapping code sees hostile sizes and TiffData too. The input is copied to an exact-size
 * buffer: the parser is told the length and must never read past it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/ome_xml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sp_limits limits;
    sp_limits_default(&limits);
    limits.value[SP_LIMIT_MAX_METADATA] = 1 << 20;
    char *text = malloc(size ? size : 1);
    if (text == NULL) {
        return 0;
    }
    memcpy(text, data, size);
    sp_ome *ome = NULL;
    sp_err err = {0};
    if (sp_ome_parse(text, size, &limits, &ome, &err) == SP_OK) {
        for (uint32_t i = 0; i < ome->n_images; i++) {
            const sp_ome_image *im = &ome->images[i];
            sp_err e = {0};
            sp_ome_check_single_file(ome, im, "fuzz.ome.tif", &e);
            if (!im->has_pixels) {
                continue;
            }
            uint64_t ifd;
            const sp_ome_tiffdata *td;
            sp_ome_plane_ifd(im, 0, 0, 0, 0, &ifd, &td, &e);
            uint64_t planes = sp_ome_image_planes(im);
            uint32_t cp = sp_ome_image_channel_planes(im);
            if (planes <= 64) {
                for (uint32_t t = 0; t < im->size_time; t++) {
                    for (uint32_t c = 0; c < cp; c++) {
                        for (uint32_t z = 0; z < im->size_z; z++) {
                            sp_ome_plane_ifd(im, z, c, t, UINT64_MAX - 3, &ifd, &td, &e);
                        }
                    }
                }
            }
            /* Out of range on purpose. */
            sp_ome_plane_ifd(im, im->size_z, 0, 0, 0, &ifd, &td, &e);
        }
        sp_ome_free(ome);
    }
    free(text);
    return 0;
}
