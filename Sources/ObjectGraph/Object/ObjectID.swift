@_spi(DataStackInternal) import DataStackSupport
import Foundation
import Synchronization

/// The identity of an object: its entity, its store and its key there
/// (Core Data: `NSManagedObjectID`).
///
/// IDs are values: they cross queues and contexts where objects may not. An
/// inserted object has a temporary ID until its context saves to a store (or
/// calls ``ManagedObjectContext/obtainPermanentIDs(for:)``); then it gets a
/// permanent one, the row's primary key.
///
/// ```swift
/// let id = ticker.objectID                      // on the context's queue
/// await otherContext.perform { otherContext.object(with: id) }
/// id.uriRepresentation()                        // x-coredata://<STORE-UUID>/Ticker/p42
/// ```
public struct ObjectID: Sendable, Hashable {
    /// The ID's entity and store, one shared instance per pair (see
    /// ``ObjectIDScope``): one word rather than two, which makes an ID two words
    /// in every object, registry bucket, set of IDs and `PropertyValue` (an
    /// ID-sized payload set that enum's stride: 24 bytes now, 32 with a
    /// three-word ID).
    @usableFromInline let scope: ObjectIDScope
    /// The primary key's bits for a permanent ID, the counter for a temporary
    /// one: which of the two it is, the scope says (a temporary ID has no
    /// store). One word rather than an enum of the two, whose tag would take
    /// a word of its own.
    @usableFromInline package let rawKey: UInt64

    package enum Key: Hashable, Sendable {
        case permanent(Int64)
        case temporary(UInt64)
    }

    /// The object's entity.
    @inlinable public var entity: EntityDescription { scope.entity }
    /// The store that holds the row; nil while the ID is temporary.
    package var store: StoreIdentity? { scope.storeReference?.takeUnretainedValue() }
    /// The store's identity, unretained (see ``StoreIdentity``).
    @_spi(StoreImplementation) public var storeReference: Unmanaged<StoreIdentity>? { scope.storeReference }

    /// The key, as the kind of ID it is.
    package var key: Key {
        scope.storeReference == nil ? .temporary(rawKey) : .permanent(Int64(bitPattern: rawKey))
    }

    /// The ID of a stored row.
    ///
    /// Looks the entity's scope for `store` up (a lock and a short list);
    /// a store that makes an ID per row it reads takes the scope once
    /// (``EntityDescription/idScope(in:)``) and uses ``init(scope:primaryKey:)``.
    @_spi(StoreImplementation)
    public init(entity: EntityDescription, store: StoreIdentity, primaryKey: Int64) {
        self.init(scope: entity.idScope(in: store), primaryKey: primaryKey)
    }

    /// The ID of a stored row of the scope's entity and store (a scope made
    /// by ``EntityDescription/idScope(in:)``, so it has a store). Inlinable
    /// because a store above this layer makes one per row it reads: as a call
    /// across the module boundary it cost ~70 instructions a row.
    @_spi(StoreImplementation) @inlinable
    public init(scope: ObjectIDScope, primaryKey: Int64) {
        self.scope = scope
        self.rawKey = UInt64(bitPattern: primaryKey)
    }

    private init(temporaryFor entity: EntityDescription) {
        self.scope = entity.temporaryIDScope
        self.rawKey = Self.nextTemporaryKey.add(1, ordering: .relaxed).newValue
    }

    /// The ID of `scope` with the key's bits as ``rawKey`` holds them.
    package init(scope: ObjectIDScope, rawKey: UInt64) {
        self.scope = scope
        self.rawKey = rawKey
    }

    /// The same ID with `entity` (which has the same name) as its entity.
    package func withEntity(_ entity: EntityDescription) -> ObjectID {
        let scope = scope.storeReference.map { entity.idScope(in: $0.takeUnretainedValue()) } ?? entity.temporaryIDScope
        return ObjectID(scope: scope, rawKey: rawKey)
    }

    /// A fresh temporary ID for a new object of `entity`.
    package static func temporary(for entity: EntityDescription) -> ObjectID {
        ObjectID(temporaryFor: entity)
    }

    private static let nextTemporaryKey = Atomic<UInt64>(0)
    // Temporary URIs must be unique across processes too; a random prefix per
    // process keeps them so without generating a UUID per object.
    private static let temporaryPrefix: (UInt64, UInt64) = {
        let uuid = UUID().uuid
        return withUnsafeBytes(of: uuid) { ($0.load(as: UInt64.self), $0.load(fromByteOffset: 8, as: UInt64.self)) }
    }()

    /// The entity's name.
    public var entityName: String { entity.name }

    /// Whether the ID is temporary: its object has not been saved to a store yet.
    public var isTemporaryID: Bool { scope.storeReference == nil }

    /// The row's primary key in its store (`Z_PK`), for a permanent ID.
    public var primaryKey: Int64? {
        scope.storeReference == nil ? nil : Int64(bitPattern: rawKey)
    }

    /// The UUID of the store that holds the object, for a permanent ID.
    public var storeIdentifier: String? { store?.uuid }

    /// The ID as a URI: `x-coredata://<STORE-UUID>/<Entity>/p<PK>` for a permanent ID,
    /// `x-coredata:///<Entity>/t<UUID>` for a temporary one, as Core Data writes them.
    ///
    /// Turn it back into an ID with ``PersistentStoreCoordinator/managedObjectID(forURIRepresentation:)``.
    public func uriRepresentation() -> URL {
        var components = URLComponents()
        components.scheme = "x-coredata"
        switch key {
        case .permanent(let pk):
            components.host = store?.uuid ?? ""
            components.path = "/\(entity.name)/p\(pk)"
        case .temporary(let counter):
            var bytes = Self.temporaryPrefix
            bytes.1 ^= counter
            let uuid = withUnsafeBytes(of: bytes) { UUID(uuid: $0.load(as: uuid_t.self)) }
            components.host = ""
            components.path = "/\(entity.name)/t\(uuid.uuidString)"
        }
        return components.url ?? URL(string: "x-coredata:///invalid")!
    }

    public static func == (lhs: ObjectID, rhs: ObjectID) -> Bool {
        sameID(lhs.scope, lhs.rawKey, rhs.scope, rhs.rawKey)
    }

    /// Whether two IDs, given by their scopes and keys, are equal: `==`
    /// without making them (the row cache keeps a row's scope and key apart).
    @inline(__always)
    package static func sameID(_ scope: ObjectIDScope, _ key: UInt64, _ otherScope: ObjectIDScope, _ otherKey: UInt64) -> Bool {
        // One scope per entity and store: the same scope is the same entity
        // and store. IDs from two copies of a model have two scopes, equal
        // when their stores are the same and their entities have one name.
        key == otherKey && (scope === otherScope
            || (scope.storeReference?.toOpaque() == otherScope.storeReference?.toOpaque()
                && scope.entity.name == otherScope.entity.name))
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(hashBits)
    }

    /// Hashes the ID's one word in one call, as the standard library's own
    /// integers do, rather than through a `Hasher` made, fed and finalized
    /// (~170 instructions against ~60: IDs are hashed for every change a
    /// context tracks, every did-save set and every row the row cache keeps).
    /// Equal IDs hash equally either way.
    public func _rawHashValue(seed: Int) -> Int {
        hashBits._rawHashValue(seed: seed)
    }

    /// One word, not the enum (its case and payload would be two): the key,
    /// mixed with the entity's name seed so that equal keys of two entities
    /// (every table counts from 1) do not collide. By name, as `==` compares.
    private var hashBits: UInt64 {
        (rawKey &<< 1 | (scope.storeReference == nil ? 1 : 0)) ^ scope.entity.nameSeed
    }
}

extension ObjectID: CustomStringConvertible {
    public var description: String { uriRepresentation().absoluteString }
}

/// A store's identity inside IDs: one instance per store UUID in the process, so
/// two coordinators on the same file produce equal IDs, compared by reference.
///
/// Identities are never freed (a few bytes per store UUID a process ever
/// opens): ``ObjectID`` holds its identity unowned.
@_spi(StoreImplementation)
public final class StoreIdentity: Sendable {
    package let uuid: String

    private init(uuid: String) { self.uuid = uuid }

    /// The identities made so far, by UUID.
    private static let identities = Locked<[String: StoreIdentity]>([:])

    /// The one identity for `uuid`.
    package static func named(_ uuid: String) -> StoreIdentity {
        identities.withLock { identities in
            if let identity = identities[uuid] { return identity }
            let identity = StoreIdentity(uuid: uuid)
            identities[uuid] = identity
            return identity
        }
    }
}
