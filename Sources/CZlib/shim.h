// zlib headers plus static inline wrappers for the init macros,
// which Swift does not import.
#ifndef FORMWALL_CZLIB_SHIM_H
#define FORMWALL_CZLIB_SHIM_H

#include <zlib.h>

static inline int czlib_deflate_init2(z_stream *strm, int level, int windowBits) {
    return deflateInit2(strm, level, Z_DEFLATED, windowBits, 8, Z_DEFAULT_STRATEGY);
}

static inline int czlib_inflate_init2(z_stream *strm, int windowBits) {
    return inflateInit2(strm, windowBits);
}

#endif
