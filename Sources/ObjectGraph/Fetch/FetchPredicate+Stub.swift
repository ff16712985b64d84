// TEMPORARY: replaced by Fetch/Predicate/ when the predicate work lands.
public struct FetchPredicate: Sendable, Hashable {
    package func evaluate(with subject: any PredicateSubject) throws -> Bool { true }
    package func validate(for entity: EntityDescription) throws {}
}
package protocol PredicateSubject {
    func predicateValue(forKey key: String) throws -> PredicateValue
    var predicateObjectID: ObjectID? { get }
}
package indirect enum PredicateValue {
    case value(PropertyValue)
    case subject(any PredicateSubject)
    case collection([PredicateValue])
}
package protocol PredicateArgumentConvertible {
    var predicateArgument: PropertyValue { get }
}
extension FetchPredicate {
    func sqlCondition(for entity: EntityDescription, schema: SQLiteSchema) throws -> (where: String, joins: [String], bindings: [PropertyValue])? { nil }
}
