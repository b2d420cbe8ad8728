// OpenSSL 3 headers plus static inline wrappers for function-like macros,
// which Swift does not import.
#ifndef FORMWALL_COPENSSL_SHIM_H
#define FORMWALL_COPENSSL_SHIM_H

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>

static inline int cossl_ctx_set_min_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}

static inline long cossl_ctx_set_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_mode(ctx, mode);
}

static inline int cossl_tls1_2_version(void) { return TLS1_2_VERSION; }

#endif
