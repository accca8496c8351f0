/* numa.c — NUMA facts from sysfs, without libnuma: /sys/devices/system/node/online ("0-1"),
 * node<N>/cpulist ("0-15,32-47") and /sys/bus/pci/devices/<bus id>/numa_node. Each is a short
 * text file read whole; a missing file is an answer ("one node", "no such node", "unknown"). */
#define _GNU_SOURCE /* pthread_setaffinity_np, CPU_SET */
#include "io/numa.h"

#include <ctype.h>
#include <pthread.h>
#include <sched.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A small sysfs file's text (at most len - 1 bytes); 0, or -1 when it cannot be read. */
static int read_text(const char *path, char *buf, size_t len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n < 0) {
        return -1;
    }
    buf[n] = '\0';
    return 0;
}

/* Call take(user, i) for each i of a list like "0-3,8,10-11"; the count, or -1 when malformed. */
static int each_in_list(const char *s, void (*take)(void *, long), void *user) {
    int count = 0;
    while (*s != '\0' && *s != '\n') {
        char *end;
        long a = strtol(s, &end, 10), b = a;
        if (end == s || a < 0) {
            return -1;
        }
        s = end;
        if (*s == '-') {
            b = strtol(s + 1, &end, 10);
            if (end == s + 1 || b < a || b - a > 65536) {
                return -1;
            }
            s = end;
        }
        for (long i = a; i <= b; i++, count++) {
            take(user, i);
        }
        if (*s == ',') {
            s++;
        }
    }
    return count;
}

static void count_one(void *user, long i) {
    (void)i;
    (*(int *)user)++;
}

static void add_cpu(void *user, long i) {
    if (i < CPU_SETSIZE) {
        CPU_SET((int)i, (cpu_set_t *)user);
    }
}

int sp_numa_nodes(void) {
    char text[256];
    int n = 0;
    if (read_text("/sys/devices/system/node/online", text, sizeof text) != 0 ||
        each_in_list(text, count_one, &n) < 1) {
        return 1;
    }
    return n;
}

int sp_numa_bind_thread(int node) {
    char path[128], text[4096];
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", node);
    if (node < 0 || read_text(path, text, sizeof text) != 0 ||
        each_in_list(text, add_cpu, &cpus) < 1) {
        return -1;
    }
    return pthread_setaffinity_np(pthread_self(), sizeof cpus, &cpus) == 0 ? 0 : -1;
}

int sp_numa_pci_node(const char *bus_id) {
    char id[32], path[160], text[32];
    size_t n = strlen(bus_id);
    if (n == 0 || n >= sizeof id) {
        return -1;
    }
    for (size_t i = 0; i <= n; i++) {
        id[i] = (char)tolower((unsigned char)bus_id[i]);
    }
    snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/numa_node", id);
    if (strchr(id, '/') != NULL || read_text(path, text, sizeof text) != 0) {
        return -1;
    }
    return atoi(text); /* -1 when the platform does not say */
}
