#include <sqlite3.h>

// SQLITE_TRANSIENT is a macro around a function-pointer cast that Swift cannot
// import; expose it as a constant so bindings can ask SQLite to copy the bytes.
static inline sqlite3_destructor_type csqlite_transient(void) {
    return SQLITE_TRANSIENT;
}

// sqlite3_db_config is variadic, which Swift cannot call: one wrapper per option used.
static inline int csqlite_set_no_checkpoint_on_close(sqlite3 *db, int on) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, on, (int *)0);
}

static inline int csqlite_set_triggers_enabled(sqlite3 *db, int on) {
    int result = -1;
    sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_TRIGGER, on, &result);
    return result;
}
