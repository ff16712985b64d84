import DataStack
import Foundation

/// Every property's merge policy and every entity's delete policy, read once
/// from a model, with the resolvers that ``SyncMergePolicy/resolver(_:)``
/// policies name.
///
/// ```swift
/// let policies = try SyncPolicies(model: model, resolvers: ["maxStock": maxStock])
/// let merger = SyncMerger(policies: policies)
/// ```
///
/// A property's policy is in its user info under ``SyncMergePolicy/userInfoKey``;
/// an entity's delete policy in its user info under ``SyncDeletePolicy/userInfoKey``,
/// or, when it declares none, its nearest superentity's (the default is
/// ``SyncDeletePolicy/deleteWins``). Inherited properties keep the policy
/// their declaring entity gives them. Transient properties are not stored,
/// so they never sync and have no policy.
///
/// ## Topics
/// - ``mergePolicy(entity:property:)``
/// - ``deletePolicy(entity:)``
/// - ``resolvers``
public struct SyncPolicies: Sendable {
    /// What a change may say about a property.
    enum PropertyKind: Sendable, Hashable {
        /// An attribute or a to-one relationship: a value in ``SyncChange/values``.
        case value
        /// A to-many relationship: adds and removes in ``SyncChange/added`` and ``SyncChange/removed``.
        case toMany
    }

    struct PropertyPolicy: Sendable {
        var kind: PropertyKind
        var merge: SyncMergePolicy
    }

    struct EntityPolicies: Sendable {
        var delete: SyncDeletePolicy
        var properties: [String: PropertyPolicy]
    }

    private let entities: [String: EntityPolicies]
    /// The resolvers, by the name a ``SyncMergePolicy/resolver(_:)`` policy gives.
    public let resolvers: [String: SyncResolver]

    /// Reads the policies of every entity of `model`.
    ///
    /// Throws ``SyncError`` `.notInModel` naming the entity (and property) for
    /// a user info value that names no policy, or a resolver name missing
    /// from `resolvers`: a replica that cannot merge a property must not sync.
    public init(model: ManagedObjectModel, resolvers: [String: SyncResolver] = [:]) throws(SyncError) {
        var entities: [String: EntityPolicies] = [:]
        for entity in model.entities {
            var properties: [String: PropertyPolicy] = [:]
            for (name, property) in entity.propertiesByName where !property.isTransient {
                let declaring = property.entity?.name ?? entity.name
                let merge = try SyncMergePolicy(userInfo: property.userInfo, property: name, entity: declaring)
                if case .resolver(let resolver) = merge, resolvers[resolver] == nil {
                    throw SyncError(.notInModel, message: """
                        \(declaring).\(name) declares sync merge policy resolver:\(resolver), but no resolver \
                        "\(resolver)" was given (known: \(resolvers.keys.sorted().joined(separator: ", ")))
                        """)
                }
                let toMany = (property as? RelationshipDescription)?.isToMany ?? false
                properties[name] = PropertyPolicy(kind: toMany ? .toMany : .value, merge: merge)
            }
            entities[entity.name] = EntityPolicies(delete: try Self.deletePolicy(of: entity), properties: properties)
        }
        self.entities = entities
        self.resolvers = resolvers
    }

    /// The entity's own delete policy, or its nearest superentity's, or the default.
    private static func deletePolicy(of entity: EntityDescription) throws(SyncError) -> SyncDeletePolicy {
        var current: EntityDescription? = entity
        while let declaring = current {
            if declaring.userInfo[SyncDeletePolicy.userInfoKey] != nil {
                return try SyncDeletePolicy(userInfo: declaring.userInfo, entity: declaring.name)
            }
            current = declaring.superentity
        }
        return .deleteWins
    }

    /// The merge policy of an entity's property (inherited ones too), nil when
    /// the model has no such stored property.
    public func mergePolicy(entity: String, property: String) -> SyncMergePolicy? {
        entities[entity]?.properties[property]?.merge
    }

    /// An entity's delete policy, nil when the model has no such entity.
    public func deletePolicy(entity: String) -> SyncDeletePolicy? {
        entities[entity]?.delete
    }

    func policies(of entity: String) -> EntityPolicies? { entities[entity] }
}
