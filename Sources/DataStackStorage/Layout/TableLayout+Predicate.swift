import Foundation
@_spi(StoreImplementation) import ObjectGraph

// The SQLite layout, as the predicate compiler sees it: columns, to-one joins and
// to-many sources for EXISTS and aggregate subqueries.
extension TableLayout: PredicateSQLSchema {
    package func columnSQL(for property: PropertyDescription, alias: String) throws -> String {
        guard let entity = property.entity, let column = try mapping(for: entity).columns[property.index] else {
            throw ObjectGraphError.unknownKey(property.name, entity: property.entity?.name ?? "?")
        }
        return "\(alias).\(column.name)"
    }

    package func toOneJoin(_ relationship: RelationshipDescription, fromAlias: String, toAlias: String) throws -> String {
        guard let destination = relationship.destinationEntity else { throw ObjectGraphError.unknownEntity(relationship.destinationEntityName) }
        return "LEFT JOIN \(try mapping(for: destination).table) \(toAlias) ON \(toAlias).Z_PK = \(try columnSQL(for: relationship, alias: fromAlias))"
    }

    package func toManySource(_ relationship: RelationshipDescription, fromAlias: String, toAlias: String) throws -> (from: String, correlation: String) {
        if let path = joinPath(for: relationship) {
            // Many-to-many (or no inverse): through its join table (TableLayout+Relationships.swift).
            let join = toAlias + "_j"
            return ("\(path.table.name) \(join) JOIN \(path.destinationTable) \(toAlias) ON \(toAlias).Z_PK = \(join).\(path.destinationColumn)",
                    "\(join).\(path.sourceColumn) = \(fromAlias).Z_PK")
        }
        guard let destination = relationship.destinationEntity, let inverse = relationship.inverseRelationship, !inverse.isToMany else {
            throw ObjectGraphError.unknownKey(relationship.name, entity: relationship.entity?.name ?? "?")
        }
        let mapping = try mapping(for: destination)
        var correlation = "\(try columnSQL(for: inverse, alias: toAlias)) = \(fromAlias).Z_PK"
        if let table = table(named: mapping.table), table.holdsSeveralEntities, destination.superentity != nil || !destination.subentities.isEmpty {
            correlation += " AND \(toAlias).Z_ENT IN (\(mapping.numbersWithDescendants.map(String.init).joined(separator: ",")))"
        }
        return ("\(mapping.table) \(toAlias)", correlation)
    }

    package func primaryKeySQL(alias: String) -> String { "\(alias).Z_PK" }
}

extension FetchPredicate {
    package func sqlCondition(for entity: EntityDescription, schema: TableLayout) throws -> (where: String, joins: [String], bindings: [PropertyValue])? {
        try sql(for: entity, schema: schema, rootAlias: "t0")
    }
}
