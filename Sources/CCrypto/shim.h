// OpenSSL's libcrypto, for digests and HMAC (FileDigests.swift, SHA256.swift).
// libcurl4-openssl-dev already brings it (libssl-dev), so it adds no dependency to build.
#include <openssl/evp.h>
#include <openssl/hmac.h>
