import Foundation
@_spi(DataStackInternal) import DataStackSupport

extension ManagedObjectContext {
    /// Posted by `processPendingChanges()` when registered objects changed; the
    /// payload is an ``ObjectsDidChange``.
    public static let objectsDidChangeNotification = Notification.Name("DataStack.ManagedObjectContext.objectsDidChange")
    /// Posted at the start of a save that has changes; no payload.
    public static let willSaveNotification = Notification.Name("DataStack.ManagedObjectContext.willSave")
    /// Posted after a successful save; the payload is a ``ContextDidSave``.
    public static let didSaveNotification = Notification.Name("DataStack.ManagedObjectContext.didSave")

    static let payloadKey = "DataStack.payload"

    /// The context's events, as an asynchronous sequence: the same events as
    /// its notifications, in order, for as long as the iterating task runs.
    ///
    /// ```swift
    /// for await event in context.events {
    ///     if case .didSave(let save) = event { print(save.insertedObjectIDs.count) }
    /// }
    /// ```
    public var events: AsyncStream<ContextEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: ContextEvent.self, bufferingPolicy: .unbounded)
        eventSubscribers.add(continuation)
        return stream
    }

    /// Posts the notification and yields the event to every `events` sequence.
    func post(_ event: ContextEvent) {
        eventSubscribers.yield(event)
        switch event {
        case .objectsDidChange(let change):
            NotificationCenter.default.post(name: Self.objectsDidChangeNotification, object: self, userInfo: [Self.payloadKey: change])
        case .willSave:
            NotificationCenter.default.post(name: Self.willSaveNotification, object: self)
        case .didSave(let save):
            NotificationCenter.default.post(name: Self.didSaveNotification, object: self, userInfo: [Self.payloadKey: save])
        case .faultFulfillmentFailed(let failure):
            NotificationCenter.default.post(name: Self.faultFulfillmentFailedNotification, object: self, userInfo: [Self.payloadKey: failure])
        }
    }
}

/// One event of a context.
public enum ContextEvent: Sendable {
    case objectsDidChange(ObjectsDidChange)
    case willSave
    case didSave(ContextDidSave)
    /// A fault or relationship fault could not be read; the object stays a
    /// fault and the next access tries again (see ``FaultFulfillmentError``).
    case faultFulfillmentFailed(FaultFulfillmentError)
}

/// What a save wrote, by object ID (the payload of `didSaveNotification`).
///
/// IDs cross queues safely: hand this value to another context's
/// ``ManagedObjectContext/mergeChanges(fromContextDidSave:)``.
public struct ContextDidSave: Sendable, Equatable {
    public var insertedObjectIDs: Set<ObjectID> {
        get { inserted.set }
        set { inserted = DeferredObjectIDSet(newValue) }
    }
    public var updatedObjectIDs: Set<ObjectID>
    public var deletedObjectIDs: Set<ObjectID>
    /// ``insertedObjectIDs``, built when first read: a save gives a list, and
    /// a merge does not look inserted objects up (they are not registered in
    /// the merging context), so only a reader of the set pays for it. The
    /// updated IDs are a set from the start: a merge looks up the ones it has
    /// registered, and building the set on the merging (main) queue would
    /// make the merge cost grow with the save.
    package var inserted: DeferredObjectIDSet
    /// The persistent-history transaction each store that tracks history
    /// recorded this save as (empty for a child's save into its parent, and
    /// for stores without ``StoreOptions/persistentHistoryTracking``). A
    /// reader of the history that has merged this save in-process can move
    /// its bookmark past it rather than read it back.
    public var historyTokens: [PersistentHistoryToken]

    public init(insertedObjectIDs: Set<ObjectID> = [], updatedObjectIDs: Set<ObjectID> = [], deletedObjectIDs: Set<ObjectID> = [],
                historyTokens: [PersistentHistoryToken] = []) {
        self.inserted = DeferredObjectIDSet(insertedObjectIDs)
        self.updatedObjectIDs = updatedObjectIDs
        self.deletedObjectIDs = deletedObjectIDs
        self.historyTokens = historyTokens
    }

    /// A save's payload, its inserted IDs as a list of distinct IDs.
    package init(inserted: [ObjectID], updated: Set<ObjectID>, deleted: Set<ObjectID>, historyTokens: [PersistentHistoryToken]) {
        self.inserted = DeferredObjectIDSet(distinct: inserted)
        self.updatedObjectIDs = updated
        self.deletedObjectIDs = deleted
        self.historyTokens = historyTokens
    }

    /// Reads the payload of a `didSaveNotification`.
    ///
    /// - Throws: ``NotificationPayloadError`` for any other notification.
    public init(_ notification: Notification) throws {
        self = try notification.payload(of: ManagedObjectContext.didSaveNotification, at: ManagedObjectContext.payloadKey)
    }
}

/// What changed among a context's registered objects (the payload of `objectsDidChangeNotification`).
public struct ObjectsDidChange: Sendable, Equatable {
    public var insertedObjectIDs: Set<ObjectID> {
        get { inserted.set }
        set { inserted = DeferredObjectIDSet(newValue) }
    }
    /// ``insertedObjectIDs``, built when first read.
    package var inserted = DeferredObjectIDSet()
    public var updatedObjectIDs: Set<ObjectID> = []
    public var deletedObjectIDs: Set<ObjectID> = []
    /// Objects whose values were reloaded from the store without being changed here.
    public var refreshedObjectIDs: Set<ObjectID> = []
    /// Objects that were discarded (turned into faults or removed) individually.
    public var invalidatedObjectIDs: Set<ObjectID> = []
    /// Whether every object was discarded (a reset): listeners must fetch again.
    public var invalidatedAll = false
    /// For a change made by ``ManagedObjectContext/mergeChanges(fromContextDidSave:)``:
    /// the whole save that was merged, including objects this context has not
    /// registered, so a list can learn about rows it has not loaded.
    public var mergedSave: ContextDidSave?

    public init() {}

    /// Reads the payload of an `objectsDidChangeNotification`.
    ///
    /// - Throws: ``NotificationPayloadError`` for any other notification.
    public init(_ notification: Notification) throws {
        self = try notification.payload(of: ManagedObjectContext.objectsDidChangeNotification, at: ManagedObjectContext.payloadKey)
    }

    var isEmpty: Bool {
        inserted.isEmpty && updatedObjectIDs.isEmpty && deletedObjectIDs.isEmpty
            && refreshedObjectIDs.isEmpty && invalidatedObjectIDs.isEmpty && !invalidatedAll
    }
}

/// A notification that does not carry the payload asked for.
public struct NotificationPayloadError: CodedError, Sendable {
    /// The kind of failure (see ``ErrorCode``).
    public struct Code: ErrorCode {
        public typealias Failure = NotificationPayloadError
        /// The code's name, as written in Swift (`"wrongNotification"`).
        public let description: String
        private init(_ name: String) { description = name }

        /// The notification has another name than the payload's, or does not
        /// carry the payload under the payload's key.
        public static let wrongNotification = Code("wrongNotification")
    }

    /// The kind of failure.
    public var code: Code
    /// The notification's name.
    public var name: Notification.Name
    /// The payload type asked for.
    public var expected: String

    public init(name: Notification.Name, expected: String) {
        self.code = .wrongNotification
        self.name = name
        self.expected = expected
    }

    public var description: String { "notification \(name.rawValue) does not carry a \(expected)" }
}

extension Notification {
    /// The payload stored under `key` of a notification named `expected`,
    /// for the payload types' `init(_ notification:)`.
    ///
    /// - Throws: ``NotificationPayloadError`` for another notification, or one without that payload.
    package func payload<Payload>(of expected: Notification.Name, at key: String) throws -> Payload {
        guard name == expected, let payload = userInfo?[key] as? Payload else {
            throw NotificationPayloadError(name: name, expected: "\(Payload.self)")
        }
        return payload
    }
}
