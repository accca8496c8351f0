/* slidepipe_mpi.c — `mpirun -n N slidepipe-mpi spectrum --list FILE --json OUT [options]`: the
 * spectral statistics of many slides spread over MPI ranks (docs/spectrum.md).
 *
 * Rank 0 reads the list and hands out slide indices one at a time: a rank asks for the next
 * slide when it has finished one, so a slow slide holds up only its own rank. Rank 0 also works
 * (a computing thread takes indices from the same counter while the main thread answers the
 * other ranks; only the main thread calls MPI), so `-n 1` is the single-process command.
 * Results travel back as plain records, rank 0 keeps them in list order and merges them there,
 * so the JSON equals `slidepipe spectrum`'s for the same slides, timings aside. Options, the
 * JSON writer and the plot are the slidepipe command's own (cli/spectrum_run.c).
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
#include "mpi_device.h"
#include "spectrum_run.h"

enum { TAG_RESULT = 1, TAG_WORK = 2 };

/* What a worker sends: the result of slide `index`, or index -1 for its first request. */
typedef struct result_msg {
    int64_t index;
    spectrum_result result;
} result_msg;

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
    const spectrum_args *args;
    const sp_spectrum_options *options;
    spectrum_result *results;
} rank0_worker;

static void *rank0_compute(void *arg) {
    rank0_worker *w = arg;
    for (int64_t i; (i = dispense(w->d)) >= 0;) {
        spectrum_run_slide(w->args->slides[i], w->options, i, w->args->n_slides, false,
                           &w->results[i]);
        spectrum_report_slide(w->args, w->args->slides[i], &w->results[i]);
    }
    return NULL;
}

/* Rank 0 with other ranks: serve their requests while the computing thread works. */
static void coordinate(int size, const spectrum_args *a, const sp_spectrum_options *options,
                       spectrum_result *results) {
    dispenser d = {PTHREAD_MUTEX_INITIALIZER, 0, a->n_slides};
    rank0_worker w = {&d, a, options, results};
    pthread_t thread;
    bool started = pthread_create(&thread, NULL, rank0_compute, &w) == 0;
    result_msg *msg = malloc(sizeof *msg);
    if (msg == NULL) {
        cli_fail("out of memory");
        MPI_Abort(MPI_COMM_WORLD, CLI_RUNTIME_ERROR); /* the other ranks wait for answers */
    }
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
        MPI_Recv(msg, (int)sizeof *msg, MPI_BYTE, status.MPI_SOURCE, TAG_RESULT, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        if (msg->index >= 0 && msg->index < a->n_slides) {
            results[msg->index] = msg->result;
            spectrum_report_slide(a, a->slides[msg->index], &msg->result);
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

static void work(const spectrum_args *a, const sp_spectrum_options *options) {
    result_msg *msg = calloc(1, sizeof *msg);
    if (msg == NULL) {
        MPI_Abort(MPI_COMM_WORLD, CLI_RUNTIME_ERROR);
        return;
    }
    msg->index = -1;
    for (;;) {
        MPI_Send(msg, (int)sizeof *msg, MPI_BYTE, 0, TAG_RESULT, MPI_COMM_WORLD);
        int64_t next;
        MPI_Recv(&next, 1, MPI_INT64_T, 0, TAG_WORK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (next < 0 || next >= a->n_slides) {
            break;
        }
        msg->index = next;
        spectrum_run_slide(a->slides[next], options, next, a->n_slides, false, &msg->result);
    }
    free(msg);
}

/* Rank 0's list to every rank: the count, then the paths NUL-separated. */
static bool share_list(int rank, spectrum_args *a) {
    int64_t head[2] = {a->n_slides, 0};
    char *buf = NULL;
    if (rank == 0) {
        for (int64_t i = 0; i < a->n_slides; i++) {
            head[1] += (int64_t)strlen(a->slides[i]) + 1;
        }
        buf = malloc((size_t)head[1]);
        if (buf == NULL) {
            MPI_Abort(MPI_COMM_WORLD, CLI_RUNTIME_ERROR);
        }
        char *p = buf;
        for (int64_t i = 0; i < a->n_slides; i++) {
            size_t n = strlen(a->slides[i]) + 1;
            memcpy(p, a->slides[i], n);
            p += n;
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
        buf = malloc((size_t)head[1] + 1);
        a->slides = calloc((size_t)head[0] + 1, sizeof *a->slides);
        if (buf == NULL || a->slides == NULL) {
            MPI_Abort(MPI_COMM_WORLD, CLI_RUNTIME_ERROR);
        }
    }
    MPI_Bcast(buf, (int)head[1], MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank != 0) {
        char *p = buf;
        for (int64_t i = 0; i < head[0]; i++) {
            a->slides[i] = strdup(p);
            if (a->slides[i] == NULL) {
                MPI_Abort(MPI_COMM_WORLD, CLI_RUNTIME_ERROR);
            }
            a->n_slides = i + 1;
            p += strlen(p) + 1;
        }
    }
    free(buf);
    return true;
}

static const char USAGE[] = "usage: slidepipe-mpi spectrum SLIDE... | --list FILE [--level L] "
                            "[--patch P] [--block B] [--json OUT|-] [--plot OUT.png] "
                            "[--threads T]\n";

/* Everything after MPI_Init; returns the exit code, the same on every rank. */
static int run(int rank, int size, int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "spectrum") != 0) {
        if (rank == 0) {
            if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
                fputs(USAGE, stdout);
                return CLI_OK;
            }
            fprintf(stderr, "slidepipe: %s\n%s",
                    argc < 2 ? "no command given" : "the only command is 'spectrum'", USAGE);
        }
        return argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
                   ? CLI_OK
                   : CLI_USAGE_ERROR;
    }
    /* Every rank parses the same arguments; only rank 0 may print about them. */
    int saved_out = -1, saved_err = -1;
    if (rank != 0) {
        fflush(stdout);
        fflush(stderr);
        int null = open("/dev/null", O_WRONLY);
        saved_out = dup(1);
        saved_err = dup(2);
        dup2(null, 1);
        dup2(null, 2);
        close(null);
    }
    spectrum_args a;
    int code = spectrum_parse_args(argc - 1, argv + 1, "slidepipe-mpi", &a);
    if (rank != 0) {
        fflush(stdout);
        fflush(stderr);
        dup2(saved_out, 1);
        dup2(saved_err, 2);
        close(saved_out);
        close(saved_err);
    }
    if (code >= 0) {
        spectrum_args_free(&a);
        return code;
    }
    int status = -1; /* rank 0's verdict on the list: -1 = go on */
    if (rank == 0) {
        bool usage;
        if (!spectrum_load_list(&a, "slidepipe-mpi", &usage)) {
            status = usage ? CLI_USAGE_ERROR : CLI_RUNTIME_ERROR;
        }
    } else {
        for (int64_t i = 0; i < a.n_slides; i++) {
            free(a.slides[i]);
        }
        free(a.slides);
        a.slides = NULL;
        a.n_slides = 0;
    }
    MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (status >= 0 || !share_list(rank, &a)) {
        spectrum_args_free(&a);
        return status >= 0 ? status : CLI_RUNTIME_ERROR;
    }
    int local_rank, visible;
    int device = spmpi_pick_device(MPI_COMM_WORLD, &local_rank, &visible);
    if (getenv("SLIDEPIPE_MPI_VERBOSE") != NULL) {
        char host[256] = "";
        gethostname(host, sizeof host - 1);
        fprintf(stderr, "slidepipe-mpi: rank %d of %d on %s, local rank %d, GPU %d of %d\n",
                rank, size, host, local_rank, device, visible);
    }
    sp_spectrum_options *options = spectrum_options(&a);
    if (options == NULL) {
        MPI_Abort(MPI_COMM_WORLD, CLI_RUNTIME_ERROR);
    }
    spectrum_result *results = NULL;
    if (rank == 0) {
        results = calloc((size_t)a.n_slides, sizeof *results);
        if (results == NULL) {
            cli_fail("out of memory");
            MPI_Abort(MPI_COMM_WORLD, CLI_RUNTIME_ERROR);
        }
        if (size == 1) {
            bool tty = isatty(STDERR_FILENO);
            for (int64_t i = 0; i < a.n_slides; i++) {
                spectrum_run_slide(a.slides[i], options, i, a.n_slides, tty, &results[i]);
                spectrum_report_slide(&a, a.slides[i], &results[i]);
            }
        } else {
            coordinate(size, &a, options, results);
        }
        code = spectrum_finish(&a, results);
    } else {
        work(&a, options);
    }
    MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(results);
    sp_spectrum_options_destroy(options);
    spectrum_args_free(&a);
    return code;
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
