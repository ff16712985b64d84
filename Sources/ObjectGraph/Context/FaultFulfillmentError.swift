import Foundation
@_spi(DataStackInternal) import DataStackSupport

/// A fault, or a relationship fault, whose values could not be read from the
/// store for a reason other than the row being gone: an I/O error, a damaged
/// page, a busy database (Core Data: "could not fulfill a fault").
///
/// An error is never data. When a read fails, the object stays a fault (or
/// the to-many stays unloaded) and the next access tries again; nothing is
/// turned into a deleted object or an empty relationship. How the failure
/// reaches you depends on how you read:
///
/// - Throwing paths throw it: ``ManagedObject/loadValues()``,
///   ``ManagedObject/value(forKey:)``, ``ManagedObject/setValue(_:forKey:)``,
///   fetches and saves.
/// - Non-throwing paths — typed ``Managed`` properties, ``ManagedObjectContext/delete(_:)``
///   — cannot throw. A read returns the property's initial value for that one
///   access (nothing is stored); a change that needed the unreadable values is
///   not applied. Either way the context posts the error as
///   ``ContextEvent/faultFulfillmentFailed(_:)`` (and
///   ``ManagedObjectContext/faultFulfillmentFailedNotification``), and the
///   next ``ManagedObjectContext/save()`` that involves the object throws it. A
///   change that could not be applied makes every save of the context throw it
///   until the object is refreshed, or the context rolled back or reset: the
///   save must not go ahead as if the change had been made.
///
/// Only "the row does not exist" makes a fault inaccessible (see
/// ``ManagedObjectContext/shouldDeleteInaccessibleFaults``).
public struct FaultFulfillmentError: CodedError, Sendable {
    /// The kind of failure (see ``ErrorCode``).
    public struct Code: ErrorCode {
        public typealias Failure = FaultFulfillmentError
        /// The code's name, as written in Swift (`"readFailed"`).
        public let description: String
        private init(_ name: String) { description = name }

        /// The store failed to read the object's row, or the relationship's
        /// rows, for a reason other than the row being gone (``FaultFulfillmentError/underlying``).
        public static let readFailed = Code("readFailed")
    }

    /// The kind of failure.
    public var code: Code
    /// The object whose values, or whose relationship, could not be read.
    public var objectID: ObjectID
    /// The to-many relationship being loaded, or nil for the object's values.
    public var relationshipName: String?
    /// The store's error.
    public var underlying: any Error
    /// Whether a change made through a non-throwing path was not applied
    /// because it needed these values.
    public var changeWasDropped: Bool

    public init(objectID: ObjectID, relationshipName: String? = nil, underlying: any Error, changeWasDropped: Bool = false) {
        self.code = .readFailed
        self.objectID = objectID
        self.relationshipName = relationshipName
        self.underlying = underlying
        self.changeWasDropped = changeWasDropped
    }

    public var description: String {
        var text = "could not fulfill the fault of \(objectID)"
        if let relationshipName { text += " for relationship '\(relationshipName)'" }
        if changeWasDropped { text += "; a change to the object was not applied (refresh it or roll back)" }
        return text + ": \(underlying)"
    }
}
