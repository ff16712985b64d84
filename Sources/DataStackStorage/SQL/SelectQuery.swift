import Foundation
@_spi(StoreImplementation) import ObjectGraph

/// The SQL of one fetch: select list, joins for to-one key paths, the entity
/// and predicate restriction, ordering and limits. Values are always bound
/// parameters; only names from the model and the file's schema enter the SQL.
package struct SelectQuery {
    package private(set) var sql = ""
    package private(set) var bindings: [PropertyValue] = []
    /// For dictionary results: the column read at each position.
    package private(set) var dictionaryColumns: [(name: String, type: AttributeType)] = []
    /// For dictionary results: the names of the columns with external binary storage.
    package private(set) var externalDictionaryColumns: Set<String> = []

    private let schema: TableLayout
    private var joins: [String] = []
    private var joinAliases: [[String]: String] = [:]

    package init(fetch: StoreFetch, schema: TableLayout) throws {
        self.schema = schema
        let mapping = try schema.mapping(for: fetch.entity)
        guard let table = schema.table(named: mapping.table) else { throw ObjectGraphError.noStore(entity: fetch.entity.name) }

        var conditions = Self.entityConditions(for: fetch, schema: schema)
        var from = "\(table.name) t0"
        if let predicate = fetch.predicate, let list = Self.keyListJoin(of: predicate, entity: fetch.entity, mapping: mapping, schema: schema) {
            // The list drives the query (see keyListJoin): its JSON array is the first parameter.
            bindings.append(.string(list.json))
            from = "\(list.rows) CROSS JOIN \(table.name) t0"
            conditions.append("t0.\(list.column) = \(list.value)")
        } else if let predicate = fetch.predicate, let compiled = try predicate.sqlCondition(for: fetch.entity, schema: schema) {
            conditions.append("(\(compiled.where))")
            for join in compiled.joins where !joins.contains(join) { joins.append(join) }
            bindings.append(contentsOf: compiled.bindings)
        }

        var orderings: [String] = []
        if fetch.resultType != .count {
            for sort in fetch.sortDescriptors {
                let column = try columnExpression(for: sort.keyPath, from: fetch.entity)
                var expression = "\(column.alias).\(column.name)"
                if let query = sort.relevanceQuery {
                    let parameter = schema.dialect.placeholder(bindings.count + 1)
                    let relevance: String?
                    let value: String
                    do {
                        relevance = try schema.searchRelevanceSQL(table: column.table, column: column.name, alias: column.alias,
                                                                  query: query, parameter: parameter)
                        value = try schema.dialect.searchRelevanceValue(query)
                    } catch let problem as PredicateProblem {
                        throw problem.error(format: "relevance sort on \(sort.key)")
                    }
                    guard let relevance else {
                        throw FetchPredicateError(format: sort.keyPath.joined(separator: "."),
                                                  message: "a relevance sort needs a full-text index, which this store has not")
                    }
                    bindings.append(.string(value))
                    expression = relevance
                } else if sort.caseInsensitive {
                    expression = schema.dialect.caseInsensitiveOrder(expression)
                }
                orderings.append(expression + (sort.ascending ? " ASC" : " DESC"))
            }
        }

        let selectList: String
        switch fetch.resultType {
        case .count:
            selectList = "COUNT(*)"
        case .managedObjectID:
            selectList = "t0.Z_PK, t0.Z_ENT"
        case .managedObject:
            selectList = schema.selectColumns(of: table, alias: "t0")
        case .dictionary:
            let names = fetch.propertiesToFetch ?? fetch.entity.slotProperties.compactMap { ($0 as? AttributeDescription)?.isTransient == false ? $0.name : nil }
            var columns: [String] = []
            for name in names {
                guard let attribute = fetch.entity.propertiesByName[name] as? AttributeDescription,
                      let column = mapping.columns[attribute.index] else { continue }
                columns.append("t0.\(column.name)")
                dictionaryColumns.append((name, attribute.type))
                if attribute.storesExternalBinaryData { externalDictionaryColumns.insert(name) }
            }
            selectList = (fetch.returnsDistinctResults ? "DISTINCT " : "") + (columns.isEmpty ? "t0.Z_PK" : columns.joined(separator: ", "))
        }

        var sql = "SELECT \(selectList) FROM \(from)"
        for join in joins { sql += " " + join }
        if !conditions.isEmpty { sql += " WHERE " + conditions.joined(separator: " AND ") }
        if !orderings.isEmpty { sql += " ORDER BY " + orderings.joined(separator: ", ") }
        if fetch.resultType != .count {
            if fetch.fetchLimit > 0 { sql += " LIMIT \(fetch.fetchLimit)" }
            // SQLite takes an OFFSET only after a LIMIT.
            let noLimit = fetch.fetchLimit > 0 ? "" : " LIMIT \(schema.dialect.noLimit)"
            if fetch.fetchOffset > 0 { sql += noLimit + " OFFSET \(fetch.fetchOffset)" }
        } else if fetch.fetchLimit > 0 || fetch.fetchOffset > 0 {
            sql = "SELECT COUNT(*) FROM (SELECT 1 FROM \(from)"
                + joins.map { " " + $0 }.joined()
                + (conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND "))
                + " LIMIT \(fetch.fetchLimit > 0 ? String(fetch.fetchLimit) : schema.dialect.noLimit)"
                + " OFFSET \(fetch.fetchOffset)) AS counted"
        }
        self.sql = sql
    }

    /// The `Z_ENT` test that keeps the fetched entities' rows of a shared table (none when the table holds only them).
    package static func entityConditions(for fetch: StoreFetch, schema: TableLayout) -> [String] {
        guard let mapping = schema.mappings[ObjectIdentifier(fetch.entity)], let table = schema.table(named: mapping.table) else { return [] }
        let numbers = fetch.includesSubentities ? mapping.numbersWithDescendants : [mapping.number]
        let tableNumbers = Set(table.root.selfAndDescendants.compactMap { schema.mappings[ObjectIdentifier($0)]?.number })
        if Set(numbers) == tableNumbers { return [] }
        return [numbers.count == 1 ? "t0.Z_ENT = \(numbers[0])" : "t0.Z_ENT IN (\(numbers.map(String.init).joined(separator: ",")))"]
    }

    /// The column for a key path, joining the tables of the to-one relationships it crosses.
    private mutating func columnExpression(for keyPath: [String], from entity: EntityDescription) throws -> (alias: String, name: String, table: String) {
        let path = try ToOneKeyPath(keyPath, from: entity)
        func column(at position: Int) throws -> String {
            guard let column = try schema.mapping(for: path.entities[position]).columns[path.properties[position].index] else {
                throw ObjectGraphError.unknownKey(path.key, entity: entity.name)
            }
            return column.name
        }
        var alias = "t0"
        for position in path.properties.indices.dropLast() {
            let foreignKey = try column(at: position)
            let joined = Array(keyPath[...position])
            if let existing = joinAliases[joined] {
                alias = existing
            } else {
                let next = "j\(joinAliases.count + 1)"
                let destinationTable = try schema.mapping(for: path.entities[position + 1]).table
                joins.append("LEFT JOIN \(destinationTable) \(next) ON \(next).Z_PK = \(alias).\(foreignKey)")
                joinAliases[joined] = next
                alias = next
            }
        }
        let last = path.properties.count - 1
        return (alias, try column(at: last), try schema.mapping(for: path.entities[last]).table)
    }
}
