import Foundation

/// What attributes and relationships have in common (Core Data: `NSPropertyDescription`).
///
/// A description is mutable while its model is being built and frozen once a
/// coordinator uses the model; changing it after that is a programmer error, as
/// in Core Data.
///
/// A property is an ``AttributeDescription`` or a ``RelationshipDescription``;
/// the class is not open, because the store, the context and the migrator
/// handle only those two kinds (Core Data's fetched properties are not
/// supported).
///
/// ## Topics
/// - ``AttributeDescription``
/// - ``RelationshipDescription``
// @unchecked Sendable: mutable only before the model is frozen (`ModelLock`), read-only after.
public class PropertyDescription: @unchecked Sendable, CustomStringConvertible {
    /// The property's name, which is also its key.
    public var name: String { didSet { checkMutable() } }
    /// Whether the property may be nil (for a to-many: empty) when saved. The default is true.
    public var isOptional: Bool { didSet { checkMutable() } }
    /// A transient property lives in memory only; the store never sees it.
    public var isTransient: Bool = false { didSet { checkMutable() } }
    /// The name this property had in an earlier model version (lightweight migration).
    public var renamingIdentifier: String? { didSet { checkMutable() } }
    /// Changes the version hash without changing the schema (Core Data's `versionHashModifier`).
    public var versionHashModifier: String? { didSet { checkMutable() } }
    /// Whether the property is indexed for full-text search (Core Data:
    /// `isIndexedBySpotlight`, Xcode's "Index in Spotlight"). The default is false.
    ///
    /// The SQLite store indexes the non-transient String attributes marked so
    /// with SQLite FTS5, and `MATCHES[search]` predicates search them (see
    /// ``SearchQuery``). The flag is not part of the version hash, as in Core
    /// Data: turning it on or off needs no migration; the store builds or drops
    /// the index when it next opens the file for writing. On attributes of
    /// other types and on relationships it is kept but indexes nothing.
    public var isIndexedBySpotlight: Bool = false { didSet { checkMutable() } }
    /// Free-form information from the model.
    public var userInfo: [String: String] = [:] { didSet { checkMutable() } }

    /// The entity that declares this property.
    /// Unowned: see ``EntityDescription/superentity``.
    public internal(set) unowned var entity: EntityDescription?

    /// The slot this property occupies in objects of its entity and of its subentities.
    ///
    /// Assigned when the model is finalized: inherited properties come first, so a
    /// property keeps its index in every subentity.
    /// (It is the position of the property's value in an ``IncrementalStoreNode``.)
    public internal(set) var index: Int = -1

    init(name: String, isOptional: Bool) {
        self.name = name
        self.isOptional = isOptional
    }

    package func checkMutable() {
        if let entity, let model = entity.model {
            model.checkMutable("\(entity.name).\(name)")
            model.layoutIsStale = true
        }
    }

    /// The fields this property's version hash covers; attributes and
    /// relationships add their own (see ``EntityDescription/versionHash``).
    package var versionHashComponents: [String] {
        [name, isOptional ? "optional" : "required", isTransient ? "transient" : "persistent", versionHashModifier ?? ""]
    }

    /// The version hash of the property, which its entity's hash includes
    /// (Core Data: `NSPropertyDescription.versionHash`): SHA-256 over
    /// ``versionHashComponents``. See ``EntityDescription/versionHash`` for
    /// what it covers and what it leaves out.
    public var versionHash: Data {
        var encoder = VersionHash.Encoder()
        for component in versionHashComponents { encoder.append(component) }
        return encoder.hash
    }

    public var description: String { "\(entity?.name ?? "?").\(name)" }
}
