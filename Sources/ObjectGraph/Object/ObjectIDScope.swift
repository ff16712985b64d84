import Foundation

/// An entity and a store, as IDs name them: one instance per pair, shared by
/// every ID of the pair, so that an ``ObjectID`` is this reference and a key.
///
/// The entity keeps its scopes (``EntityDescription/idScope(in:)``) until its
/// model goes; a scope keeps its entity alive, so an ID still names its
/// entity after the model has gone.
///
/// Public because ``ObjectID`` inlines its reads for the stores built on this
/// layer; only a store has a use for one (``EntityDescription/idScope(in:)``).
public final class ObjectIDScope: Sendable {
    /// The entity of the scope's IDs.
    public let entity: EntityDescription
    /// The store of the scope's IDs; nil for temporary ones. Unretained:
    /// identities live as long as the process (``StoreIdentity``).
    @_spi(StoreImplementation) public let storeReference: Unmanaged<StoreIdentity>?

    init(entity: EntityDescription, store: StoreIdentity?) {
        self.entity = entity
        self.storeReference = store.map { Unmanaged.passUnretained($0) }
    }
}
