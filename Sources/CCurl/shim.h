// CCurl: libcurl for Swift.
//
// Swift cannot call C variadic functions, so curl_easy_setopt, curl_easy_getinfo and
// curl_multi_setopt are wrapped here, one static inline function per argument type. Three
// more pieces are C for their own reasons: the allocator hint (no compiler may drop it), the
// socket callback (libcurl takes a C function) and the thread's name (prctl is variadic).
// It also brings in <sys/xattr.h>, which Swift's Glibc module leaves out (a `.part` file keeps
// its response's validator in an extended attribute). This header is the only C in CurlQueue.
#ifndef CCURL_SHIM_H
#define CCURL_SHIM_H

#include <curl/curl.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#if defined(__linux__)
#include <sys/prctl.h>
#include <sys/xattr.h>
#endif

static inline CURLcode ccurl_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode ccurl_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode ccurl_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode ccurl_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode ccurl_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}

typedef size_t (*ccurl_data_callback)(char *buffer, size_t size, size_t count, void *userdata);
typedef int (*ccurl_xferinfo_callback)(void *userdata, curl_off_t dltotal, curl_off_t dlnow,
                                        curl_off_t ultotal, curl_off_t ulnow);

static inline CURLcode ccurl_easy_setopt_data_callback(CURL *handle, CURLoption option,
                                                       ccurl_data_callback value) {
    return curl_easy_setopt(handle, option, value);
}

typedef int (*ccurl_seek_callback)(void *userdata, curl_off_t offset, int origin);

static inline CURLcode ccurl_easy_setopt_seek_callback(CURL *handle, ccurl_seek_callback value) {
    return curl_easy_setopt(handle, CURLOPT_SEEKFUNCTION, value);
}

static inline CURLcode ccurl_easy_setopt_xferinfo_callback(CURL *handle, ccurl_xferinfo_callback value) {
    return curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, value);
}

typedef int (*ccurl_prereq_callback)(void *userdata, char *primary_ip, char *local_ip,
                                     int primary_port, int local_port);

static inline CURLcode ccurl_easy_setopt_prereq_callback(CURL *handle, ccurl_prereq_callback value) {
    return curl_easy_setopt(handle, CURLOPT_PREREQFUNCTION, value);
}

static inline CURLcode ccurl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode ccurl_easy_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode ccurl_easy_getinfo_string(CURL *handle, CURLINFO info, char **value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode ccurl_easy_getinfo_socket(CURL *handle, CURLINFO info, curl_socket_t *value) {
    return curl_easy_getinfo(handle, info, value);
}

// Whether a connection's socket has bytes waiting to be read, without taking them (or an end
// of stream, or an error: those are libcurl's to find). An idle HTTP/1 connection has none
// before a request goes out on it: bytes there belong to no response of ours.
static inline int ccurl_socket_has_bytes_waiting(curl_socket_t socket) {
    char byte;
    return recv(socket, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

static inline CURLcode ccurl_easy_getinfo_pointer(CURL *handle, CURLINFO info, void **value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLMcode ccurl_multi_setopt_long(CURLM *handle, CURLMoption option, long value) {
    return curl_multi_setopt(handle, option, value);
}

// CURLMsg keeps its result in a union that Swift imports awkwardly; read it here.
static inline CURLcode ccurl_msg_result(const CURLMsg *message) {
    return message->data.result;
}

// Resumes a transfer paused by its write callback (CURL_WRITEFUNC_PAUSE); CURLPAUSE_CONT is
// a macro expression Swift does not import.
static inline CURLcode ccurl_easy_unpause(CURL *handle) {
    return curl_easy_pause(handle, CURLPAUSE_CONT);
}

// Allocates a block of `size` bytes, touches it and frees it, through pointers the compiler
// must not optimise away (a malloc and free pair with nothing between is otherwise deleted).
//
// With glibc, a block above its mapping threshold (128 KiB at first) is a mapping of its own,
// and freeing such a block raises the mapping threshold to its size and the trim threshold
// (how much free memory may stay at the top of a heap before it goes back to the system) to
// twice that: glibc's own rule for a program that allocates and frees big blocks in turn.
// CurlEngine calls this once, with the largest receive buffer it asks libcurl for; see there.
static inline void ccurl_free_block_of_size(size_t size) {
    char *volatile block = malloc(size);
    if (block) {
        block[0] = 0;
        free(block);
    }
}

// libcurl's CURLOPT_OPENSOCKETFUNCTION: the socket libcurl would make, but close-on-exec, so
// that a process the program starts (fork and exec, Foundation's Process) holds no copy of a
// connection: a copy would let the child read and write it, and keep it open after libcurl
// closed it. libcurl 7.88 makes its sockets without the flag. Atomic where the system has
// SOCK_CLOEXEC; else the flag is set right after. CURL_SOCKET_BAD (-1) on failure, which
// libcurl reports as a connect failure.
static inline curl_socket_t ccurl_open_socket_cloexec(void *clientp, curlsocktype purpose,
                                                      struct curl_sockaddr *address) {
    (void)clientp;
    (void)purpose;
#if defined(SOCK_CLOEXEC)
    return socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
#else
    curl_socket_t descriptor = socket(address->family, address->socktype, address->protocol);
    if (descriptor != CURL_SOCKET_BAD) (void)fcntl(descriptor, F_SETFD, FD_CLOEXEC);
    return descriptor;
#endif
}

static inline CURLcode ccurl_easy_open_sockets_cloexec(CURL *handle) {
    return curl_easy_setopt(handle, CURLOPT_OPENSOCKETFUNCTION, ccurl_open_socket_cloexec);
}

// Names the calling thread as `top -H`, `perf` and debuggers show it (Linux keeps 15 bytes of
// it). prctl is variadic, hence here. Elsewhere, nothing.
static inline void ccurl_name_current_thread(const char *name) {
#if defined(__linux__)
    (void)prctl(PR_SET_NAME, (unsigned long)name, 0UL, 0UL, 0UL);
#else
    (void)name;
#endif
}

#endif
