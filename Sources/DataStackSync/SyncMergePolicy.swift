import DataStack
import Foundation

/// How one attribute or to-one relationship settles two replicas' concurrent
/// changes — changes neither replica had seen the other's when it made its own.
/// A change made after seeing another always wins over it, whatever the policy.
///
/// Declared in the model, in the property's user info under ``userInfoKey``
/// (Xcode's model editor writes it; a class-declared model says it on the
/// property, `@Managed(userInfo: .sync(.hubWins))`):
///
/// | user info value | policy |
/// |---|---|
/// | none, `lastWriterWins` | ``lastWriterWins`` |
/// | `hubWins` | ``hubWins`` |
/// | `replicaWins` | ``replicaWins`` |
/// | `resolver:NAME` | ``resolver(_:)`` |
public enum SyncMergePolicy: Sendable, Hashable {
    /// The change with the greater hybrid timestamp wins (the default): the
    /// same winner on every replica, whatever order the changes arrive in.
    case lastWriterWins
    /// The change that reached the hub first wins: an offline edit loses to
    /// one the hub already held.
    case hubWins
    /// The change that reached the hub last wins: a replica's offline edit
    /// overwrites what others synced meanwhile.
    case replicaWins
    /// A resolver registered under this name in the sync options settles the
    /// two values; it must give the same answer on every replica.
    case resolver(String)

    /// The user info key of a property's policy.
    public static let userInfoKey = "com.datastack.sync.merge"

    /// The policy a property's user info declares; throws for a value that names none.
    public init(userInfo: [String: String], property: String, entity: String) throws(SyncError) {
        switch userInfo[Self.userInfoKey] {
        case nil, "lastWriterWins": self = .lastWriterWins
        case "hubWins": self = .hubWins
        case "replicaWins": self = .replicaWins
        case let value? where value.hasPrefix("resolver:") && value.count > "resolver:".count:
            self = .resolver(String(value.dropFirst("resolver:".count)))
        case let value?:
            throw SyncError(.notInModel, message: """
                \(entity).\(property) declares sync merge policy "\(value)" (user info \(Self.userInfoKey)); \
                expected lastWriterWins, hubWins, replicaWins or resolver:NAME
                """)
        }
    }

    /// The user info value that declares this policy.
    public var userInfoValue: String {
        switch self {
        case .lastWriterWins: "lastWriterWins"
        case .hubWins: "hubWins"
        case .replicaWins: "replicaWins"
        case .resolver(let name): "resolver:\(name)"
        }
    }
}

/// What happens when one replica deletes an object another changed concurrently,
/// declared per entity in its user info under ``userInfoKey``
/// (`deleteWins`, the default, or `editWins`).
public enum SyncDeletePolicy: Sendable, Hashable {
    /// The object stays deleted; the concurrent edit is dropped (Core Data's CloudKit mirror does this).
    case deleteWins
    /// The edit brings the object back, with every value the edit's replica had.
    case editWins

    /// The user info key of an entity's policy.
    public static let userInfoKey = "com.datastack.sync.delete"

    public init(userInfo: [String: String], entity: String) throws(SyncError) {
        switch userInfo[Self.userInfoKey] {
        case nil, "deleteWins": self = .deleteWins
        case "editWins": self = .editWins
        case let value?:
            throw SyncError(.notInModel, message: """
                \(entity) declares sync delete policy "\(value)" (user info \(Self.userInfoKey)); expected deleteWins or editWins
                """)
        }
    }

    /// The user info value that declares this policy.
    public var userInfoValue: String {
        switch self {
        case .deleteWins: "deleteWins"
        case .editWins: "editWins"
        }
    }
}

extension Dictionary where Key == String, Value == String {
    /// The user info that declares a property's merge policy in a
    /// class-declared model: `@Managed(userInfo: .sync(.hubWins)) var price: Double`.
    public static func sync(_ policy: SyncMergePolicy) -> [String: String] {
        [SyncMergePolicy.userInfoKey: policy.userInfoValue]
    }

    /// The user info that declares an entity's delete policy in a
    /// class-declared model: `EntityDeclaration(userInfo: .sync(.editWins))`.
    public static func sync(_ policy: SyncDeletePolicy) -> [String: String] {
        [SyncDeletePolicy.userInfoKey: policy.userInfoValue]
    }
}
