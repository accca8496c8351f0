/* spectrum_grey.h — the op that turns RGB8 into the grey values the spectral statistics
 * transform (see spectrum_grey.c). Private to the spectrum job: it is not in the op table, so
 * `slidepipe process` does not offer it. */
#ifndef SP_OPS_SPECTRUM_GREY_H
#define SP_OPS_SPECTRUM_GREY_H

#include "ops/op.h"

/* One float32 channel, no halo: (0.299 R + 0.587 G) + 0.114 B with each product rounded to
 * float, exactly the values sp_spectrum_patch computes from the same pixels. */
extern const sp_op sp_op_spectrum_grey;

#endif
