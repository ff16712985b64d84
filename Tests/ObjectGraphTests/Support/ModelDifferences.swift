import Foundation
import ObjectGraph

/// Every difference between two models that a store or a context could
/// notice: entity by entity, property by property, each as one line naming
/// the entity, the property and the two values. Empty when they are the same
/// model.
enum ModelDifferences {
    /// - Parameter classNamesMayBeMissing: whether `actual` may lack class names
    ///   `expected` has (a model Core Data cached after migrating a store has none).
    static func between(_ expected: ManagedObjectModel, _ actual: ManagedObjectModel, classNamesMayBeMissing: Bool = false) -> [String] {
        var differences = Recorder(context: "")
        func check<T: Equatable>(_ what: String, _ a: T, _ b: T) { differences.check(what, a, b) }
        check("version identifiers", expected.versionIdentifiers, actual.versionIdentifiers)
        check("configurations", expected.configurations.mapValues { $0.sorted() }, actual.configurations.mapValues { $0.sorted() })
        let actualEntities = actual.entitiesByName
        check("entities", Set(expected.entitiesByName.keys), Set(actualEntities.keys))
        for e in expected.entities.sorted(by: { $0.name < $1.name }) {
            guard let a = actualEntities[e.name] else { continue }
            let name = e.name
            if !(classNamesMayBeMissing && a.managedObjectClassName == nil) {
                check("\(name) class name", e.managedObjectClassName, a.managedObjectClassName)
            }
            check("\(name) abstract", e.isAbstract, a.isAbstract)
            check("\(name) superentity", e.superentity?.name, a.superentity?.name)
            check("\(name) subentities", Set(e.subentities.map(\.name)), Set(a.subentities.map(\.name)))
            check("\(name) version hash modifier", e.versionHashModifier, a.versionHashModifier)
            check("\(name) user info", e.userInfo, a.userInfo)
            check("\(name) uniqueness constraints", Set(e.uniquenessConstraints), Set(a.uniquenessConstraints))
            check("\(name) fetch indexes", Set(e.indexes), Set(a.indexes))
            let actualProperties = a.propertiesByName
            check("\(name) own properties", Set(e.properties.map(\.name)), Set(a.properties.map(\.name)))
            for p in e.properties.sorted(by: { $0.name < $1.name }) {
                guard let q = actualProperties[p.name] else { continue }
                differences.lines += propertyDifferences(p, q, in: "\(name).\(p.name)")
            }
            check("\(name) version hash", e.versionHash, a.versionHash)
        }
        return differences.lines
    }

    /// Collects one line per pair of values that differ.
    private struct Recorder {
        let context: String
        var lines: [String] = []
        mutating func check<T: Equatable>(_ what: String, _ a: T, _ b: T) {
            if a != b { lines.append("\(context)\(what): expected \(a), got \(b)") }
        }
    }

    private static func propertyDifferences(_ p: PropertyDescription, _ q: PropertyDescription, in context: String) -> [String] {
        var differences = Recorder(context: "\(context) ")
        func check<T: Equatable>(_ what: String, _ a: T, _ b: T) { differences.check(what, a, b) }
        check("kind", String(describing: type(of: p)), String(describing: type(of: q)))
        check("optional", p.isOptional, q.isOptional)
        check("transient", p.isTransient, q.isTransient)
        check("version hash modifier", p.versionHashModifier, q.versionHashModifier)
        check("user info", p.userInfo, q.userInfo)
        if let a = p as? AttributeDescription, let b = q as? AttributeDescription {
            check("type", a.type, b.type)
            check("default", a.defaultValue, b.defaultValue)
            check("minimum", a.minimumValue, b.minimumValue)
            check("maximum", a.maximumValue, b.maximumValue)
            check("minimum length", a.minimumLength, b.minimumLength)
            check("maximum length", a.maximumLength, b.maximumLength)
            check("regular expression", a.regularExpression, b.regularExpression)
            check("indexed", a.isIndexed, b.isIndexed)
            check("value transformer", a.valueTransformerName, b.valueTransformerName)
            check("preserved in history", a.preservesValueInHistoryOnDeletion, b.preservesValueInHistoryOnDeletion)
            check("external storage", a.allowsExternalBinaryDataStorage, b.allowsExternalBinaryDataStorage)
        }
        if let a = p as? RelationshipDescription, let b = q as? RelationshipDescription {
            check("destination", a.destinationEntityName, b.destinationEntityName)
            check("inverse", a.inverseName, b.inverseName)
            check("to-many", a.isToMany, b.isToMany)
            check("ordered", a.isOrdered, b.isOrdered)
            check("delete rule", a.deleteRule, b.deleteRule)
            check("minimum count", a.minCount, b.minCount)
            check("maximum count", a.maxCount, b.maxCount)
        }
        return differences.lines
    }
}
