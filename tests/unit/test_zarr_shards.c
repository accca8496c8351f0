/* test_zarr_shards.c — the process's table of open shards (src/formats/zarr_shards.c): an entry
 * put is found again by its owner and path only; with more shards than slots, the least recently
 * used one not in use makes room and one in use never does (it is kept apart instead); a thread
 * that loses a race to put the same shard gets the winner's entry; dropping an owner closes its
 * shards. Four threads then borrow and hand over shards of two owners at once, checking that each
 * borrowed entry is the shard asked for; the test also runs under ThreadSanitizer (make test).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/zarr_shards.h"
#include "unit.h"

/* A shard whose source is named after its path, so a borrowed entry tells which shard it is. */
static zarr_shard *put(uint64_t owner, const char *path) {
    static const char bytes[4] = "abc";
    sp_source *src = NULL;
    sp_err err = {0};
    if (sp_source_open_memory(bytes, sizeof bytes, path, &src, &err) != SP_OK) {
        return NULL;
    }
    uint8_t *index = malloc(16);
    return zarr_shards_put(owner, strdup(path), src, index);
}

static bool is(const zarr_shard *s, const char *path) {
    return s != NULL && strcmp(sp_source_name(zarr_shard_source(s)), path) == 0 &&
           zarr_shard_index(s) != NULL;
}

static void single_thread(void) {
    CHECK(zarr_shards_get(1, "a") == NULL);
    zarr_shard *a = put(1, "a");
    CHECK(is(a, "a"));
    zarr_shards_release(a);
    zarr_shard *again = zarr_shards_get(1, "a");
    CHECK(again == a);
    CHECK(zarr_shards_get(2, "a") == NULL); /* another slide's open */
    /* A second put of a shard already there hands back the table's entry. */
    zarr_shard *twice = put(1, "a");
    CHECK(twice == a);
    zarr_shards_release(twice);
    /* Fill the table while "a" stays borrowed: it must survive every eviction. */
    char name[32];
    for (int i = 0; i < 3 * ZARR_OPEN_SHARDS; i++) {
        snprintf(name, sizeof name, "fill-%d", i);
        zarr_shard *s = put(1, name);
        CHECK(is(s, name));
        zarr_shards_release(s);
    }
    CHECK(is(again, "a"));
    zarr_shards_release(again);
    /* The most recent fill shards are still open, the first ones were closed. */
    snprintf(name, sizeof name, "fill-%d", 3 * ZARR_OPEN_SHARDS - 1);
    zarr_shard *recent = zarr_shards_get(1, name);
    CHECK(is(recent, name));
    zarr_shards_release(recent);
    CHECK(zarr_shards_get(1, "fill-0") == NULL);
    /* With every slot in use, a new shard is kept apart and freed on release. */
    zarr_shard *held[ZARR_OPEN_SHARDS];
    for (int i = 0; i < ZARR_OPEN_SHARDS; i++) {
        snprintf(name, sizeof name, "held-%d", i);
        held[i] = put(3, name);
        CHECK(is(held[i], name));
    }
    zarr_shard *apart = put(3, "apart");
    CHECK(is(apart, "apart"));
    zarr_shards_release(apart);
    CHECK(zarr_shards_get(3, "apart") == NULL);
    for (int i = 0; i < ZARR_OPEN_SHARDS; i++) {
        zarr_shards_release(held[i]);
    }
    zarr_shards_drop(3);
    CHECK(zarr_shards_get(3, "held-0") == NULL);
    zarr_shards_drop(1);
    zarr_shards_drop(2);
}

/* CHECK is not thread-safe: a reader counts its mismatches and main checks the count. */
static void *reader(void *arg) {
    unsigned seed = (unsigned)(uintptr_t)arg;
    uintptr_t wrong = 0;
    char name[32];
    for (int i = 0; i < 4000; i++) {
        seed = seed * 1103515245u + 12345u;
        uint64_t owner = 10 + (seed >> 8) % 2;
        snprintf(name, sizeof name, "s-%u", (seed >> 12) % (2 * ZARR_OPEN_SHARDS));
        zarr_shard *s = zarr_shards_get(owner, name);
        if (s == NULL) {
            s = put(owner, name);
        }
        wrong += !is(s, name);
        if (s != NULL) {
            zarr_shards_release(s);
        }
    }
    return (void *)wrong;
}

static void threads(void) {
    pthread_t t[4];
    for (uintptr_t i = 0; i < 4; i++) {
        CHECK(pthread_create(&t[i], NULL, reader, (void *)(i + 1)) == 0);
    }
    for (int i = 0; i < 4; i++) {
        void *wrong = NULL;
        pthread_join(t[i], &wrong);
        CHECK(wrong == NULL);
    }
    zarr_shards_drop(10);
    zarr_shards_drop(11);
}

void unit_run(void) {
    single_thread();
    threads();
}
