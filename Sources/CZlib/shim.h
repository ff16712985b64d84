#include <zlib.h>

// inflateInit2 is a macro around inflateInit2_ that Swift cannot import; this
// wrapper passes the library's version and stream size as the macro does.
static inline int czlib_inflate_init_raw(z_stream *stream) {
    return inflateInit2(stream, -MAX_WBITS);
}

// deflateInit2 is a macro too: raw DEFLATE (no header), as Z_MODELCACHE holds it.
static inline int czlib_deflate_init_raw(z_stream *stream, int level) {
    return deflateInit2(stream, level, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
}
