/* zarr_recent.c — the chunk a thread decoded last (see zarr_recent.h), behind a pthread key
 * whose destructor frees it when the thread ends. */
#include "formats/zarr_recent.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct sp_zarr_recent {
    bool valid;
    uint64_t slide_id;
    const void *array;
    int64_t index[SP_ZARR_MAX_DIMS];
    uint8_t *bytes;
    size_t cap;
};

static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static bool key_ok;

static void destroy(void *p) {
    sp_zarr_recent *r = p;
    free(r->bytes);
    free(r);
}

static void make_key(void) {
    key_ok = pthread_key_create(&key, destroy) == 0;
}

sp_zarr_recent *sp_zarr_recent_get(void) {
    pthread_once(&key_once, make_key);
    if (!key_ok) {
        return NULL;
    }
    sp_zarr_recent *r = pthread_getspecific(key);
    if (r == NULL && (r = calloc(1, sizeof *r)) != NULL && pthread_setspecific(key, r) != 0) {
        free(r);
        r = NULL;
    }
    return r;
}

const uint8_t *sp_zarr_recent_find(const sp_zarr_recent *r, uint64_t slide_id, const void *array,
                                   const int64_t *index) {
    bool same = r->valid && r->slide_id == slide_id && r->array == array &&
                memcmp(r->index, index, sizeof r->index) == 0;
    return same ? r->bytes : NULL;
}

uint8_t *sp_zarr_recent_prepare(sp_zarr_recent *r, const sp_limits *limits, size_t bytes,
                                sp_err *err) {
    r->valid = false;
    if (bytes > r->cap) {
        free(r->bytes);
        r->bytes = NULL;
        r->cap = 0;
        if (sp_alloc(limits, bytes, "Zarr chunk", (void **)&r->bytes, err) != SP_OK) {
            return NULL;
        }
        r->cap = bytes;
    }
    return r->bytes;
}

void sp_zarr_recent_keep(sp_zarr_recent *r, uint64_t slide_id, const void *array,
                         const int64_t *index) {
    r->valid = true;
    r->slide_id = slide_id;
    r->array = array;
    memcpy(r->index, index, sizeof r->index);
}
