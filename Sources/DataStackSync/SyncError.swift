import DataStackSupport
import Foundation

/// An error of syncing a replica: what went wrong, where, and whether trying
/// again later can help (``isTransient``).
public struct SyncError: CodedError, Sendable, Equatable {
    public struct Code: ErrorCode {
        public typealias Failure = SyncError
        public let description: String
        private init(_ name: String) { description = name }

        /// The hub cannot be reached now; the engine tries again, nothing is lost.
        public static let offline = Code("offline")
        /// The replica's model version is not the hub's: it must migrate before it syncs.
        public static let modelVersionMismatch = Code("modelVersionMismatch")
        /// The changes the replica needs next were purged from the hub: it must start again from a snapshot.
        public static let snapshotRequired = Code("snapshotRequired")
        /// A snapshot of the log through a sequence the hub has purged past:
        /// a replica could not go on from it, so the hub refused it.
        public static let staleSnapshot = Code("staleSnapshot")
        /// Bytes of a change that do not decode (the hub's data, or a replica's, is damaged).
        public static let corruptChange = Code("corruptChange")
        /// A change names an entity or property the model does not have.
        public static let notInModel = Code("notInModel")
        /// A local save changed objects while the engine applied pulled changes to
        /// them (or inserted a unique key they carry): the engine reads that save
        /// and applies again; this surfaces only when it keeps happening.
        public static let concurrentSave = Code("concurrentSave")
        /// The hub refused or failed a request for another reason.
        public static let hubFailure = Code("hubFailure")
        /// The replica's local store or its sync bookkeeping failed.
        public static let localFailure = Code("localFailure")
        /// A hub URL whose scheme no hub is registered for (``SyncHubs/register(scheme:_:)``).
        public static let unknownHubScheme = Code("unknownHubScheme")
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, message: String) {
        self.code = code
        self.message = message
    }

    /// Whether trying again later may succeed (the hub offline), as opposed to
    /// a failure that needs someone to act (a migration, a snapshot, a bug).
    public var isTransient: Bool { code == .offline || code == .concurrentSave }

    public var description: String { message }
}
