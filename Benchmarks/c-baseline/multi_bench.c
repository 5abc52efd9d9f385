/*
 * The limit for any libcurl engine: raw libcurl multi, kept lean.
 *
 * C easy handles are made once, configured once, and re-added with a new URL as each transfer
 * ends; the write callback only counts (or writes to the transfer's file with --out);
 * curl_multi_poll sleeps; PIPEWAIT (for https, where ALPN may choose HTTP/2) and
 * CURLPIPE_MULTIPLEX give HTTP/2 one multiplexed connection. Prints one JSON line like the
 * Swift clients.
 *
 *   multi_bench --url BASE --requests N --concurrency C [--ca FILE] [--buffer BYTES]
 *               [--out DIR] [--expect BYTES] [--same-url]
 *
 * Request i fetches BASE?i=<i>; with --same-url every request fetches BASE itself (as
 * cq-bench --same-url). Build: cc -O2 -o multi_bench multi_bench.c -lcurl
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

struct slot {
    CURL *easy;
    long index;
    curl_off_t bytes;
    int fd;
};

static const char *base_url, *out_dir;
static long expect = -1;
static int same_url = 0;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static long vm_hwm_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0) kib = strtol(line + 6, NULL, 10);
    fclose(f);
    return kib;
}

static size_t on_data(char *data, size_t size, size_t count, void *userdata) {
    struct slot *s = userdata;
    size_t n = size * count;
    s->bytes += n;
    if (s->fd >= 0) {
        size_t done = 0;
        while (done < n) {
            ssize_t w = write(s->fd, data + done, n - done);
            if (w < 0) {
                if (errno == EINTR) continue;
                return 0;
            }
            done += (size_t)w;
        }
    }
    return n;
}

static void begin(struct slot *s, long index) {
    char url[4096];
    if (same_url) snprintf(url, sizeof url, "%s", base_url);
    else snprintf(url, sizeof url, "%s?i=%ld", base_url, index);
    curl_easy_setopt(s->easy, CURLOPT_URL, url);
    s->index = index;
    s->bytes = 0;
    s->fd = -1;
    if (out_dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/body-%ld", out_dir, index);
        s->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    }
}

int main(int argc, char **argv) {
    long requests = 0, concurrency = 1, buffer = 0;
    const char *ca = NULL;
    for (int i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "--same-url")) { same_url = 1; i--; continue; }
        if (i + 1 >= argc) { fprintf(stderr, "missing value for %s\n", argv[i]); return 2; }
        if (!strcmp(argv[i], "--url")) base_url = argv[i + 1];
        else if (!strcmp(argv[i], "--requests")) requests = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--concurrency")) concurrency = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--ca")) ca = argv[i + 1];
        else if (!strcmp(argv[i], "--buffer")) buffer = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--out")) out_dir = argv[i + 1];
        else if (!strcmp(argv[i], "--expect")) expect = atol(argv[i + 1]);
        else { fprintf(stderr, "unknown argument %s\n", argv[i]); return 2; }
    }
    if (!base_url || requests <= 0) { fprintf(stderr, "need --url and --requests\n"); return 2; }
    if (concurrency < 1) concurrency = 1;
    if (concurrency > requests) concurrency = requests;

    double start = now();
    curl_global_init(CURL_GLOBAL_ALL);
    CURLM *multi = curl_multi_init();
    curl_multi_setopt(multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);

    struct slot *slots = calloc((size_t)concurrency, sizeof *slots);
    long next = 0, done = 0, errors = 0;
    curl_off_t total_bytes = 0;
    for (long k = 0; k < concurrency; k++) {
        struct slot *s = &slots[k];
        s->easy = curl_easy_init();
        curl_easy_setopt(s->easy, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(s->easy, CURLOPT_WRITEDATA, s);
        curl_easy_setopt(s->easy, CURLOPT_PRIVATE, s);
        curl_easy_setopt(s->easy, CURLOPT_NOSIGNAL, 1L);
        /* On http:// a waiting transfer gains nothing (no ALPN, no HTTP/2) and may wait for a
         * whole body before it reuses that connection. */
        if (!strncmp(base_url, "https:", 6)) curl_easy_setopt(s->easy, CURLOPT_PIPEWAIT, 1L);
        curl_easy_setopt(s->easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
        if (ca) curl_easy_setopt(s->easy, CURLOPT_CAINFO, ca);
        if (buffer > 0) curl_easy_setopt(s->easy, CURLOPT_BUFFERSIZE, buffer);
        begin(s, next++);
        curl_multi_add_handle(multi, s->easy);
    }

    while (done < requests) {
        int running = 0, queued = 0, readded = 0;
        curl_multi_perform(multi, &running);
        CURLMsg *msg;
        while ((msg = curl_multi_info_read(multi, &queued))) {
            if (msg->msg != CURLMSG_DONE) continue;
            struct slot *s;
            long code = 0;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&s);
            curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &code);
            CURLcode result = msg->data.result;
            if (s->fd >= 0) close(s->fd);
            if (result != CURLE_OK || code != 200 || (expect >= 0 && s->bytes != expect)) {
                if (errors++ < 3)
                    fprintf(stderr, "multi_bench: %s, status %ld, %lld bytes\n", curl_easy_strerror(result), code,
                            (long long)s->bytes);
            }
            total_bytes += s->bytes;
            done++;
            curl_multi_remove_handle(multi, s->easy);
            if (next < requests) {
                begin(s, next++);
                curl_multi_add_handle(multi, s->easy);
                readded = 1;
            }
        }
        if (!readded && done < requests) curl_multi_poll(multi, NULL, 0, 1000, NULL);
    }

    double seconds = now() - start;
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    printf("{\"bytes\":%lld,\"cpu_sys\":%.6f,\"cpu_user\":%.6f,\"errors\":%ld,\"requests\":%ld,"
           "\"rss_peak_kib\":%ld,\"seconds\":%.6f}\n",
           (long long)total_bytes, usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6,
           usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6, errors, requests, vm_hwm_kib(), seconds);
    for (long k = 0; k < concurrency; k++) {
        curl_multi_remove_handle(multi, slots[k].easy);
        curl_easy_cleanup(slots[k].easy);
    }
    curl_multi_cleanup(multi);
    return errors ? 1 : 0;
}
