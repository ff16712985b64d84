import Foundation

/// Changes attributes of every row that matches a predicate, in the store,
/// without loading objects (Core Data: `NSBatchUpdateRequest`).
///
/// ```swift
/// var request = BatchUpdateRequest(entityName: "Stock", predicate: try FetchPredicate(format: "exchange == %@", "XNAS"))
/// request.propertiesToUpdate = ["price": .keyPath("price") * 1.1, "note": "repriced"]
/// request.resultType = .objectIDs
/// let result = try context.execute(request)
/// ```
///
/// Why it exists: repricing a hundred thousand rows through managed objects
/// reads, validates and writes each one; a batch update is one statement per
/// table in one transaction. The price is Core Data's: no validation rules, no
/// `willSave`, and contexts learn of the change only by a merge — see
/// ``ManagedObjectContext/execute(_:)-(BatchUpdateRequest)`` for what is kept
/// (uniqueness constraints, `Z_OPT`, history) and what is not.
///
/// New values are ``FetchExpression``s, the type of a dictionary fetch's
/// computed values, so there is one way to write a value (Core Data's
/// `propertiesToUpdate` takes constants and `NSExpression`s too). Both stores
/// compute them with ``FetchExpression``'s rules — nil in arithmetic gives nil,
/// integers stay integers, `/` divides as floating point — and store the result
/// as the attribute keeps it: truncated toward zero into an integer attribute.
///
/// Uniqueness constraints are checked as the store checks them: SQLite checks
/// its unique index row by row as it writes, so an update that moves unique
/// values past each other (`number = number + 1` over 1, 2, 3) fails at the
/// first row that takes a value another row still holds — so whether it
/// fails depends on the order SQLite visits the rows in (by key, for a
/// scan), as for Core Data's batch update on SQLite — while the in-memory
/// store checks the result as a whole and succeeds. Either way a failure
/// changes nothing.
///
/// A value is computed from the row's own attributes only: an aggregate or a
/// key path through a relationship throws
/// ``ObjectGraphError/Code-swift.struct/notComputedFromTheRow``, since an
/// SQL `UPDATE` sets each row on its own and cannot join another table.
public struct BatchUpdateRequest: Sendable {
    /// The entity whose rows change.
    public var entityName: String
    /// Which rows change; nil for all of them.
    public var predicate: FetchPredicate?
    /// Whether rows of subentities change too. The default is `true`.
    public var includesSubentities = true
    /// The new value of each attribute, by name: a constant (a literal, or
    /// ``FetchExpression/constant(_:)``, converted as key-value coding converts it),
    /// or an expression on the row's attributes whose value the attribute holds
    /// (of its own type, or any number for a number). Relationships cannot be set.
    public var propertiesToUpdate: [String: FetchExpression]
    /// What ``ManagedObjectContext/execute(_:)-(BatchUpdateRequest)`` returns. The default is ``BatchResultType/statusOnly``.
    public var resultType: BatchResultType = .statusOnly

    public init(entityName: String, predicate: FetchPredicate? = nil, propertiesToUpdate: [String: FetchExpression] = [:]) {
        self.entityName = entityName
        self.predicate = predicate
        self.propertiesToUpdate = propertiesToUpdate
    }
}
