// The stack is built on the object graph engine; users import DataStack alone.
@_exported import ObjectGraph
// The built-in stores (`.sqlite`, `.inMemory`, `SQLiteStore`) and the coordinator's
// store-file operations (metadata, migrate, destroy, replace).
@_exported import DataStackStores
// The SQLite store's options (busy mode, journal mode, pragmas) are the driver's types.
@_exported import DataStackSQLite
// `CodedError` and `ErrorCode`, which every error type of every layer conforms to.
@_exported import DataStackSupport
