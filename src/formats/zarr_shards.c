/* zarr_shards.c — the process's table of open shards (zarr_shards.h): linear search under one
 * mutex (it holds at most ZARR_OPEN_SHARDS entries, each lookup far cheaper than the read it
 * saves), a use count per entry so that a shard being read is never closed, and a clock for
 * least-recently-used eviction. Opening and index reads happen outside the lock. */
#include "formats/zarr_shards.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct zarr_shard {
    uint64_t owner;
    char *path; /* NULL: a free slot */
    sp_source *src;
    uint8_t *index;
    int users;
    uint64_t last_use;
    bool apart; /* not in the table: freed on release */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static zarr_shard slots[ZARR_OPEN_SHARDS];
static uint64_t clock_now;

static void close_shard(zarr_shard *s) {
    free(s->path);
    sp_source_close(s->src);
    free(s->index);
    *s = (zarr_shard){0};
}

static zarr_shard *find(uint64_t owner, const char *path) {
    for (size_t i = 0; i < ZARR_OPEN_SHARDS; i++) {
        if (slots[i].path != NULL && slots[i].owner == owner && strcmp(slots[i].path, path) == 0) {
            return &slots[i];
        }
    }
    return NULL;
}

zarr_shard *zarr_shards_get(uint64_t owner, const char *path) {
    pthread_mutex_lock(&lock);
    zarr_shard *s = find(owner, path);
    if (s != NULL) {
        s->users++;
        s->last_use = ++clock_now;
    }
    pthread_mutex_unlock(&lock);
    return s;
}

zarr_shard *zarr_shards_put(uint64_t owner, char *path, sp_source *src, uint8_t *index) {
    zarr_shard offered = {owner, path, src, index, 1, 0, false};
    zarr_shard evicted = {0};
    pthread_mutex_lock(&lock);
    zarr_shard *s = find(owner, path);
    if (s == NULL) {
        /* A free slot, else the least recently used one nobody is reading. */
        for (size_t i = 0; i < ZARR_OPEN_SHARDS; i++) {
            zarr_shard *c = &slots[i];
            if (c->path == NULL) {
                s = c;
                break;
            }
            if (c->users == 0 && (s == NULL || c->last_use < s->last_use)) {
                s = c;
            }
        }
        if (s != NULL) {
            evicted = *s; /* closed after the lock is let go */
            *s = offered;
            offered = (zarr_shard){0}; /* taken over by the slot */
        }
    } else {
        s->users++;
    }
    if (s != NULL) {
        s->last_use = ++clock_now;
    }
    pthread_mutex_unlock(&lock);
    close_shard(&evicted);
    if (s != NULL) {
        close_shard(&offered); /* the other thread's entry won */
        return s;
    }
    zarr_shard *apart = malloc(sizeof *apart);
    if (apart == NULL) {
        close_shard(&offered);
        return NULL;
    }
    *apart = offered;
    apart->apart = true;
    return apart;
}

void zarr_shards_release(zarr_shard *s) {
    if (s->apart) {
        close_shard(s);
        free(s);
        return;
    }
    pthread_mutex_lock(&lock);
    s->users--;
    pthread_mutex_unlock(&lock);
}

void zarr_shards_drop(uint64_t owner) {
    for (;;) {
        zarr_shard gone = {0};
        pthread_mutex_lock(&lock);
        for (size_t i = 0; i < ZARR_OPEN_SHARDS && gone.path == NULL; i++) {
            if (slots[i].path != NULL && slots[i].owner == owner) {
                gone = slots[i];
                slots[i] = (zarr_shard){0};
            }
        }
        pthread_mutex_unlock(&lock);
        if (gone.path == NULL) {
            return;
        }
        close_shard(&gone);
    }
}

sp_source *zarr_shard_source(const zarr_shard *s) {
    return s->src;
}

const uint8_t *zarr_shard_index(const zarr_shard *s) {
    return s->index;
}
