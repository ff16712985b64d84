/// The ID scopes of one store's entities, for a store that makes an ID per
/// row it reads: each entity's scope is looked up (a lock) once, then found
/// by identity among the few entities a read meets.
@_spi(StoreImplementation)
public struct ObjectIDScopeCache {
    public let store: StoreIdentity
    private var scopes: [ObjectIDScope] = []
    /// The last scope found: the rows of a read are mostly of one entity.
    @usableFromInline var last: ObjectIDScope?

    public init(store: StoreIdentity) {
        self.store = store
    }

    /// The scope of `entity`'s IDs in the store.
    @inlinable @inline(__always)
    public mutating func scope(of entity: EntityDescription) -> ObjectIDScope {
        if let last, last.entity === entity { return last }
        return find(entity)
    }

    /// The ID of row `primaryKey` of `entity` in the store.
    @inlinable
    public mutating func objectID(of entity: EntityDescription, primaryKey: Int64) -> ObjectID {
        ObjectID(scope: scope(of: entity), primaryKey: primaryKey)
    }

    @usableFromInline mutating func find(_ entity: EntityDescription) -> ObjectIDScope {
        let scope = scopes.first { $0.entity === entity } ?? {
            let made = entity.idScope(in: store)
            scopes.append(made)
            return made
        }()
        last = scope
        return scope
    }
}
