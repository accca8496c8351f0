/* least_wait.h — the least of a stream's recent waits (least_wait.c): the quickest first byte
 * among the process's recent HTTP requests, by which http_source.c tells whether sending
 * requests ahead pays on a machine whose cores are all reading.
 *
 * The least, not an average: a thread whose answer has come may still wait for a core, and that
 * wait counts too. On a busy machine (more reading threads than cores) such waits reach several
 * milliseconds from a server next door, where requests sent ahead only add threads competing for
 * the cores; the least of a few dozen is the round trip the network sets. Safe to note and ask
 * from any number of threads at once; an update that races another may be lost, which at worst
 * leaves the least a little high for one window.
 */
#ifndef SP_IO_LEAST_WAIT_H
#define SP_IO_LEAST_WAIT_H

#include <stdatomic.h>
#include <stdint.h>

#define SP_LEAST_WAIT_WINDOW 32 /* the least is over the last 32 to 64 waits noted */

/* Zero-initialised: no wait noted. */
typedef struct sp_least_wait {
    _Atomic uint64_t least[2]; /* two alternating windows: their least wait + 1; 0 none yet */
    _Atomic uint64_t noted;    /* waits noted so far */
} sp_least_wait;

/* Note one wait of `us` microseconds. */
void sp_least_wait_note(sp_least_wait *w, uint64_t us);

/* The least of the recent waits in microseconds; 0 when none has been noted. */
uint64_t sp_least_wait_us(sp_least_wait *w);

#endif
