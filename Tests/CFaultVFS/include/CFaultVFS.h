#ifndef CFAULTVFS_H
#define CFAULTVFS_H

// A fault-injecting SQLite VFS for tests.
//
// It wraps the default VFS ("unix" on Linux) and forwards every call to it,
// except that calls on files whose path starts with a watched prefix are
// counted, and fail with a chosen result code when a fault is armed for them.
// Installed as the default VFS, it is used by every connection opened after
// `cfaultvfs_install()` without naming a VFS, so the code under test needs no
// hook. Files outside every watched prefix (other tests running in parallel)
// pass through untouched.
//
// Every function is thread-safe: plans and counters sit behind one mutex.
//
// The model is SQLite's own I/O error testing: <https://sqlite.org/testing.html#ioerrtesting>.

#include <sqlite3.h>

/// The VFS calls that can be counted and made to fail.
typedef enum __attribute__((enum_extensibility(closed))) CFaultVFSOperation {
    /// `xOpen` of a file (database, `-wal`, `-journal`). A failed open opens nothing.
    CFaultVFSOperationOpen = 0,
    /// `xRead`. A failed read reads nothing.
    CFaultVFSOperationRead,
    /// `xWrite`. A failed write writes nothing.
    CFaultVFSOperationWrite,
    /// `xSync`.
    CFaultVFSOperationSync,
    /// `xTruncate`.
    CFaultVFSOperationTruncate,
    /// `xFileSize`.
    CFaultVFSOperationFileSize,
    /// `xLock` (every call takes or upgrades a lock).
    CFaultVFSOperationLock,
    /// `xCheckReservedLock`; a failure reports no reserved lock.
    CFaultVFSOperationCheckReservedLock,
    /// `xShmMap`, mapping a region of the WAL index.
    CFaultVFSOperationShmMap,
    /// `xShmLock` calls that take a lock (releases are never failed: SQLite ignores their result).
    CFaultVFSOperationShmLock,
} CFaultVFSOperation;

/// How many operations there are (not an operation itself, so Swift sees no such case).
#define CFAULTVFS_OPERATION_COUNT 10

// SQLite's extended result codes are macro expressions that Swift does not
// import; these constants carry them over.
static const int CFAULTVFS_IOERR_READ = SQLITE_IOERR_READ;
static const int CFAULTVFS_IOERR_WRITE = SQLITE_IOERR_WRITE;
static const int CFAULTVFS_IOERR_FSYNC = SQLITE_IOERR_FSYNC;
static const int CFAULTVFS_IOERR_TRUNCATE = SQLITE_IOERR_TRUNCATE;
static const int CFAULTVFS_IOERR_FSTAT = SQLITE_IOERR_FSTAT;
static const int CFAULTVFS_IOERR_LOCK = SQLITE_IOERR_LOCK;
static const int CFAULTVFS_IOERR_CHECKRESERVEDLOCK = SQLITE_IOERR_CHECKRESERVEDLOCK;
static const int CFAULTVFS_IOERR_SHMMAP = SQLITE_IOERR_SHMMAP;
static const int CFAULTVFS_IOERR_SHMLOCK = SQLITE_IOERR_SHMLOCK;

/// Registers the wrapper as the process's default VFS. Idempotent and
/// thread-safe; returns SQLITE_OK or SQLite's error from registration.
int cfaultvfs_install(void);

/// Starts counting calls on files under `prefix`, with every counter at zero.
/// Watching an already watched prefix resets its counters and faults.
void cfaultvfs_watch(const char *prefix);

/// Stops counting and injecting for `prefix` and forgets it.
void cfaultvfs_unwatch(const char *prefix);

/// Arms a fault for `operation` on files under `prefix` (watching it if needed):
/// the next `after` calls pass, then `count` calls fail with `code` (an
/// extended result code such as SQLITE_IOERR_WRITE); `count` 0 fails every
/// call until disarmed. Replaces an earlier fault for the same operation.
void cfaultvfs_arm(const char *prefix, CFaultVFSOperation operation, int code, long long after, long long count);

/// Removes every fault armed for `prefix`; counting goes on.
void cfaultvfs_disarm(const char *prefix);

/// Calls of `operation` on files under `prefix` since it was watched; 0 if not watched.
long long cfaultvfs_call_count(const char *prefix, CFaultVFSOperation operation);

/// Faults injected on files under `prefix` since it was watched; 0 if not watched.
long long cfaultvfs_injected_count(const char *prefix);

#endif
