/* ome_tiff.c — OME-TIFF: a TIFF whose first ImageDescription is OME-XML (ome_xml.h).
 *
 * The first Image of the OME-XML (series 0) is the slide. Its plane Z=0 C=0 T=0, found through
 * TiffData and DimensionOrder, is level 0: a page with 3 or 4 samples per pixel is shown as RGB
 * (brightfield), any other page as grey (the first plane of a multi-channel or multi-plane
 * image, as recorded in "ome.PlaneShown"). The reduced resolutions are that page's SubIFDs, as
 * bfconvert and tifffile write pyramidal OME-TIFF. Later Images whose Name contains "macro" or
 * "label" become those associated images. Only single-file OME-TIFF is read: planes that
 * TiffData places in another file are refused with SP_E_UNSUPPORTED. The physical pixel size
 * gives the MPP, and the NominalMagnification of the Objective the Image's ObjectiveSettings
 * names gives the objective power.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "formats/ome_xml.h"
#include "formats/tiff_slide.h"

#define OME_NAMESPACE "http://www.openmicroscopy.org/Schemas/OME/"

/* As tifffile decides: XML (a declaration or a root element first) naming the OME namespace,
 * with an OME root element. The full parse happens in open. */
static bool ome_detect(const sp_probe *p) {
    if (p->tiff == NULL || p->tiff->n_dirs == 0) {
        return false;
    }
    const char *d = p->tiff->dirs[0].description;
    if (d == NULL) {
        return false;
    }
    if ((unsigned char)d[0] == 0xEF && (unsigned char)d[1] == 0xBB && (unsigned char)d[2] == 0xBF) {
        d += 3;
    }
    while (*d == ' ' || *d == '\t' || *d == '\r' || *d == '\n') {
        d++;
    }
    if (d[0] != '<') {
        return false;
    }
    return strstr(d, OME_NAMESPACE) != NULL &&
           (strstr(d, "<OME") != NULL || strstr(d, ":OME") != NULL);
}

static bool contains_word(const char *name, const char *word) {
    size_t n = strlen(word);
    for (const char *c = name; *c; c++) {
        if (strncasecmp(c, word, n) == 0) {
            return true;
        }
    }
    return false;
}

static const char *base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* The main-chain directory holding plane (z, c, t) of image `i` (plane[0..2]; NULL for plane
 * 0). Images without TiffData are taken to follow one another in the chain, so their planes
 * start after those of earlier images. */
static sp_status plane_dir(const sp_tiff *t, const sp_ome *ome, uint32_t i, const int64_t *plane,
                           const sp_tiff_dir **dir, sp_err *err) {
    uint64_t z = plane ? (uint64_t)plane[0] : 0, c = plane ? (uint64_t)plane[1] : 0;
    uint64_t tp = plane ? (uint64_t)plane[2] : 0;
    uint64_t base = 0;
    for (uint32_t k = 0; k < i; k++) {
        uint64_t planes = sp_ome_image_planes(&ome->images[k]);
        if (!sp_add_u64(base, planes, &base)) {
            return sp_err_set(err, SP_E_CORRUPT, "OME-XML plane count overflows");
        }
    }
    uint64_t ifd;
    const sp_ome_tiffdata *td;
    sp_status st = sp_ome_plane_ifd(&ome->images[i], z, c, tp, base, &ifd, &td, err);
    if (st != SP_OK) {
        return st;
    }
    if (ifd >= t->n_dirs) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "OME-XML Image %u plane Z=%llu C=%llu T=%llu is in IFD %llu, "
                          "but the file has %u",
                          i, (unsigned long long)z, (unsigned long long)c,
                          (unsigned long long)tp, (unsigned long long)ifd, t->n_dirs);
    }
    *dir = &t->dirs[ifd];
    return SP_OK;
}

static sp_status add_levels(sp_slide *s, const sp_tiff_dir *base, sp_err *err) {
    sp_status st = sp_tiff_slide_add_level(s, base, err);
    for (uint32_t i = 0; st == SP_OK && i < base->n_subifds; i++) {
        const sp_tiff_dir *d = &base->subifds[i];
        /* Only reductions of the base: a SubIFD as large or larger is not a pyramid level. */
        if (d->width == 0 || d->height == 0 || d->width > base->width || d->height > base->height ||
            (d->width == base->width && d->height == base->height)) {
            continue;
        }
        st = sp_tiff_slide_add_level(s, d, err);
    }
    return st;
}

static sp_status add_associated(sp_slide *s, const sp_ome *ome, const char *file_name,
                                sp_err *err) {
    sp_status st = SP_OK;
    for (uint32_t i = 1; st == SP_OK && i < ome->n_images; i++) {
        const sp_ome_image *im = &ome->images[i];
        if (im->name == NULL || !im->has_pixels) {
            continue;
        }
        const char *kind = contains_word(im->name, "macro")   ? "macro"
                           : contains_word(im->name, "label") ? "label"
                                                              : NULL;
        if (kind == NULL) {
            continue;
        }
        sp_err ignored = {0};
        const sp_tiff_dir *d = NULL;
        /* An associated image that cannot be found in this file is left out, as OpenSlide
         * leaves out undecodable ones; only the slide itself must be readable. */
        if (sp_ome_check_single_file(ome, im, file_name, &ignored) != SP_OK ||
            plane_dir(s->container, ome, i, NULL, &d, &ignored) != SP_OK) {
            continue;
        }
        st = sp_tiff_slide_add_associated(s, kind, d, err);
    }
    return st;
}

static sp_status set_uint(sp_slide *s, const char *key, uint64_t v, sp_err *err) {
    char buf[32];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
    return sp_props_set(&s->props, key, buf, err);
}

static sp_status set_double(sp_slide *s, const char *key, double v, sp_err *err) {
    char buf[64];
    sp_format_double(v, buf, sizeof buf);
    return sp_props_set(&s->props, key, buf, err);
}

/* Channels listed as properties; more are counted in ome.SizeC but not named one by one. */
#define MAX_CHANNEL_PROPERTIES 1024

static sp_status add_properties(sp_slide *s, const sp_ome *ome, const sp_tiff_dir *base,
                                sp_err *err) {
    const sp_ome_image *im = &ome->images[0];
    sp_status st = set_uint(s, "ome.ImageCount", ome->n_images, err);
    if (st == SP_OK) {
        st = set_uint(s, "ome.SizeX", im->size_x, err);
    }
    if (st == SP_OK) {
        st = set_uint(s, "ome.SizeY", im->size_y, err);
    }
    if (st == SP_OK) {
        st = set_uint(s, "ome.SizeZ", im->size_z, err);
    }
    if (st == SP_OK) {
        st = set_uint(s, "ome.SizeC", im->size_c, err);
    }
    if (st == SP_OK) {
        st = set_uint(s, "ome.SizeT", im->size_time, err);
    }
    if (st == SP_OK) {
        st = sp_props_set(&s->props, "ome.DimensionOrder", im->dimension_order, err);
    }
    if (st == SP_OK && im->type != NULL) {
        st = sp_props_set(&s->props, "ome.Type", im->type, err);
    }
    if (st == SP_OK && im->name != NULL) {
        st = sp_props_set(&s->props, "ome.Name", im->name, err);
    }
    if (st == SP_OK) {
        st = sp_props_set(&s->props, "ome.Interleaved", im->interleaved ? "true" : "false", err);
    }
    for (uint32_t i = 0; st == SP_OK && i < im->n_channels && i < MAX_CHANNEL_PROPERTIES; i++) {
        const sp_ome_channel *c = &im->channels[i];
        char key[64];
        if (c->name != NULL) {
            snprintf(key, sizeof key, "ome.Channel[%u].Name", i);
            st = sp_props_set(&s->props, key, c->name, err);
        }
        if (st == SP_OK) {
            snprintf(key, sizeof key, "ome.Channel[%u].SamplesPerPixel", i);
            st = set_uint(s, key, c->samples_per_pixel ? c->samples_per_pixel : 1, err);
        }
        if (st == SP_OK && c->has_color) {
            char value[16];
            snprintf(key, sizeof key, "ome.Channel[%u].Color", i);
            snprintf(value, sizeof value, "%d", (int)c->color);
            st = sp_props_set(&s->props, key, value, err);
        }
    }
    /* An RGB page holds all the colour channels of its plane. */
    bool rgb = base->samples_per_pixel >= 3;
    uint64_t planes = sp_ome_image_planes(im);
    uint64_t shown_together = rgb ? sp_ome_image_channel_planes(im) : 1;
    if (st == SP_OK && planes > shown_together) {
        char shown[96];
        snprintf(shown, sizeof shown, "Z=%lld C=%lld T=%lld", (long long)s->plane[0],
                 (long long)s->plane[1], (long long)s->plane[2]);
        st = sp_props_set(&s->props, "ome.PlaneShown", shown, err);
    }
    if (st == SP_OK && im->physical_size_x > 0) {
        st = set_double(s, "ome.PhysicalSizeX", im->physical_size_x, err);
    }
    if (st == SP_OK && im->physical_size_y > 0) {
        st = set_double(s, "ome.PhysicalSizeY", im->physical_size_y, err);
    }
    if (st == SP_OK && im->physical_size_x > 0 && im->physical_size_y > 0) {
        st = set_double(s, SP_PROPERTY_MPP_X, im->physical_size_x, err);
        if (st == SP_OK) {
            st = set_double(s, SP_PROPERTY_MPP_Y, im->physical_size_y, err);
        }
    }
    if (st == SP_OK && im->nominal_magnification > 0) {
        st = set_double(s, "ome.NominalMagnification", im->nominal_magnification, err);
        if (st == SP_OK) {
            st = set_double(s, SP_PROPERTY_OBJECTIVE_POWER, im->nominal_magnification, err);
        }
    }
    return st;
}

static sp_status ome_open(sp_slide *s, sp_probe *p, sp_err *err) {
    sp_tiff_slide_adopt(s, p);
    const sp_tiff *t = s->container;
    const char *xml = t->dirs[0].description;
    const char *file_name = base_name(p->path);
    sp_ome *ome = NULL;
    const sp_tiff_dir *base = NULL;
    sp_status st = sp_ome_parse(xml, strlen(xml), &s->limits, &ome, err);
    if (st == SP_OK && ome->binary_only) {
        st = sp_err_set(err, SP_E_UNSUPPORTED,
                        "multi-file OME-TIFF: the metadata is in a "
                        "companion file (BinaryOnly); only single-file OME-TIFF is read");
    }
    if (st == SP_OK && ome->n_images == 0) {
        st = sp_err_set(err, SP_E_CORRUPT, "OME-XML without an Image");
    }
    if (st == SP_OK && !ome->images[0].has_pixels) {
        st = sp_err_set(err, SP_E_CORRUPT, "OME-XML Image 0 without Pixels");
    }
    if (st == SP_OK) {
        st = sp_ome_check_single_file(ome, &ome->images[0], file_name, err);
    }
    if (st == SP_OK) {
        /* The planes a caller may ask for (sp_options_set_plane); the slide layer refuses one
         * beyond these after open, so only a plane within them is looked up here. */
        const sp_ome_image *im0 = &ome->images[0];
        bool rgb = t->dirs[0].samples_per_pixel >= 3;
        s->plane_count[0] = im0->size_z > 0 ? im0->size_z : 1;
        s->plane_count[1] = rgb ? 1 : sp_ome_image_channel_planes(im0);
        s->plane_count[1] = s->plane_count[1] > 0 ? s->plane_count[1] : 1;
        s->plane_count[2] = im0->size_time > 0 ? im0->size_time : 1;
        bool within = true;
        for (int i = 0; i < 3; i++) {
            within = within && s->plane[i] < s->plane_count[i];
        }
        st = within ? plane_dir(t, ome, 0, s->plane, &base, err) : SP_OK;
        if (!within) {
            sp_ome_free(ome);
            return SP_OK; /* no levels: the slide layer reports the plane */
        }
    }
    if (st == SP_OK &&
        (base->width != ome->images[0].size_x || base->height != ome->images[0].size_y)) {
        st = sp_err_set(err, SP_E_CORRUPT,
                        "OME-XML says %ux%u pixels, but the TIFF page of plane "
                        "Z=%lld C=%lld T=%lld is %llux%llu",
                        ome->images[0].size_x, ome->images[0].size_y, (long long)s->plane[0],
                        (long long)s->plane[1], (long long)s->plane[2],
                        (unsigned long long)base->width, (unsigned long long)base->height);
    }
    if (st == SP_OK) {
        st = add_levels(s, base, err);
    }
    if (st == SP_OK) {
        st = add_associated(s, ome, file_name, err);
    }
    if (st == SP_OK) {
        st = sp_tiff_slide_add_properties(s, &t->dirs[0], false, err);
    }
    if (st == SP_OK) {
        st = add_properties(s, ome, base, err);
    }
    sp_ome_free(ome);
    return st;
}

const sp_format sp_format_ome_tiff = {"ome-tiff", ome_detect, ome_open};
