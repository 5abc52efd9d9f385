/*
 * Runs a command and prints what the benchmark clients print about themselves, for the
 * clients that cannot (the curl CLI, aria2c): wall time, the child's user and system CPU and
 * its peak RSS (wait4's rusage), and its exit status.
 *
 *   runstat [--stdout FILE] -- COMMAND [ARGS...]
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    const char *out = NULL;
    int i = 1;
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "--stdout") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--")) { i++; break; }
        else break;
    }
    if (i >= argc) { fprintf(stderr, "usage: runstat [--stdout FILE] -- COMMAND...\n"); return 2; }
    double start = now();
    pid_t pid = fork();
    if (pid == 0) {
        if (out) {
            int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd < 0 || dup2(fd, 1) < 0) _exit(127);
            close(fd);
        } else {
            dup2(2, 1);  /* keep our stdout for the one JSON line */
        }
        execvp(argv[i], argv + i);
        _exit(127);
    }
    int status = 0;
    struct rusage usage;
    if (wait4(pid, &status, 0, &usage) < 0) return 2;
    double seconds = now() - start;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    printf("{\"cpu_sys\":%.6f,\"cpu_user\":%.6f,\"exit\":%d,\"rss_peak_kib\":%ld,\"seconds\":%.6f}\n",
           usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6, usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6,
           code, usage.ru_maxrss, seconds);
    return 0;
}
