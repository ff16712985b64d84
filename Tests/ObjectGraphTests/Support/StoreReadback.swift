import Foundation
import ObjectGraph

/// Checkers that compare what a context reads from a real Core Data store with
/// what SQLite itself holds (``FixtureSQLite``), one line per difference naming
/// the entity, the primary key and the two values. Empty when they agree.
///
/// Each runs on the context's queue (call it inside `performAndWait`) and
/// fetches every entity of the reference's model without its subentities.
enum StoreReadback {
    /// Counts per entity, and each row's text values against its object's
    /// strings, whichever column holds them: a column given to the wrong
    /// property shows as a difference without relying on column names.
    static func stringMismatches(in context: ManagedObjectContext, with reference: FixtureSQLite) throws -> [String] {
        var mismatches: [String] = []
        var objectsRead = 0
        for entity in reference.model.entities {
            let objects = try objectsOf(entity, in: context)
            let rows = try reference.rows(of: entity)
            objectsRead += objects.count
            if objects.count != rows.count {
                mismatches.append("\(entity.name): \(objects.count) objects, \(rows.count) rows with its Z_ENT")
            }
            let stringAttributes = entity.attributesByName.values.filter { !$0.isTransient && ($0.type == .string || $0.type == .uri) }
            for object in objects {
                guard let pk = object.objectID.primaryKey, let row = rows[pk] else {
                    mismatches.append("\(entity.name): fetched \(object.objectID), which has no row")
                    continue
                }
                var read: [String] = []
                for attribute in stringAttributes {
                    switch try object.value(forKey: attribute.name) {
                    case let string as String: read.append(string)
                    case let url as URL: read.append(url.absoluteString)
                    default: break
                    }
                }
                let stored = row.values.compactMap { value -> String? in
                    if case .text(let text) = value { return text }
                    return nil
                }
                if read.sorted() != stored.sorted() {
                    mismatches.append("\(entity.name) \(pk): strings read \(read.sorted()), SQLite has \(stored.sorted())")
                }
            }
        }
        if objectsRead == 0 { mismatches.append("no object was read at all") }
        return mismatches
    }

    /// Counts per entity, and every persistent attribute of every row against
    /// its column (`Z` + the upper-cased name), as Core Data stores the type.
    static func attributeMismatches(in context: ManagedObjectContext, with reference: FixtureSQLite) throws -> [String] {
        var mismatches: [String] = []
        for entity in reference.model.entities {
            let objects = try objectsOf(entity, in: context)
            let rows = try reference.rows(of: entity)
            if objects.count != rows.count {
                mismatches.append("\(entity.name): \(objects.count) objects fetched, \(rows.count) rows with its Z_ENT")
            }
            for object in objects {
                guard let pk = object.objectID.primaryKey, let row = rows[pk] else {
                    mismatches.append("\(entity.name): fetched \(object.objectID), which has no row")
                    continue
                }
                for (name, attribute) in entity.attributesByName.sorted(by: { $0.key < $1.key }) where !attribute.isTransient {
                    guard let stored = row[reference.column(for: attribute, in: entity)] else {
                        mismatches.append("\(entity.name).\(name): no column \(reference.column(for: attribute, in: entity))")
                        continue
                    }
                    let value = try object.value(forKey: name)
                    if !FixtureSQLite.Value.matches(value, stored, type: attribute.type) {
                        mismatches.append("\(entity.name) \(pk).\(name): read \(String(describing: value)), SQLite has \(stored)")
                    }
                }
            }
        }
        return mismatches
    }

    /// Each to-one against the row its key column names, and each to-many
    /// against the keys the file records for it (``FixtureSQLite/destinationKeys(of:from:primaryKey:)``).
    static func relationshipMismatches(in context: ManagedObjectContext, with reference: FixtureSQLite) throws -> [String] {
        var mismatches: [String] = []
        for entity in reference.model.entities {
            let relationships = entity.relationshipsByName.sorted { $0.key < $1.key }.filter { !$0.value.isTransient }
            guard !relationships.isEmpty else { continue }
            let rows = try reference.rows(of: entity)
            for object in try objectsOf(entity, in: context) {
                guard let pk = object.objectID.primaryKey, let row = rows[pk] else { continue }
                for (name, relationship) in relationships {
                    let value = try object.value(forKey: name)
                    if !relationship.isToMany {
                        let stored = row[reference.column(for: relationship, in: entity)] ?? .null
                        let key = (value as? ManagedObject)?.objectID.primaryKey
                        if FixtureSQLite.Value.integerOrNil(stored) != key {
                            mismatches.append("\(entity.name) \(pk).\(name): to-one reads \(key.map(String.init) ?? "nil"), SQLite has \(stored)")
                        }
                        continue
                    }
                    guard let expected = try reference.destinationKeys(of: relationship, from: entity, primaryKey: pk) else {
                        continue   // a to-many without inverse: no layout confirmed by the corpus
                    }
                    let actual: [Int64]
                    if let ordered = value as? [ManagedObject] {
                        actual = ordered.compactMap(\.objectID.primaryKey)
                    } else if let set = value as? Set<ManagedObject> {
                        actual = set.compactMap(\.objectID.primaryKey).sorted()
                    } else {
                        mismatches.append("\(entity.name) \(pk).\(name): to-many reads \(String(describing: value))")
                        continue
                    }
                    let wanted = relationship.isOrdered ? expected : expected.sorted()
                    if actual != wanted {
                        mismatches.append("\(entity.name) \(pk).\(name): reads \(actual), SQLite has \(wanted)")
                    }
                }
            }
        }
        return mismatches
    }

    /// The objects of exactly this entity, not of its subentities.
    private static func objectsOf(_ entity: EntityDescription, in context: ManagedObjectContext) throws -> [ManagedObject] {
        var request = FetchRequest<ManagedObject>(entityName: entity.name)
        request.includesSubentities = false
        return try context.fetch(request)
    }
}
