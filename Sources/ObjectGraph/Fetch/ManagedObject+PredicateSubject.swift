import Foundation

// Managed objects are what the in-memory evaluator walks for pending changes.
extension ManagedObject: PredicateSubject {
    public func predicateValue(forKey key: String) throws -> PredicateValue {
        let property = try entity.property(forKey: key)
        try loadValues()
        let value = slots[property.index]
        guard let relationship = property as? RelationshipDescription else { return .value(value) }
        let objects = try relatedObjects(value, for: relationship)
        if relationship.isToMany { return .collection(objects.map { .subject($0) }) }
        return objects.first.map { .subject($0) } ?? .value(.null)
    }

    public var predicateObjectID: ObjectID? { objectID }
}

extension ManagedObject: PredicateArgumentConvertible {
    public var predicateArgument: PropertyValue { .object(objectID) }
}
