// OpenSSL's libcrypto, for the digests of files as they are written (FileDigests.swift).
// libcurl4-openssl-dev already brings it (libssl-dev), so it adds no dependency to build.
#include <openssl/evp.h>
