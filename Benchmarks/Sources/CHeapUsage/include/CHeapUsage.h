#ifndef C_HEAP_USAGE_H
#define C_HEAP_USAGE_H

#include <stddef.h>

/// Bytes the C allocator has handed out and not taken back (glibc's
/// `mallinfo2`: all arenas, mapped chunks included); 0 where it is missing.
/// Swift's Glibc module does not import <malloc.h>, hence this target.
size_t heap_bytes_in_use(void);

#endif
