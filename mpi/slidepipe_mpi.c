/* slidepipe_mpi.c — `mpirun -n N slidepipe-mpi spectrum|convert ... [--list FILE]`: a command's
 * slides spread over MPI ranks: the spectral statistics (docs/spectrum.md), or a cohort
 * converted to one OME-Zarr store per slide (docs/zarr.md).
 *
 * Rank 0 reads the list and hands out slide indices one at a time: a rank asks for the next
 * slide when it has finished one, so a slow slide holds up only its own rank. Rank 0 also works
 * (a computing thread takes indices from the same counter while the main thread answers the
 * other ranks; only the main thread calls MPI), so `-n 1` is the single-process command.
 * Results travel back as plain records, rank 0 keeps them in list order and reports and merges
 * them there, so the output equals the slidepipe command's for the same slides, timings aside.
 * Options, reports and output are the slidepipe command's own (cli/spectrum_run.c,
 * cli/convert_run.c); what differs between the two commands is one mpi_job.
 */
#include <fcntl.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "convert_run.h"
#include "mpi_device.h"
#include "slide_list.h"
#include "spectrum_run.h"

/* One command's work: run slide `index` into a result record of `result_size` bytes (any rank),
 * and report a finished one (rank 0, in the order they finish). */
typedef struct mpi_job {
    int64_t count;
    size_t result_size;
    void (*run)(void *ctx, int64_t index, bool show_progress, void *result);
    void (*report)(void *ctx, int64_t index, const void *result);
    void *ctx;
} mpi_job;

enum { TAG_RESULT = 1, TAG_WORK = 2 };

/* What a worker sends: the index of a finished slide (-1 for its first request), then its
 * result record. */
static void *new_message(const mpi_job *job) {
    void *msg = calloc(1, sizeof(int64_t) + job->result_size);
    if (msg == NULL) {
        cli_fail("out of memory");
        MPI_Abort(MPI_COMM_WORLD, CLI_RUNTIME_ERROR); /* the other ranks wait for answers */
    }
    return msg;
}

typedef struct dispenser {
    pthread_mutex_t lock;
    int64_t next, count;
} dispenser;

static int64_t dispense(dispenser *d) {
    pthread_mutex_lock(&d->lock);
    int64_t i = d->next < d->count ? d->next++ : -1;
    pthread_mutex_unlock(&d->lock);
    return i;
}

typedef struct rank0_worker {
    dispenser *d;
    const mpi_job *job;
    char *results; /* count records of result_size bytes */
} rank0_worker;

static void *rank0_compute(void *arg) {
    rank0_worker *w = arg;
    for (int64_t i; (i = dispense(w->d)) >= 0;) {
        void *r = w->results + (size_t)i * w->job->result_size;
        w->job->run(w->job->ctx, i, false, r);
        w->job->report(w->job->ctx, i, r);
    }
    return NULL;
}

/* Rank 0 with other ranks: serve their requests while the computing thread works. */
static void coordinate(int size, const mpi_job *job, char *results) {
    dispenser d = {PTHREAD_MUTEX_INITIALIZER, 0, job->count};
    rank0_worker w = {&d, job, results};
    pthread_t thread;
    bool started = pthread_create(&thread, NULL, rank0_compute, &w) == 0;
    char *msg = new_message(job);
    int bytes = (int)(sizeof(int64_t) + job->result_size);
    int active = size - 1;
    while (active > 0) {
        int flag = 0;
        MPI_Status status;
        MPI_Iprobe(MPI_ANY_SOURCE, TAG_RESULT, MPI_COMM_WORLD, &flag, &status);
        if (!flag) {
            /* Polling with a nap instead of a blocking receive: Open MPI's blocking calls spin
             * on a core that the computing thread wants. */
            nanosleep(&(struct timespec){0, 2000000}, NULL);
            continue;
        }
        MPI_Recv(msg, bytes, MPI_BYTE, status.MPI_SOURCE, TAG_RESULT, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        int64_t index;
        memcpy(&index, msg, sizeof index);
        if (index >= 0 && index < job->count) {
            char *r = results + (size_t)index * job->result_size;
            memcpy(r, msg + sizeof index, job->result_size);
            job->report(job->ctx, index, r);
        }
        int64_t next = dispense(&d);
        MPI_Send(&next, 1, MPI_INT64_T, status.MPI_SOURCE, TAG_WORK, MPI_COMM_WORLD);
        active -= next < 0;
    }
    if (!started) {
        rank0_compute(&w); /* no thread: do the rest here */
    } else {
        pthread_join(thread, NULL);
    }
    free(msg);
}

static void work(const mpi_job *job) {
    char *msg = new_message(job);
    int bytes = (int)(sizeof(int64_t) + job->result_size);
    int64_t index = -1;
    memcpy(msg, &index, sizeof index);
    for (;;) {
        MPI_Send(msg, bytes, MPI_BYTE, 0, TAG_RESULT, MPI_COMM_WORLD);
        int64_t next;
        MPI_Recv(&next, 1, MPI_INT64_T, 0, TAG_WORK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (next < 0 || next >= job->count) {
            break;
        }
        memcpy(msg, &next, sizeof next);
        job->run(job->ctx, next, false, msg + sizeof next);
    }
    free(msg);
}

/* Run every slide of the job: spread over the ranks, or here alone with -n 1. Rank 0 gets the
 * results (count records); the other ranks get NULL. */
static char *run_job(int rank, int size, const mpi_job *job) {
    if (rank != 0) {
        work(job);
        return NULL;
    }
    char *results = calloc((size_t)(job->count > 0 ? job->count : 1), job->result_size);
    if (results == NULL) {
        cli_fail("out of memory");
        MPI_Abort(MPI_COMM_WORLD, CLI_RUNTIME_ERROR);
    }
    if (size == 1) {
        bool tty = isatty(STDERR_FILENO);
        for (int64_t i = 0; i < job->count; i++) {
            void *r = results + (size_t)i * job->result_size;
            job->run(job->ctx, i, tty, r);
            job->report(job->ctx, i, r);
        }
    } else {
        coordinate(size, job, results);
    }
    return results;
}

/* Rank 0's list to every rank: the count, then the paths NUL-separated. */
static bool share_list(int rank, char ***paths, int64_t *n) {
    int64_t head[2] = {*n, 0};
    char *buf = NULL;
    if (rank == 0) {
        for (int64_t i = 0; i < *n; i++) {
            head[1] += (int64_t)strlen((*paths)[i]) + 1;
        }
        buf = malloc((size_t)head[1]);
        if (buf == NULL) {
            MPI_Abort(MPI_COMM_WORLD, CLI_RUNTIME_ERROR);
        }
        char *p = buf;
        for (int64_t i = 0; i < *n; i++) {
            size_t len = strlen((*paths)[i]) + 1;
            memcpy(p, (*paths)[i], len);
            p += len;
        }
    }
    MPI_Bcast(head, 2, MPI_INT64_T, 0, MPI_COMM_WORLD);
    if (head[1] > INT32_MAX) {
        if (rank == 0) {
            cli_fail("the slide list is too long for one broadcast (%lld bytes)",
                     (long long)head[1]);
        }
        free(buf);
        return false;
    }
    if (rank != 0) {
        slide_list_free(paths, n); /* rank 0's list is the list */
        buf = malloc((size_t)head[1] + 1);
        if (buf == NULL) {
            MPI_Abort(MPI_COMM_WORLD, CLI_RUNTIME_ERROR);
        }
    }
    MPI_Bcast(buf, (int)head[1], MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank != 0) {
        char *p = buf;
        for (int64_t i = 0; i < head[0]; i++) {
            if (!slide_list_add(paths, n, p)) {
                MPI_Abort(MPI_COMM_WORLD, CLI_RUNTIME_ERROR);
            }
            p += strlen(p) + 1;
        }
    }
    free(buf);
    return true;
}

static const char USAGE[] =
    "usage: slidepipe-mpi spectrum SLIDE... | --list FILE [--level L] [--patch P] [--block B]\n"
    "                     [--json OUT|-] [--plot OUT.png] [--threads T]\n"
    "       slidepipe-mpi convert SLIDE... | --list FILE --out-dir DIR [convert's options]\n";

/* Every rank parses the same arguments; only rank 0 may print about them: the others write to
 * /dev/null in between. */
typedef struct quiet {
    int out, err;
} quiet;

static quiet quiet_begin(int rank) {
    quiet q = {-1, -1};
    if (rank != 0) {
        fflush(stdout);
        fflush(stderr);
        int null = open("/dev/null", O_WRONLY);
        q.out = dup(1);
        q.err = dup(2);
        dup2(null, 1);
        dup2(null, 2);
        close(null);
    }
    return q;
}

static void quiet_end(quiet q) {
    if (q.out >= 0) {
        fflush(stdout);
        fflush(stderr);
        dup2(q.out, 1);
        dup2(q.err, 2);
        close(q.out);
        close(q.err);
    }
}

/* Rank 0's verdict (-1: go on, else an exit code) to every rank, then rank 0's slide list. */
static int share_verdict(int rank, int status, char ***paths, int64_t *n) {
    MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (status >= 0) {
        return status;
    }
    return share_list(rank, paths, n) ? -1 : CLI_RUNTIME_ERROR;
}

static void note_rank(int rank, int size) {
    int local_rank, visible;
    int device = spmpi_pick_device(MPI_COMM_WORLD, &local_rank, &visible);
    if (getenv("SLIDEPIPE_MPI_VERBOSE") != NULL) {
        char host[256] = "";
        gethostname(host, sizeof host - 1);
        fprintf(stderr, "slidepipe-mpi: rank %d of %d on %s, local rank %d, GPU %d of %d\n",
                rank, size, host, local_rank, device, visible);
    }
}

/* ---- spectrum ---- */

typedef struct spectrum_job {
    const spectrum_args *a;
    const sp_spectrum_options *options;
} spectrum_job;

static void spectrum_job_run(void *ctx, int64_t i, bool show_progress, void *result) {
    const spectrum_job *j = ctx;
    spectrum_run_slide(j->a->slides[i], j->options, i, j->a->n_slides, show_progress, result);
}

static void spectrum_job_report(void *ctx, int64_t i, const void *result) {
    const spectrum_job *j = ctx;
    spectrum_report_slide(j->a, j->a->slides[i], result);
}

static int run_spectrum(int rank, int size, int argc, char **argv) {
    spectrum_args a;
    quiet q = quiet_begin(rank);
    int code = spectrum_parse_args(argc, argv, "slidepipe-mpi", &a);
    quiet_end(q);
    if (code >= 0) {
        spectrum_args_free(&a);
        return code;
    }
    int status = -1;
    bool usage;
    if (rank == 0 && !spectrum_load_list(&a, "slidepipe-mpi", &usage)) {
        status = usage ? CLI_USAGE_ERROR : CLI_RUNTIME_ERROR;
    }
    code = share_verdict(rank, status, &a.slides, &a.n_slides);
    if (code >= 0) {
        spectrum_args_free(&a);
        return code;
    }
    note_rank(rank, size);
    sp_spectrum_options *options = spectrum_options(&a);
    if (options == NULL) {
        MPI_Abort(MPI_COMM_WORLD, CLI_RUNTIME_ERROR);
    }
    spectrum_job ctx = {&a, options};
    mpi_job job = {a.n_slides, sizeof(spectrum_result), spectrum_job_run, spectrum_job_report,
                   &ctx};
    char *results = run_job(rank, size, &job);
    if (rank == 0) {
        code = spectrum_finish(&a, (const spectrum_result *)results);
    }
    MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(results);
    sp_spectrum_options_destroy(options);
    spectrum_args_free(&a);
    return code;
}

/* ---- convert ---- */

typedef struct convert_job {
    const convert_args *a;
    const sp_convert_options *options;
} convert_job;

static void convert_job_run(void *ctx, int64_t i, bool show_progress, void *result) {
    const convert_job *j = ctx;
    convert_run_slide(j->a, j->options, i, show_progress, result);
}

static void convert_job_report(void *ctx, int64_t i, const void *result) {
    const convert_job *j = ctx;
    convert_report_slide(j->a, i, result);
}

static int run_convert(int rank, int size, int argc, char **argv) {
    convert_args a;
    quiet q = quiet_begin(rank);
    int code = convert_parse_args(argc, argv, "slidepipe-mpi", &a);
    quiet_end(q);
    if (code < 0 && !a.cohort) {
        code = rank == 0 ? cli_usage_error(USAGE, "slidepipe-mpi converts a cohort: give "
                                                  "--out-dir (and slides or --list)")
                         : CLI_USAGE_ERROR;
    }
    if (code >= 0) {
        convert_args_free(&a);
        return code;
    }
    int status = -1;
    bool usage;
    if (rank == 0 && !convert_load_list(&a, "slidepipe-mpi", &usage)) {
        status = usage ? CLI_USAGE_ERROR : CLI_RUNTIME_ERROR;
    }
    code = share_verdict(rank, status, &a.slides, &a.n_slides);
    if (code < 0 && rank != 0) {
        /* Name the stores from the shared list, as rank 0 did (it checked them already). */
        a.list_path = NULL;
        q = quiet_begin(rank);
        code = convert_load_list(&a, "slidepipe-mpi", &usage) ? -1 : CLI_RUNTIME_ERROR;
        quiet_end(q);
    }
    if (code >= 0) {
        MPI_Abort(MPI_COMM_WORLD, code); /* only when out of memory: the ranks disagree */
    }
    note_rank(rank, size);
    sp_convert_options *options = convert_options(&a);
    if (options == NULL) {
        MPI_Abort(MPI_COMM_WORLD, CLI_RUNTIME_ERROR);
    }
    convert_job ctx = {&a, options};
    mpi_job job = {a.n_slides, sizeof(convert_result), convert_job_run, convert_job_report, &ctx};
    char *results = run_job(rank, size, &job);
    if (rank == 0) {
        code = convert_finish(&a, (const convert_result *)results);
    }
    MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(results);
    sp_convert_options_destroy(options);
    convert_args_free(&a);
    return code;
}

/* Everything after MPI_Init; returns the exit code, the same on every rank. */
static int run(int rank, int size, int argc, char **argv) {
    const char *cmd = argc >= 2 ? argv[1] : "";
    if (strcmp(cmd, "spectrum") == 0) {
        return run_spectrum(rank, size, argc - 1, argv + 1);
    }
    if (strcmp(cmd, "convert") == 0) {
        return run_convert(rank, size, argc - 1, argv + 1);
    }
    bool help = strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0;
    if (rank == 0) {
        if (help) {
            fputs(USAGE, stdout);
        } else {
            fprintf(stderr, "slidepipe: %s\n%s",
                    argc < 2 ? "no command given" : "the commands are 'spectrum' and 'convert'",
                    USAGE);
        }
    }
    return help ? CLI_OK : CLI_USAGE_ERROR;
}

int main(int argc, char **argv) {
    cli_tune_allocator();
    int provided = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "slidepipe: MPI_Init_thread failed\n");
        return CLI_RUNTIME_ERROR;
    }
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int code = run(rank, size, argc, argv);
    MPI_Finalize();
    return code;
}
