#include "CFaultVFS.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

// MARK: - Plans

/// A malloc'd copy of `text` (strdup is POSIX, not C11); NULL without memory.
static char *copyString(const char *text) {
    size_t size = strlen(text) + 1;
    char *copy = malloc(size);
    if (copy) memcpy(copy, text, size);
    return copy;
}

_Static_assert(CFaultVFSOperationShmLock + 1 == CFAULTVFS_OPERATION_COUNT, "CFAULTVFS_OPERATION_COUNT counts every operation");

/// One armed fault: `remainingPasses` calls pass, then `remainingFailures`
/// fail (or every call when `unlimited`).
typedef struct Fault {
    int code;
    long long remainingPasses;
    long long remainingFailures;
    int unlimited;
} Fault;

/// The counters and faults of one watched path prefix.
typedef struct Watch {
    struct Watch *next;
    char *prefix;
    size_t prefixLength;
    long long calls[CFAULTVFS_OPERATION_COUNT];
    long long injected;
    Fault faults[CFAULTVFS_OPERATION_COUNT];   // code 0: not armed
} Watch;

// Protected by `watchesLock`.
static Watch *watches = NULL;
static pthread_mutex_t watchesLock = PTHREAD_MUTEX_INITIALIZER;

/// The watch whose prefix is exactly `prefix`. Call with the lock held.
static Watch *findWatch(const char *prefix) {
    for (Watch *watch = watches; watch; watch = watch->next) {
        if (strcmp(watch->prefix, prefix) == 0) return watch;
    }
    return NULL;
}

/// The watch for `prefix`, created (zeroed) if missing; NULL without memory. Call with the lock held.
static Watch *watchCreatingIfNeeded(const char *prefix) {
    Watch *watch = findWatch(prefix);
    if (watch) return watch;
    watch = calloc(1, sizeof(Watch));
    if (!watch) return NULL;
    watch->prefix = copyString(prefix);
    if (!watch->prefix) {
        free(watch);
        return NULL;
    }
    watch->prefixLength = strlen(prefix);
    watch->next = watches;
    watches = watch;
    return watch;
}

/// Counts a call on the file at `path` and returns the code it must fail
/// with, or SQLITE_OK to forward it.
static int checkCall(const char *path, CFaultVFSOperation operation) {
    if (!path) return SQLITE_OK;   // temporary files have no name, so no test owns them
    int code = SQLITE_OK;
    pthread_mutex_lock(&watchesLock);
    for (Watch *watch = watches; watch; watch = watch->next) {
        if (strncmp(path, watch->prefix, watch->prefixLength) != 0) continue;
        watch->calls[operation] += 1;
        Fault *fault = &watch->faults[operation];
        if (fault->code != SQLITE_OK) {
            if (fault->remainingPasses > 0) {
                fault->remainingPasses -= 1;
            } else if (fault->unlimited || fault->remainingFailures > 0) {
                if (!fault->unlimited) fault->remainingFailures -= 1;
                watch->injected += 1;
                code = fault->code;
            }
        }
        break;
    }
    pthread_mutex_unlock(&watchesLock);
    return code;
}

void cfaultvfs_watch(const char *prefix) {
    pthread_mutex_lock(&watchesLock);
    Watch *watch = watchCreatingIfNeeded(prefix);
    if (watch) {
        memset(watch->calls, 0, sizeof(watch->calls));
        memset(watch->faults, 0, sizeof(watch->faults));
        watch->injected = 0;
    }
    pthread_mutex_unlock(&watchesLock);
}

void cfaultvfs_unwatch(const char *prefix) {
    pthread_mutex_lock(&watchesLock);
    for (Watch **link = &watches; *link; link = &(*link)->next) {
        Watch *watch = *link;
        if (strcmp(watch->prefix, prefix) != 0) continue;
        *link = watch->next;
        free(watch->prefix);
        free(watch);
        break;
    }
    pthread_mutex_unlock(&watchesLock);
}

void cfaultvfs_arm(const char *prefix, CFaultVFSOperation operation, int code, long long after, long long count) {
    if ((int)operation < 0 || (int)operation >= CFAULTVFS_OPERATION_COUNT) return;
    pthread_mutex_lock(&watchesLock);
    Watch *watch = watchCreatingIfNeeded(prefix);
    if (watch) {
        Fault fault = { code, after > 0 ? after : 0, count > 0 ? count : 0, count <= 0 };
        watch->faults[operation] = fault;
    }
    pthread_mutex_unlock(&watchesLock);
}

void cfaultvfs_disarm(const char *prefix) {
    pthread_mutex_lock(&watchesLock);
    Watch *watch = findWatch(prefix);
    if (watch) memset(watch->faults, 0, sizeof(watch->faults));
    pthread_mutex_unlock(&watchesLock);
}

long long cfaultvfs_call_count(const char *prefix, CFaultVFSOperation operation) {
    if ((int)operation < 0 || (int)operation >= CFAULTVFS_OPERATION_COUNT) return 0;
    pthread_mutex_lock(&watchesLock);
    Watch *watch = findWatch(prefix);
    long long count = watch ? watch->calls[operation] : 0;
    pthread_mutex_unlock(&watchesLock);
    return count;
}

long long cfaultvfs_injected_count(const char *prefix) {
    pthread_mutex_lock(&watchesLock);
    Watch *watch = findWatch(prefix);
    long long count = watch ? watch->injected : 0;
    pthread_mutex_unlock(&watchesLock);
    return count;
}

// MARK: - Files

/// A file of the wrapper: its path, followed in memory by the wrapped VFS's file.
typedef struct FaultFile {
    sqlite3_file base;
    char *path;            // NULL for temporary files
    sqlite3_file *real;    // points just past this struct
} FaultFile;

static sqlite3_file *realFile(sqlite3_file *file) { return ((FaultFile *)file)->real; }
static const char *filePath(sqlite3_file *file) { return ((FaultFile *)file)->path; }

static int faultClose(sqlite3_file *file) {
    FaultFile *fault = (FaultFile *)file;
    int code = fault->real->pMethods->xClose(fault->real);
    free(fault->path);
    fault->path = NULL;
    return code;
}

static int faultRead(sqlite3_file *file, void *buffer, int amount, sqlite3_int64 offset) {
    int code = checkCall(filePath(file), CFaultVFSOperationRead);
    if (code != SQLITE_OK) return code;
    return realFile(file)->pMethods->xRead(realFile(file), buffer, amount, offset);
}

static int faultWrite(sqlite3_file *file, const void *buffer, int amount, sqlite3_int64 offset) {
    int code = checkCall(filePath(file), CFaultVFSOperationWrite);
    if (code != SQLITE_OK) return code;
    return realFile(file)->pMethods->xWrite(realFile(file), buffer, amount, offset);
}

static int faultTruncate(sqlite3_file *file, sqlite3_int64 size) {
    int code = checkCall(filePath(file), CFaultVFSOperationTruncate);
    if (code != SQLITE_OK) return code;
    return realFile(file)->pMethods->xTruncate(realFile(file), size);
}

static int faultSync(sqlite3_file *file, int flags) {
    int code = checkCall(filePath(file), CFaultVFSOperationSync);
    if (code != SQLITE_OK) return code;
    return realFile(file)->pMethods->xSync(realFile(file), flags);
}

static int faultFileSize(sqlite3_file *file, sqlite3_int64 *size) {
    int code = checkCall(filePath(file), CFaultVFSOperationFileSize);
    if (code != SQLITE_OK) return code;
    return realFile(file)->pMethods->xFileSize(realFile(file), size);
}

static int faultLock(sqlite3_file *file, int level) {
    int code = checkCall(filePath(file), CFaultVFSOperationLock);
    if (code != SQLITE_OK) return code;
    return realFile(file)->pMethods->xLock(realFile(file), level);
}

static int faultUnlock(sqlite3_file *file, int level) {
    return realFile(file)->pMethods->xUnlock(realFile(file), level);
}

static int faultCheckReservedLock(sqlite3_file *file, int *isReserved) {
    int code = checkCall(filePath(file), CFaultVFSOperationCheckReservedLock);
    if (code != SQLITE_OK) {
        *isReserved = 0;
        return code;
    }
    return realFile(file)->pMethods->xCheckReservedLock(realFile(file), isReserved);
}

static int faultFileControl(sqlite3_file *file, int op, void *argument) {
    return realFile(file)->pMethods->xFileControl(realFile(file), op, argument);
}

static int faultSectorSize(sqlite3_file *file) {
    return realFile(file)->pMethods->xSectorSize(realFile(file));
}

static int faultDeviceCharacteristics(sqlite3_file *file) {
    return realFile(file)->pMethods->xDeviceCharacteristics(realFile(file));
}

static int faultShmMap(sqlite3_file *file, int region, int size, int extend, void volatile **pointer) {
    int code = checkCall(filePath(file), CFaultVFSOperationShmMap);
    if (code != SQLITE_OK) {
        *pointer = NULL;
        return code;
    }
    return realFile(file)->pMethods->xShmMap(realFile(file), region, size, extend, pointer);
}

static int faultShmLock(sqlite3_file *file, int offset, int count, int flags) {
    if (flags & SQLITE_SHM_LOCK) {
        int code = checkCall(filePath(file), CFaultVFSOperationShmLock);
        if (code != SQLITE_OK) return code;
    }
    return realFile(file)->pMethods->xShmLock(realFile(file), offset, count, flags);
}

static void faultShmBarrier(sqlite3_file *file) {
    realFile(file)->pMethods->xShmBarrier(realFile(file));
}

static int faultShmUnmap(sqlite3_file *file, int deleteFlag) {
    return realFile(file)->pMethods->xShmUnmap(realFile(file), deleteFlag);
}

static int faultFetch(sqlite3_file *file, sqlite3_int64 offset, int amount, void **pointer) {
    return realFile(file)->pMethods->xFetch(realFile(file), offset, amount, pointer);
}

static int faultUnfetch(sqlite3_file *file, sqlite3_int64 offset, void *pointer) {
    return realFile(file)->pMethods->xUnfetch(realFile(file), offset, pointer);
}

/// The method tables by version: a wrapped file offers exactly the methods of
/// the file it wraps (version 1 has no shared memory, so no WAL).
#define FAULT_IO_METHODS(version) { \
    version, faultClose, faultRead, faultWrite, faultTruncate, faultSync, faultFileSize, \
    faultLock, faultUnlock, faultCheckReservedLock, faultFileControl, faultSectorSize, \
    faultDeviceCharacteristics, faultShmMap, faultShmLock, faultShmBarrier, faultShmUnmap, \
    faultFetch, faultUnfetch }

static const sqlite3_io_methods faultMethods[3] = {
    FAULT_IO_METHODS(1), FAULT_IO_METHODS(2), FAULT_IO_METHODS(3),
};

// MARK: - The VFS

static sqlite3_vfs *wrapped(sqlite3_vfs *vfs) { return (sqlite3_vfs *)vfs->pAppData; }

static int faultOpen(sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags, int *outFlags) {
    FaultFile *fault = (FaultFile *)file;
    fault->base.pMethods = NULL;   // SQLite calls xClose only when this is set
    fault->path = NULL;
    fault->real = (sqlite3_file *)&fault[1];
    int code = checkCall(name, CFaultVFSOperationOpen);
    if (code != SQLITE_OK) return code;
    code = wrapped(vfs)->xOpen(wrapped(vfs), name, fault->real, flags, outFlags);
    if (fault->real->pMethods) {
        if (name) {
            fault->path = copyString(name);
            if (!fault->path) {
                fault->real->pMethods->xClose(fault->real);
                return SQLITE_NOMEM;
            }
        }
        int version = fault->real->pMethods->iVersion;
        if (version < 1) version = 1;
        if (version > 3) version = 3;
        fault->base.pMethods = &faultMethods[version - 1];
    }
    return code;
}

static int faultDelete(sqlite3_vfs *vfs, const char *name, int syncDirectory) {
    return wrapped(vfs)->xDelete(wrapped(vfs), name, syncDirectory);
}

static int faultAccess(sqlite3_vfs *vfs, const char *name, int flags, int *result) {
    return wrapped(vfs)->xAccess(wrapped(vfs), name, flags, result);
}

static int faultFullPathname(sqlite3_vfs *vfs, const char *name, int size, char *output) {
    return wrapped(vfs)->xFullPathname(wrapped(vfs), name, size, output);
}

static void *faultDlOpen(sqlite3_vfs *vfs, const char *name) {
    return wrapped(vfs)->xDlOpen(wrapped(vfs), name);
}

static void faultDlError(sqlite3_vfs *vfs, int size, char *message) {
    wrapped(vfs)->xDlError(wrapped(vfs), size, message);
}

static void (*faultDlSym(sqlite3_vfs *vfs, void *library, const char *symbol))(void) {
    return wrapped(vfs)->xDlSym(wrapped(vfs), library, symbol);
}

static void faultDlClose(sqlite3_vfs *vfs, void *library) {
    wrapped(vfs)->xDlClose(wrapped(vfs), library);
}

static int faultRandomness(sqlite3_vfs *vfs, int size, char *output) {
    return wrapped(vfs)->xRandomness(wrapped(vfs), size, output);
}

static int faultSleep(sqlite3_vfs *vfs, int microseconds) {
    return wrapped(vfs)->xSleep(wrapped(vfs), microseconds);
}

static int faultCurrentTime(sqlite3_vfs *vfs, double *time) {
    return wrapped(vfs)->xCurrentTime(wrapped(vfs), time);
}

static int faultGetLastError(sqlite3_vfs *vfs, int size, char *message) {
    return wrapped(vfs)->xGetLastError(wrapped(vfs), size, message);
}

static int faultCurrentTimeInt64(sqlite3_vfs *vfs, sqlite3_int64 *time) {
    return wrapped(vfs)->xCurrentTimeInt64(wrapped(vfs), time);
}

static int faultSetSystemCall(sqlite3_vfs *vfs, const char *name, sqlite3_syscall_ptr call) {
    return wrapped(vfs)->xSetSystemCall(wrapped(vfs), name, call);
}

static sqlite3_syscall_ptr faultGetSystemCall(sqlite3_vfs *vfs, const char *name) {
    return wrapped(vfs)->xGetSystemCall(wrapped(vfs), name);
}

static const char *faultNextSystemCall(sqlite3_vfs *vfs, const char *name) {
    return wrapped(vfs)->xNextSystemCall(wrapped(vfs), name);
}

static sqlite3_vfs faultVFS;
static int installResult = SQLITE_OK;
static pthread_once_t installOnce = PTHREAD_ONCE_INIT;

static void installWrapper(void) {
    sqlite3_vfs *real = sqlite3_vfs_find(NULL);
    if (!real) {
        installResult = SQLITE_ERROR;
        return;
    }
    sqlite3_vfs vfs = {
        real->iVersion < 3 ? real->iVersion : 3,
        (int)sizeof(FaultFile) + real->szOsFile,
        real->mxPathname,
        NULL,
        "cfaultvfs",
        real,
        faultOpen, faultDelete, faultAccess, faultFullPathname,
        faultDlOpen, faultDlError, faultDlSym, faultDlClose,
        faultRandomness, faultSleep, faultCurrentTime, faultGetLastError,
        faultCurrentTimeInt64,
        faultSetSystemCall, faultGetSystemCall, faultNextSystemCall,
    };
    faultVFS = vfs;
    installResult = sqlite3_vfs_register(&faultVFS, 1);
}

int cfaultvfs_install(void) {
    pthread_once(&installOnce, installWrapper);
    return installResult;
}
