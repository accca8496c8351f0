/* tile_cache.c — the process-wide decoded-tile cache (see tile_cache.h and docs/reading.md).
 *
 * This is the library's one piece of process-wide mutable state, by design: tiles are shared by
 * every handle and thread, so the memory bound holds for the process, and it is observable
 * through sp_cache_get_stats. It starts on first use (pthread_once) with the capacity from
 * SLIDEPIPE_CACHE_MB, or 256 MiB, so no init call is needed. Each of SHARDS shards owns a
 * chained hash table, an LRU list, a ghost table and 1/SHARDS of the capacity, all under its own
 * mutex; the shard is chosen by the key's hash, so concurrent readers of different tiles rarely
 * wait on the same lock. Pixels are copied out after the lock is dropped, under a reference.
 */
#include "slide/tile_cache.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define SHARDS 16
#define GHOSTS_PER_SHARD 16 /* recently seen keys per shard: 256 in all, see tile_cache.h */
#define DEFAULT_CAPACITY ((int64_t)256 << 20)

struct sp_cached_tile {
    atomic_int refs; /* holders: readers, plus one while the cache lists it */
    sp_tile_key key;
    uint64_t hash;
    uint64_t bytes;
    sp_cached_tile *chain;             /* next in the hash bucket */
    sp_cached_tile *newer, *older;     /* LRU list, newest at the head */
    bool listed;
    uint8_t pixels[];
};

typedef struct shard {
    pthread_mutex_t lock;
    sp_cached_tile **buckets;
    uint64_t n_buckets; /* a power of two, or 0 before the first insert */
    uint64_t entries;
    sp_cached_tile *newest, *oldest;
    int64_t bytes;
    uint64_t hits, misses, insertions, evictions;
    uint64_t ghosts[GHOSTS_PER_SHARD];
} shard;

typedef struct cache {
    pthread_once_t once;
    atomic_llong capacity; /* bytes, for all shards together */
    atomic_ullong next_slide_id;
    shard shards[SHARDS];
} cache;

static cache the_cache = {.once = PTHREAD_ONCE_INIT};

static void cache_init(void) {
    int64_t capacity = DEFAULT_CAPACITY;
    const char *env = getenv("SLIDEPIPE_CACHE_MB");
    if (env != NULL && *env != '\0') {
        char *end = NULL;
        long long mb = strtoll(env, &end, 10);
        if (end != NULL && *end == '\0' && mb >= 0 && mb <= ((int64_t)1 << 43) >> 20) {
            capacity = (int64_t)mb << 20;
        }
    }
    atomic_store(&the_cache.capacity, capacity);
    atomic_store(&the_cache.next_slide_id, 1);
    for (int i = 0; i < SHARDS; i++) {
        pthread_mutex_init(&the_cache.shards[i].lock, NULL);
    }
}

static cache *get_cache(void) {
    pthread_once(&the_cache.once, cache_init);
    return &the_cache;
}

static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t key_hash(const sp_tile_key *k) {
    uint64_t h = mix64(k->slide);
    h = mix64(h ^ ((uint64_t)(uint32_t)k->level << 32 | k->scale));
    h = mix64(h ^ (uint64_t)k->col);
    return mix64(h ^ (uint64_t)k->row);
}

static bool key_equal(const sp_tile_key *a, const sp_tile_key *b) {
    return a->slide == b->slide && a->level == b->level && a->scale == b->scale &&
           a->col == b->col && a->row == b->row;
}

static shard *shard_of(cache *c, uint64_t hash) { return &c->shards[hash % SHARDS]; }

static int64_t shard_capacity(cache *c) { return atomic_load(&c->capacity) / SHARDS; }

uint8_t *sp_cached_tile_pixels(sp_cached_tile *tile) { return tile->pixels; }

uint64_t sp_tile_cache_new_slide_id(void) {
    return atomic_fetch_add(&get_cache()->next_slide_id, 1);
}

bool sp_tile_cache_enabled(void) { return atomic_load(&get_cache()->capacity) > 0; }

bool sp_tile_cache_admits(int64_t width, int64_t height) {
    return width > 0 && height > 0 && height <= INT64_MAX / 4 / width &&
           sp_tile_cache_admits_bytes((uint64_t)(width * height * 4));
}

bool sp_tile_cache_admits_bytes(uint64_t bytes) {
    int64_t limit = shard_capacity(get_cache());
    return bytes > 0 && limit > 0 && bytes <= (uint64_t)limit;
}

static sp_cached_tile **bucket_of(shard *s, uint64_t hash) {
    return &s->buckets[(hash / SHARDS) & (s->n_buckets - 1)];
}

static void lru_unlink(shard *s, sp_cached_tile *t) {
    if (t->newer) {
        t->newer->older = t->older;
    } else {
        s->newest = t->older;
    }
    if (t->older) {
        t->older->newer = t->newer;
    } else {
        s->oldest = t->newer;
    }
    t->newer = t->older = NULL;
}

static void lru_push(shard *s, sp_cached_tile *t) {
    t->older = s->newest;
    t->newer = NULL;
    if (s->newest) {
        s->newest->newer = t;
    } else {
        s->oldest = t;
    }
    s->newest = t;
}

/* Unlist an entry (lock held); returns it so the caller drops the cache's hold after unlocking. */
static sp_cached_tile *unlist(shard *s, sp_cached_tile *t) {
    sp_cached_tile **p = bucket_of(s, t->hash);
    while (*p != t) {
        p = &(*p)->chain;
    }
    *p = t->chain;
    t->chain = NULL;
    lru_unlink(s, t);
    t->listed = false;
    s->entries--;
    s->bytes -= (int64_t)t->bytes;
    return t;
}

/* Evict from the old end until the shard fits `limit`; the evicted entries are chained through
 * `chain` into *freed, to be released after the lock is dropped. */
static void evict_to(shard *s, int64_t limit, sp_cached_tile **freed) {
    while (s->bytes > limit && s->oldest != NULL) {
        sp_cached_tile *t = unlist(s, s->oldest);
        s->evictions++;
        t->chain = *freed;
        *freed = t;
    }
}

static void release_chain(sp_cached_tile *t) {
    while (t != NULL) {
        sp_cached_tile *next = t->chain;
        sp_tile_cache_release(t);
        t = next;
    }
}

bool sp_tile_cache_holds(const sp_tile_key *key) {
    cache *c = get_cache();
    uint64_t h = key_hash(key);
    shard *s = shard_of(c, h);
    bool found = false;
    pthread_mutex_lock(&s->lock);
    if (s->n_buckets > 0) {
        for (sp_cached_tile *t = *bucket_of(s, h); t != NULL && !found; t = t->chain) {
            found = t->hash == h && key_equal(&t->key, key);
        }
    }
    pthread_mutex_unlock(&s->lock);
    return found;
}

sp_cached_tile *sp_tile_cache_get(const sp_tile_key *key) {
    cache *c = get_cache();
    uint64_t h = key_hash(key);
    shard *s = shard_of(c, h);
    sp_cached_tile *found = NULL;
    pthread_mutex_lock(&s->lock);
    if (s->n_buckets > 0) {
        for (sp_cached_tile *t = *bucket_of(s, h); t != NULL; t = t->chain) {
            if (t->hash == h && key_equal(&t->key, key)) {
                found = t;
                atomic_fetch_add(&t->refs, 1);
                lru_unlink(s, t);
                lru_push(s, t);
                break;
            }
        }
    }
    if (found) {
        s->hits++;
    } else {
        s->misses++;
    }
    pthread_mutex_unlock(&s->lock);
    return found;
}

bool sp_tile_cache_seen(const sp_tile_key *key) {
    cache *c = get_cache();
    uint64_t h = key_hash(key) | 1; /* 0 marks an empty slot */
    shard *s = shard_of(c, h);
    uint64_t *slot = &s->ghosts[(h >> 32) % GHOSTS_PER_SHARD];
    pthread_mutex_lock(&s->lock);
    bool seen = *slot == h;
    *slot = h;
    pthread_mutex_unlock(&s->lock);
    return seen;
}

sp_cached_tile *sp_tile_cache_alloc(int64_t width, int64_t height) {
    uint64_t bytes;
    if (width <= 0 || height <= 0 ||
        __builtin_mul_overflow((uint64_t)width, (uint64_t)height, &bytes) ||
        __builtin_mul_overflow(bytes, 4, &bytes)) {
        return NULL;
    }
    return sp_tile_cache_alloc_bytes(bytes);
}

sp_cached_tile *sp_tile_cache_alloc_bytes(uint64_t bytes) {
    if (bytes == 0 || bytes > SIZE_MAX - sizeof(sp_cached_tile)) {
        return NULL;
    }
    /* Not zeroed: every decode into an entry writes all of its pixels (read_tile, or an area
     * decode that fills what the tile lacks), and zeroing would touch the memory twice. */
    sp_cached_tile *t = malloc(sizeof *t + (size_t)bytes);
    if (t == NULL) {
        return NULL;
    }
    memset(t, 0, sizeof *t);
    atomic_init(&t->refs, 1);
    t->bytes = bytes + sizeof *t;
    return t;
}

/* Double the bucket array when entries outnumber buckets (lock held); false when out of memory,
 * in which case the table keeps working with longer chains. */
static bool grow(shard *s) {
    uint64_t n = s->n_buckets ? s->n_buckets * 2 : 64;
    sp_cached_tile **b = calloc((size_t)n, sizeof *b);
    if (b == NULL) {
        return s->n_buckets > 0;
    }
    sp_cached_tile **old = s->buckets;
    uint64_t old_n = s->n_buckets;
    s->buckets = b;
    s->n_buckets = n;
    for (uint64_t i = 0; i < old_n; i++) {
        for (sp_cached_tile *t = old[i], *next; t != NULL; t = next) {
            next = t->chain;
            sp_cached_tile **p = bucket_of(s, t->hash);
            t->chain = *p;
            *p = t;
        }
    }
    free(old);
    return true;
}

void sp_tile_cache_put(sp_cached_tile *tile, const sp_tile_key *key) {
    cache *c = get_cache();
    uint64_t h = key_hash(key);
    shard *s = shard_of(c, h);
    int64_t limit = shard_capacity(c);
    if (tile == NULL || tile->listed || (int64_t)tile->bytes > limit) {
        return;
    }
    sp_cached_tile *freed = NULL;
    pthread_mutex_lock(&s->lock);
    bool present = false;
    for (sp_cached_tile *t = s->n_buckets ? *bucket_of(s, h) : NULL; t != NULL; t = t->chain) {
        present = present || (t->hash == h && key_equal(&t->key, key));
    }
    if (!present && (s->entries < s->n_buckets || grow(s))) {
        tile->key = *key;
        tile->hash = h;
        evict_to(s, limit - (int64_t)tile->bytes, &freed);
        sp_cached_tile **p = bucket_of(s, h);
        tile->chain = *p;
        *p = tile;
        lru_push(s, tile);
        tile->listed = true;
        atomic_fetch_add(&tile->refs, 1);
        s->entries++;
        s->bytes += (int64_t)tile->bytes;
        s->insertions++;
    }
    pthread_mutex_unlock(&s->lock);
    release_chain(freed);
}

void sp_tile_cache_release(sp_cached_tile *tile) {
    if (tile != NULL && atomic_fetch_sub(&tile->refs, 1) == 1) {
        free(tile);
    }
}

void sp_tile_cache_drop_slide(uint64_t slide) {
    cache *c = get_cache();
    for (int i = 0; i < SHARDS; i++) {
        shard *s = &c->shards[i];
        sp_cached_tile *freed = NULL;
        pthread_mutex_lock(&s->lock);
        for (sp_cached_tile *t = s->oldest, *newer; t != NULL; t = newer) {
            newer = t->newer;
            if (t->key.slide == slide) {
                unlist(s, t);
                t->chain = freed;
                freed = t;
            }
        }
        pthread_mutex_unlock(&s->lock);
        release_chain(freed);
    }
}

sp_status sp_cache_set_capacity(int64_t bytes) {
    if (bytes < 0) {
        return SP_E_INVALID_ARG;
    }
    cache *c = get_cache();
    atomic_store(&c->capacity, bytes);
    for (int i = 0; i < SHARDS; i++) {
        shard *s = &c->shards[i];
        sp_cached_tile *freed = NULL;
        pthread_mutex_lock(&s->lock);
        evict_to(s, bytes / SHARDS, &freed);
        pthread_mutex_unlock(&s->lock);
        release_chain(freed);
    }
    return SP_OK;
}

sp_status sp_cache_get_stats(sp_cache_stats *stats) {
    if (stats == NULL || stats->struct_size < sizeof *stats) {
        return SP_E_INVALID_ARG;
    }
    cache *c = get_cache();
    memset(stats, 0, sizeof *stats);
    stats->struct_size = sizeof *stats;
    stats->capacity_bytes = atomic_load(&c->capacity);
    for (int i = 0; i < SHARDS; i++) {
        shard *s = &c->shards[i];
        pthread_mutex_lock(&s->lock);
        stats->used_bytes += s->bytes;
        stats->entries += (int64_t)s->entries;
        stats->hits += (int64_t)s->hits;
        stats->misses += (int64_t)s->misses;
        stats->insertions += (int64_t)s->insertions;
        stats->evictions += (int64_t)s->evictions;
        pthread_mutex_unlock(&s->lock);
    }
    return SP_OK;
}
