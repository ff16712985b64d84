import CSQLite

/// An SQL value passed to or returned from a custom SQL function.
///
/// One case per SQLite storage class, so a function sees exactly what SQLite
/// stored: `.blob([])` is an empty blob, distinct from `.null`.
///
/// Related SQLite documentation: <https://sqlite.org/datatype3.html>
package enum SQLiteValue: Sendable, Equatable {
    case null
    case integer(Int64)
    case double(Double)
    case text(String)
    case blob([UInt8])
}

/// An argument of a custom SQL function.
package typealias FunctionArgument = SQLiteValue

/// The result of a custom SQL function.
package typealias FunctionResult = SQLiteValue

// MARK: - SQL Functions

extension Connection {
    /// Makes `function` callable from SQL on this connection as `name(...)`.
    ///
    /// The fetch layer uses it for what SQLite lacks, such as case- and
    /// diacritic-insensitive comparison or regular expressions. The function
    /// runs on the connection's queue, inside whichever statement calls it. An
    /// error it throws makes that statement fail with the error's description.
    ///
    /// ```swift
    /// try connection.registerFunction(name: "fold", argumentCount: 1, deterministic: true) { arguments in
    ///     guard case .text(let text) = arguments[0] else { return .null }
    ///     return .text(text.folding(options: [.caseInsensitive, .diacriticInsensitive], locale: nil))
    /// }
    /// ```
    ///
    /// Registering the same name and argument count again replaces the function.
    ///
    /// - Parameters:
    ///   - name: The SQL name (at most 255 bytes of UTF-8).
    ///   - argumentCount: The number of arguments, or `-1` for any number.
    ///   - deterministic: Whether the same arguments always give the same result,
    ///     which lets SQLite use the function in indexes and factor calls out.
    ///   - function: The implementation; SQLite keeps it until the connection
    ///     closes or the function is replaced.
    /// - Throws: ``SQLiteError`` if SQLite refuses the name or the argument count.
    ///
    /// Related SQLite documentation: <https://sqlite.org/c3ref/create_function.html>
    package func registerFunction(
        name: String,
        argumentCount: Int32,
        deterministic: Bool,
        _ function: @escaping (_ arguments: [FunctionArgument]) throws -> FunctionResult
    ) throws {
        // SQLite owns the box from here on: it calls `destroy` when the function is
        // replaced, when the connection closes, and also if registration fails.
        let box = Unmanaged.passRetained(FunctionBox(function)).toOpaque()
        let flags = SQLITE_UTF8 | (deterministic ? SQLITE_DETERMINISTIC : 0)
        let code = sqlite3_create_function_v2(
            db, name, argumentCount, flags, box,
            { context, count, values in
                let box = Unmanaged<FunctionBox>.fromOpaque(sqlite3_user_data(context)).takeUnretainedValue()
                var arguments: [SQLiteValue] = []
                arguments.reserveCapacity(Int(count))
                for index in 0..<Int(count) {
                    arguments.append(SQLiteValue(values?[index]))
                }
                do {
                    try box.function(arguments).setResult(of: context)
                } catch {
                    sqlite3_result_error(context, String(describing: error), -1)
                }
            },
            nil,
            nil,
            { box in
                guard let box else { return }
                Unmanaged<FunctionBox>.fromOpaque(box).release()
            })
        guard code == SQLITE_OK else {
            var error = SQLiteError(db: db, code: code, sql: nil)
            error.message = "could not register SQL function \(name)/\(argumentCount): \(error.message)"
            throw error
        }
    }
}

/// Holds a function's closure so its address can travel through SQLite's `void *`.
final class FunctionBox {
    let function: ([SQLiteValue]) throws -> SQLiteValue

    init(_ function: @escaping ([SQLiteValue]) throws -> SQLiteValue) {
        self.function = function
    }
}

extension SQLiteValue {
    /// Reads an `sqlite3_value` by its storage class.
    init(_ value: OpaquePointer?) {
        switch sqlite3_value_type(value) {
        case SQLITE_INTEGER:
            self = .integer(sqlite3_value_int64(value))
        case SQLITE_FLOAT:
            self = .double(sqlite3_value_double(value))
        case SQLITE_TEXT:
            let text = sqlite3_value_text(value)
            let count = Int(sqlite3_value_bytes(value))
            self = .text(text.map { String(decoding: UnsafeBufferPointer(start: $0, count: count), as: UTF8.self) } ?? "")
        case SQLITE_BLOB:
            let bytes = sqlite3_value_blob(value)
            let count = Int(sqlite3_value_bytes(value))
            self = .blob(bytes.map { Array(UnsafeRawBufferPointer(start: $0, count: count)) } ?? [])
        default:
            self = .null
        }
    }

    /// Hands this value to SQLite as a function's result (copied: `SQLITE_TRANSIENT`).
    func setResult(of context: OpaquePointer?) {
        switch self {
        case .null:
            sqlite3_result_null(context)
        case .integer(let value):
            sqlite3_result_int64(context, value)
        case .double(let value):
            sqlite3_result_double(context, value)
        case .text(var text):
            text.withUTF8 { buffer in
                guard let base = buffer.baseAddress, !buffer.isEmpty else {
                    sqlite3_result_text64(context, "", 0, csqlite_transient(), UInt8(SQLITE_UTF8))
                    return
                }
                base.withMemoryRebound(to: CChar.self, capacity: buffer.count) {
                    sqlite3_result_text64(context, $0, UInt64(buffer.count), csqlite_transient(), UInt8(SQLITE_UTF8))
                }
            }
        case .blob(let bytes):
            bytes.withUnsafeBytes { buffer in
                if let base = buffer.baseAddress, !buffer.isEmpty {
                    sqlite3_result_blob64(context, base, UInt64(buffer.count), csqlite_transient())
                } else {
                    sqlite3_result_zeroblob(context, 0)
                }
            }
        }
    }
}

// MARK: - Tracing

extension Connection {
    /// Calls `observer` with the SQL of each statement as it starts running, or
    /// stops tracing when `observer` is `nil`.
    ///
    /// Tests record the SQL a feature runs with it. The text is the statement as
    /// prepared, with `?` placeholders: bound values are never passed. Inside a
    /// trigger, SQLite reports a `-- TRIGGER name` comment instead.
    ///
    /// Related SQLite documentation: <https://sqlite.org/c3ref/trace_v2.html>
    package func trace(_ observer: ((String) -> Void)?) {
        guard let observer else {
            sqlite3_trace_v2(db, 0, nil, nil)
            traceBox = nil
            return
        }
        let box = TraceBox(observer)
        // Unretained: `traceBox` keeps it alive, and deinit unregisters it first.
        sqlite3_trace_v2(db, UInt32(SQLITE_TRACE_STMT), { _, context, _, sql in
            guard let context, let sql else { return 0 }
            let box = Unmanaged<TraceBox>.fromOpaque(context).takeUnretainedValue()
            box.observer(String(cString: sql.assumingMemoryBound(to: CChar.self)))
            return 0
        }, Unmanaged.passUnretained(box).toOpaque())
        traceBox = box
    }
}

/// Holds the trace observer so its address can travel through SQLite's `void *`.
final class TraceBox {
    let observer: (String) -> Void

    init(_ observer: @escaping (String) -> Void) {
        self.observer = observer
    }
}

// MARK: - Sendable

@available(*, unavailable) extension FunctionBox: Sendable {}

@available(*, unavailable) extension TraceBox: Sendable {}
