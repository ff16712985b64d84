#include <zlib.h>

// inflateInit2 is a macro around inflateInit2_ that Swift cannot import; this
// wrapper passes the library's version and stream size as the macro does.
static inline int czlib_inflate_init_raw(z_stream *stream) {
    return inflateInit2(stream, -MAX_WBITS);
}
