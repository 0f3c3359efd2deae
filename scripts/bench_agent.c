/* The benchmark's fake agent: starts fast, optionally sleeps, prints one JSON event, and
 * records the CLOCK_REALTIME nanosecond of its exit so the benchmark can measure what
 * happens after it.
 *
 *   bench_agent SLEEP_MS [STAMP_FILE]
 *
 * The stamp is taken after the last write to stdout, immediately before _exit, so "agent
 * exit" below means this moment (the kernel's own exit work is a few microseconds later).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    long ms = argc > 1 ? atol(argv[1]) : 0;
    if (ms > 0) {
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0) {
        }
    }
    static const char line[] = "{\"type\":\"done\"}\n";
    if (write(1, line, sizeof line - 1) < 0) {
        /* stdout closed: nothing to report, exit anyway */
    }
    if (argc > 2) {
        int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        char buf[32];
        int n = snprintf(buf, sizeof buf, "%lld\n", (long long)now.tv_sec * 1000000000LL + now.tv_nsec);
        if (fd >= 0) {
            if (write(fd, buf, (size_t)n) < 0) {
            }
            close(fd);
        }
    }
    _exit(0);
}
