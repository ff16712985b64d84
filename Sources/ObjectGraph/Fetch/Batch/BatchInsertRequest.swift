import Foundation

/// Inserts rows into the store without creating objects, from dictionaries of
/// attribute values (Core Data: `NSBatchInsertRequest`).
///
/// ```swift
/// var request = BatchInsertRequest(entityName: "Ticker", objects: [
///     ["symbol": "ACME", "price": 12.5],
///     ["symbol": "BETA", "price": 3],
/// ])
/// request.resultType = .objectIDs
/// let result = try context.execute(request)
/// ```
///
/// Why it exists: an import of a hundred thousand rows through managed
/// objects creates, validates, snapshots and registers each one; a batch
/// insert converts each dictionary and binds it to one prepared `INSERT` in one
/// transaction, close to what hand-written SQL costs. The price is Core Data's:
/// attributes only (a key naming a relationship is refused), no validation
/// rules beyond a value for every non-optional attribute, and contexts learn
/// of the rows only by a merge — see ``ManagedObjectContext/execute(_:)-(BatchInsertRequest)``
/// for what is kept (uniqueness constraints and the context's merge policy,
/// `Z_OPT`, history).
///
/// Rows come either all at once (``init(entityName:objects:)``) or one at a time
/// from a handler (``init(entityName:dictionaryHandler:)``), which keeps memory
/// flat however many rows there are: the SQLite store writes each row as soon
/// as the handler gives it.
///
/// ## Topics
/// - ``init(entityName:objects:)``
/// - ``init(entityName:dictionaryHandler:)``
/// - ``resultType``
public struct BatchInsertRequest: Sendable {
    /// Fills the dictionary with the values of row `index` (0, 1, 2, …) and
    /// returns `false`, or returns `true` when there are no more rows.
    public typealias DictionaryHandler = @Sendable (_ index: Int, _ row: inout [String: any Sendable]) -> Bool

    /// Where the rows come from.
    @_spi(StoreImplementation) public enum Rows: Sendable {
        case objects([[String: any Sendable]])
        case handler(DictionaryHandler)
    }

    /// The entity of every row: exactly this entity, never a subentity. It must not be abstract.
    public var entityName: String
    package let rows: Rows
    /// What ``ManagedObjectContext/execute(_:)-(BatchInsertRequest)`` returns. The default is
    /// ``BatchResultType/statusOnly``; ``BatchResultType/count`` and
    /// ``BatchResultType/objectIDs`` cover the rows inserted and, under an
    /// object-trump merge policy, the stored rows updated (as in Core Data).
    public var resultType: BatchResultType = .statusOnly

    /// Inserts one row per dictionary, in order.
    ///
    /// Keys are attribute names. Values are converted as key-value coding
    /// converts them (any integer for a number, `Data` or `[UInt8]` for binary
    /// data, an `Encodable` for a transformable, …); `nil` or `NSNull` store nil.
    /// An attribute a dictionary leaves out gets the model's default value.
    public init(entityName: String, objects: [[String: any Sendable]]) {
        self.entityName = entityName
        rows = .objects(objects)
    }

    /// Inserts the rows a handler gives, one call per row, until it returns `true`.
    ///
    /// Core Data's `dictionaryHandler` fills an `NSMutableDictionary` and keeps
    /// its position in state it captures. Here the handler is told the row's
    /// index instead, so that it can be `@Sendable` without a lock (the request
    /// crosses to the context's queue) and so that it can be called again from
    /// row 0 if the store must start its transaction over. Each call gets an
    /// empty dictionary (the same storage, cleared, so a row costs no
    /// allocation); the call that returns `true` ends the request and what it
    /// put in the dictionary is not inserted.
    ///
    /// ```swift
    /// let quotes: [Quote] = …   // or a file read row by row
    /// let request = BatchInsertRequest(entityName: "Quote") { index, row in
    ///     guard index < quotes.count else { return true }
    ///     row["symbol"] = quotes[index].symbol
    ///     row["price"] = quotes[index].price
    ///     return false
    /// }
    /// ```
    ///
    /// Values are read as for ``init(entityName:objects:)``.
    public init(entityName: String, dictionaryHandler: @escaping DictionaryHandler) {
        self.entityName = entityName
        rows = .handler(dictionaryHandler)
    }
}
