/* unit.h — a minimal unit-test harness: CHECK records a failure and carries on; each test binary
 * prints "N passed, N failed" and exits non-zero on any failure. */
#ifndef SP_TESTS_UNIT_H
#define SP_TESTS_UNIT_H

#include <stdio.h>

extern int unit_passed, unit_failed;

#define CHECK(cond)                                                                         \
    do {                                                                                    \
        if (cond) {                                                                         \
            unit_passed++;                                                                  \
        } else {                                                                            \
            unit_failed++;                                                                  \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);        \
        }                                                                                   \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                  \
    do {                                                                                    \
        long long a_ = (long long)(a), b_ = (long long)(b);                                 \
        if (a_ == b_) {                                                                     \
            unit_passed++;                                                                  \
        } else {                                                                            \
            unit_failed++;                                                                  \
            fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%lld != %lld)\n", __FILE__,     \
                    __LINE__, #a, #b, a_, b_);                                              \
        }                                                                                   \
    } while (0)

/* Mark the whole binary skipped, printing why; ctest reports it as skipped (exit code 77). */
void unit_skip(const char *why);

/* Run every test function; defined by each test file. */
void unit_run(void);

/* The shared test data folder named by SP_TESTDATA (ctest sets it to ../shared/testdata beside
 * the repository), or NULL when it is absent, in which case the caller skips with unit_skip. */
const char *unit_testdata(void);

#endif
