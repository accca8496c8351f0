/* spectrum_stats.c — the statistics record of the spectral job and its merge (public API).
 *
 * Counts are integers, so merging them is exact in any order; the sums are doubles, so a merge
 * is a fixed sequence of additions and callers merge in a fixed order (slides in list order)
 * to get the same bits however the work was spread over threads or processes.
 */
#include <math.h>
#include <string.h>

#include "slidepipe.h"

void sp_spectrum_stats_init(sp_spectrum_stats *stats) {
    if (stats != NULL) {
        memset(stats, 0, sizeof *stats);
        stats->size = sizeof *stats;
    }
}

sp_status sp_spectrum_stats_merge(sp_spectrum_stats *into, const sp_spectrum_stats *from) {
    if (into == NULL || from == NULL || into->size != sizeof *into || from->size != sizeof *from) {
        return SP_E_INVALID_ARG;
    }
    into->patches += from->patches;
    into->values += from->values;
    into->below += from->below;
    into->above += from->above;
    for (int i = 0; i < SP_SPECTRUM_BINS; i++) {
        into->histogram[i] += from->histogram[i];
    }
    into->sum += from->sum;
    into->sum_squares += from->sum_squares;
    into->read_seconds += from->read_seconds;
    into->compute_seconds += from->compute_seconds;
    return SP_OK;
}

double sp_spectrum_stats_mean(const sp_spectrum_stats *stats) {
    if (stats == NULL || stats->values <= 0) {
        return NAN;
    }
    return stats->sum / (double)stats->values;
}

double sp_spectrum_stats_std(const sp_spectrum_stats *stats) {
    if (stats == NULL || stats->values <= 0) {
        return NAN;
    }
    double mean = stats->sum / (double)stats->values;
    double var = stats->sum_squares / (double)stats->values - mean * mean;
    /* Cancellation can leave a tiny negative variance when all values are equal. */
    return sqrt(var > 0 ? var : 0);
}
