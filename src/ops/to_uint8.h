/* to_uint8.h — float results stored as uint8 (process's SP_PROCESS_DTYPE_UINT8): each value
 * rounded half up and clipped to 0..255, so v becomes min(max(floor(v + 0.5), 0), 255) computed
 * in float (NaN becomes 0). numpy gives the same bytes with
 * np.clip(np.floor(a + np.float32(0.5)), 0, 255).astype(np.uint8) on a float32 array.
 */
#ifndef SP_OPS_TO_UINT8_H
#define SP_OPS_TO_UINT8_H

#include <stddef.h>
#include <stdint.h>

void sp_float_to_uint8(const float *restrict src, uint8_t *restrict dst, size_t n);

#endif
