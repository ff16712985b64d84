@_spi(DataStackInternal) import DataStackSupport

/// The property names of `@Managed` storages, by class and offset in the
/// object, for the whole process.
///
/// A storage's name is a fact about its class, not about a model: finding it
/// takes a `Mirror` of an object and a conformance check per stored property
/// (~100,000 instructions a property), which each entity's slot table paid
/// again for every model instance that binds the class — every stack set up,
/// every test, every copy of a model. Kept here, it is paid once per class and
/// property; the entity's table maps the name to its own slot.
final class ManagedStorageNames: Sendable {
    static let shared = ManagedStorageNames()

    private struct Key: Hashable {
        let type: ObjectIdentifier
        let offset: Int
    }

    /// Classes are kept alive by their metadata, so an identity is never reused.
    private let names = Locked<[Key: String]>([:])

    /// The name of the storage at `offset` in objects of `type`, found with
    /// `find` the first time.
    func name(of type: AnyObject.Type, offset: Int, find: () -> String) -> String {
        let key = Key(type: ObjectIdentifier(type), offset: offset)
        if let known = names.withLock({ $0[key] }) { return known }
        // Found outside the lock: `find` reflects the object, which may take
        // the runtime's locks; two threads finding the same name agree.
        let found = find()
        names.withLock { $0[key] = found }
        return found
    }
}
