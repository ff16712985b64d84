#include <sqlite3.h>

// SQLITE_TRANSIENT is a macro around a function-pointer cast that Swift cannot
// import; expose it as a constant so bindings can ask SQLite to copy the bytes.
static inline sqlite3_destructor_type csqlite_transient(void) {
    return SQLITE_TRANSIENT;
}
