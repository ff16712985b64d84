/// A key path that runs through to-one relationships to a property, checked
/// against the entity it starts from: `company.sector.name` on `StockUpdate`.
///
/// Sorts, section names and the columns a fetch joins all follow such paths.
/// This is the one place that checks a path against the model and walks it:
/// the SQL compiler joins a table per relationship, and objects and stored
/// rows are read along it with ``value(from:at:read:destination:)``.
///
/// A destination's properties keep their slot indexes in its subentities, so
/// a path resolved against the declared entities reads any object on it.
package struct ToOneKeyPath: Sendable {
    /// The properties along the path, each read on the destination of the one
    /// before it: every one but the last is a to-one relationship.
    package let properties: [PropertyDescription]

    /// The entity each of ``properties`` is read on, the path's root first.
    package let entities: [EntityDescription]

    /// The path as written, dot-separated, for messages.
    package let key: String

    /// Resolves `keyPath` from `entity`.
    ///
    /// - Throws: ``ObjectGraphError/Code-swift.struct/unknownKey``: naming the key
    ///   and the entity it is read on when that entity has no such property;
    ///   naming the whole path and its root when a step before the last is not
    ///   a to-one relationship, or when the path is empty.
    package init(_ keyPath: [String], from entity: EntityDescription) throws(ObjectGraphError) {
        key = keyPath.joined(separator: ".")
        if keyPath.isEmpty { throw ObjectGraphError.unknownKey("", entity: entity.name) }
        var properties: [PropertyDescription] = []
        var entities: [EntityDescription] = []
        var current = entity
        for (position, name) in keyPath.enumerated() {
            let property = try current.property(forKey: name)
            properties.append(property)
            entities.append(current)
            if position == keyPath.count - 1 { break }
            guard let relationship = property as? RelationshipDescription, !relationship.isToMany,
                  let destination = relationship.destinationEntity else {
                throw ObjectGraphError.unknownKey(key, entity: entity.name)
            }
            current = destination
        }
        self.properties = properties
        self.entities = entities
    }

    /// The property the path ends at.
    package var property: PropertyDescription { properties[properties.count - 1] }

    /// The value at the end of the path from `subject`, reading each property
    /// with `read` and moving to each to-one destination with `destination`;
    /// nil past a nil relationship or a destination `destination` does not
    /// find. Starts at the property at `position` (a walk that has already
    /// taken the steps before it).
    package func value<Subject>(from subject: Subject, at position: Int = 0,
                                read: (Subject, PropertyDescription) throws -> PropertyValue,
                                destination: (ObjectID) throws -> Subject?) rethrows -> PropertyValue {
        var subject = subject
        for property in properties[position...].dropLast() {
            guard case .object(let id) = try read(subject, property), let next = try destination(id) else { return .null }
            subject = next
        }
        return try read(subject, property)
    }
}
