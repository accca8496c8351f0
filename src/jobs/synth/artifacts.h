/* artifacts.h — painting the QC test artefacts (pen, blur, fold) into level-0 tiles of the
 * synthetic slide (artifacts.c). */
#ifndef SP_JOBS_SYNTH_ARTIFACTS_H
#define SP_JOBS_SYNTH_ARTIFACTS_H

#include <stddef.h>
#include <stdint.h>

#include "slidepipe.h"

/* Paint every artefact of `a` (SP_SYNTH_ARTIFACT_COUNT of them) that meets the tile of level-0
 * pixels [x0, x0 + width) x [y0, y0 + height) held in rgb (rows `stride` bytes apart). `tmp`
 * is scratch of stride * height bytes. The blur region's edges lie on multiples of
 * SP_HE_MAX_TILE, so a tile is blurred whole or not at all. */
void sp_synth_paint_artifacts(const sp_synth_artifact *a, int64_t x0, int64_t y0, int width,
                              int height, uint8_t *rgb, size_t stride, uint8_t *tmp);

#endif
