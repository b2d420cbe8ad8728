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

// ---- TLS module: macros and constants Swift does not import ----------------------------------------------------
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/core_names.h>
#include <openssl/params.h>

static inline int cossl_ctx_set_max_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_max_proto_version(ctx, version);
}
static inline int cossl_tls1_3_version(void) { return TLS1_3_VERSION; }
static inline uint64_t cossl_op_cipher_server_preference(void) { return SSL_OP_CIPHER_SERVER_PREFERENCE; }
static inline uint64_t cossl_op_no_compression(void) { return SSL_OP_NO_COMPRESSION; }
static inline uint64_t cossl_op_no_renegotiation(void) { return SSL_OP_NO_RENEGOTIATION; }
static inline uint64_t cossl_op_no_ticket(void) { return SSL_OP_NO_TICKET; }
static inline long cossl_mode_partial_write_moving_buffer(void) {
    return SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS;
}
static inline unsigned long cossl_xn_flag_rfc2253(void) { return XN_FLAG_RFC2253; }
static inline int cossl_ad_unrecognized_name(void) { return SSL_AD_UNRECOGNIZED_NAME; }

typedef int (*cossl_servername_cb)(SSL *ssl, int *alert, void *arg);
static inline long cossl_ctx_set_servername_callback(SSL_CTX *ctx, cossl_servername_cb cb) {
    return SSL_CTX_set_tlsext_servername_callback(ctx, cb);
}
static inline long cossl_ctx_set_servername_arg(SSL_CTX *ctx, void *arg) {
    return SSL_CTX_set_tlsext_servername_arg(ctx, arg);
}
static inline int cossl_set_tlsext_host_name(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}
static inline int cossl_ctx_set_app_data(SSL_CTX *ctx, void *arg) { return SSL_CTX_set_app_data(ctx, arg); }
static inline void *cossl_ctx_get_app_data(const SSL_CTX *ctx) { return SSL_CTX_get_app_data(ctx); }
static inline long cossl_bio_get_mem_data(BIO *bio, char **data) { return BIO_get_mem_data(bio, data); }

/// Session ticket key callback (OpenSSL 3 EVP form). `enc` 1: fill key_name and iv, return 1. `enc` 0: look up
/// key_name, return 0 (unknown: full handshake), 1 (use), 2 (use and renew the ticket).
typedef int (*cossl_ticket_key_cb)(SSL *ssl, unsigned char *key_name, unsigned char *iv, EVP_CIPHER_CTX *cipher,
                                   EVP_MAC_CTX *mac, int enc);
static inline long cossl_ctx_set_ticket_key_evp_cb(SSL_CTX *ctx, cossl_ticket_key_cb cb) {
    return SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, cb);
}
/// Keys the ticket HMAC with SHA-256 and `key`; 1 on success.
static inline int cossl_ticket_mac_init(EVP_MAC_CTX *mac, const unsigned char *key, size_t length) {
    OSSL_PARAM params[2];
    params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0);
    params[1] = OSSL_PARAM_construct_end();
    return EVP_MAC_CTX_set_params(mac, params) == 1 && EVP_MAC_init(mac, key, length, NULL) == 1 ? 1 : 0;
}
/// AES-256-CBC for the ticket body, as OpenSSL's own default ticket keys use; 1 on success.
static inline int cossl_ticket_cipher_init(EVP_CIPHER_CTX *cipher, const unsigned char *key,
                                           const unsigned char *iv, int enc) {
    return EVP_CipherInit_ex(cipher, EVP_aes_256_cbc(), NULL, key, iv, enc);
}
static inline int cossl_ticket_iv_length(void) { return 16; }

#endif
