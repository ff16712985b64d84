import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - Required values after a custom migration stage

extension StoreLayout {
    /// The required attributes and to-one relationships of the layout's
    /// entities that some rows in `database` have no value for, one line each
    /// ("Person.firstName is a required attribute, but 2 Person rows have no
    /// value for it"); empty when every row has them all.
    ///
    /// A custom stage of a staged migration may leave required values empty
    /// for its `didMigrate` handler to fill; the store checks them with this
    /// after the handler, before the stage counts as done.
    ///
    /// - Complexity: one scan per entity with required properties.
    public func rowsMissingRequiredValues(in database: some MigratingDatabase) throws -> [String] {
        let dialect = database.dialect
        var problems: [String] = []
        for mapping in schema.mappings.values.sorted(by: { $0.entity.name < $1.entity.name }) {
            let entity = mapping.entity
            let required = entity.properties.compactMap { property -> (PropertyDescription, String)? in
                guard !property.isOptional, !property.isTransient, property.index >= 0,
                      property.index < mapping.columns.count,
                      let column = mapping.columns[property.index] else { return nil }   // to-many: no column
                return (property, column.name)
            }
            guard !required.isEmpty, !mapping.numbersWithDescendants.isEmpty else { continue }
            // count(*) - count(column): the NULLs, in SQL every dialect speaks.
            let nullCounts = required.map { "count(*) - count(\(dialect.quotedIdentifier($0.1)))" }.joined(separator: ", ")
            let numbers = mapping.numbersWithDescendants.map(String.init).joined(separator: ",")
            var counts: [Int64] = []
            try database.query("SELECT \(nullCounts) FROM \(dialect.quotedIdentifier(mapping.table)) WHERE Z_ENT IN (\(numbers))", []) { row in
                counts = try required.indices.map { try row.int64(at: $0) }
            }
            for ((property, _), empty) in zip(required, counts) where empty > 0 {
                problems.append("""
                    \(entity.name).\(property.name) is a required \(property.kindName), \
                    but \(empty) \(entity.name) row\(empty == 1 ? " has" : "s have") no value for it
                    """)
            }
        }
        return problems
    }
}
