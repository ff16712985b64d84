import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - Batch requests: the shared SQL

extension TableLayout {
    /// The rows of one table a batch request works on, as a condition on the
    /// table aliased `t0`: the entity test, then the fetch's predicate. A
    /// predicate that follows a to-one becomes `t0.Z_PK IN (SELECT … JOIN …)`,
    /// since an `UPDATE` or `DELETE` cannot join. Shared by the SQLite store's
    /// `BatchSelection` and ``StoreLayout/batchSelection(for:)``.
    ///
    /// - Throws: ``ObjectGraphError/Code-swift.struct/predicateDoesNotCompile``.
    package func batchCondition(for fetch: StoreFetch) throws
        -> (table: String, entityNumbers: [Int64], condition: String?, bindings: [PropertyValue]) {
        let mapping = try mapping(for: fetch.entity)
        let entityNumbers = fetch.includesSubentities ? mapping.numbersWithDescendants : [mapping.number]
        var conditions = SelectQuery.entityConditions(for: fetch, schema: self)
        var bindings: [PropertyValue] = []
        do {
            if let predicate = fetch.predicate, let compiled = try predicate.sqlCondition(for: fetch.entity, schema: self) {
                if compiled.joins.isEmpty {
                    conditions.append("(\(compiled.where))")
                } else {
                    // The subquery's own `t0` hides the statement's, and is the same table.
                    conditions.append("t0.Z_PK IN (SELECT t0.Z_PK FROM \(mapping.table) t0 \(compiled.joins.joined(separator: " ")) WHERE \(compiled.where))")
                }
                bindings = compiled.bindings
            }
        } catch {
            throw ObjectGraphError.predicateDoesNotCompile(predicate: fetch.predicate?.description ?? "", entity: fetch.entity.name,
                                                           reason: "\(error)")
        }
        return (mapping.table, entityNumbers, conditions.isEmpty ? nil : conditions.joined(separator: " AND "), bindings)
    }

    /// The `SET` list of a batch update, without the version's: `column = value`
    /// per attribute, its constants numbered after `parametersBefore`. A computed
    /// value of an integer attribute is truncated (``SQLDialect/truncatedToInteger(_:)``);
    /// with external binary storage it is tagged inline (the SQLite store's files).
    ///
    /// - Throws: ``ObjectGraphError/Code-swift.struct/unknownKey`` for an attribute without a column;
    ///   ``FetchExpressionError`` for a value that does not compile.
    package func batchAssignments(_ values: [(attribute: AttributeDescription, value: FetchExpression)], of entity: EntityDescription,
                                  parametersBefore: Int) throws -> (assignments: [String], bindings: [PropertyValue]) {
        let mapping = try mapping(for: entity)
        var bindings: [PropertyValue] = []
        var assignments: [String] = []
        for (attribute, value) in values {
            guard let column = mapping.columns[attribute.index]?.name else {
                throw ObjectGraphError.unknownKey(attribute.name, entity: entity.name)
            }
            // Constants are bound as a save binds them, after the condition's parameters.
            let compiled = try value.sql(for: entity, schema: self, rootAlias: "t0", parametersBefore: parametersBefore + bindings.count)
            assert(compiled.joins.isEmpty, "the context refuses key paths through relationships")
            bindings += compiled.bindings
            let sql = attribute.type.integerRange != nil ? dialect.truncatedToInteger(compiled.sql)
                : attribute.storesExternalBinaryData && dialect.storesExternalBinaryData ? "CAST(X'01' || \(compiled.sql) AS BLOB)"
                : compiled.sql
            assignments.append("\(column) = \(sql)")
        }
        return (assignments, bindings)
    }
}

/// What a store that is not SQLite needs to run batch updates and deletes as
/// set-based SQL: the same condition, `SET` list and history masks as the
/// SQLite store's batches, in the layout's dialect.
@_spi(StoreImplementation)
extension StoreLayout {
    /// The rows of one table a batch request selects (``TableLayout/batchCondition(for:)``).
    public struct BatchSelection: Sendable {
        /// The table holding the rows.
        public let table: String
        /// The `Z_ENT` numbers of the entities selected.
        public let entityNumbers: [Int64]
        /// The condition on the table aliased `t0`, or nil for every row.
        public let condition: String?
        /// The condition's parameters, numbered from 1 in it.
        public let bindings: [StoredValue]

        /// ` WHERE <condition>`, or nothing for every row.
        public var whereClause: String { condition.map { " WHERE " + $0 } ?? "" }

        /// `SELECT t0.Z_PK FROM <table> t0 WHERE <condition>`: the selected keys, for a subquery.
        public var keysQuery: String { "SELECT t0.Z_PK FROM \(table) t0\(whereClause)" }
    }

    /// The rows a batch request's fetch selects, as a condition on their table.
    ///
    /// - Throws: ``ObjectGraphError/Code-swift.struct/predicateDoesNotCompile``
    ///   for a predicate the dialect cannot express, saying why.
    public func batchSelection(for fetch: StoreFetch) throws -> BatchSelection {
        let condition = try schema.batchCondition(for: fetch)
        return BatchSelection(table: condition.table, entityNumbers: condition.entityNumbers, condition: condition.condition,
                              bindings: condition.bindings.map(StoredValue.init))
    }

    /// `UPDATE <table> AS t0 SET …, Z_OPT = Z_OPT + 1 WHERE <condition> <returning>`
    /// and its parameters: the selection's, then the new values' constants.
    public func batchUpdate(_ update: StoreBatchUpdate, selection: BatchSelection,
                            returning: String) throws -> (sql: String, bindings: [StoredValue]) {
        let set = try schema.batchAssignments(update.values, of: update.fetch.entity, parametersBefore: selection.bindings.count)
        let list = (set.assignments + ["Z_OPT = Z_OPT + 1"]).joined(separator: ", ")
        return ("UPDATE \(selection.table) AS t0 SET \(list)\(selection.whereClause) \(returning)",
                selection.bindings + set.bindings.map(StoredValue.init))
    }

    /// The integer attributes narrower than 64 bits a batch update computes
    /// (not constants, which were checked), with their columns and ranges:
    /// a store checks the written rows against them before it commits.
    public func narrowIntegerChecks(of update: StoreBatchUpdate) throws
        -> [(attribute: AttributeDescription, column: String, range: ClosedRange<Int64>)] {
        let mapping = try schema.mapping(for: update.fetch.entity)
        return update.values.compactMap { attribute, value in
            guard let range = attribute.type.integerRange, range != Int64.min...Int64.max, !value.node.isConstant,
                  let column = mapping.columns[attribute.index]?.name else { return nil }
            return (attribute, column, range)
        }
    }

    /// The column of each attribute, in the order given (a batch insert's rows).
    ///
    /// - Throws: ``ObjectGraph/ObjectGraphError/Code-swift.struct/unknownKey`` for an attribute without a column.
    public func attributeColumns(of attributes: [AttributeDescription], in entity: EntityDescription) throws -> [String] {
        let mapping = try schema.mapping(for: entity)
        return try attributes.map { attribute in
            guard let column = mapping.columns[attribute.index]?.name else { throw ObjectGraphError.unknownKey(attribute.name, entity: entity.name) }
            return column
        }
    }

    /// The join tables that name rows of `table`, each with the column that does.
    public func joinTableColumns(naming table: String) -> [(table: String, column: String)] {
        schema.joinTables.flatMap { join -> [(table: String, column: String)] in
            var columns: [(table: String, column: String)] = []
            if join.ownerTable == table { columns.append((join.name, join.ownerColumn)) }
            if join.memberTable == table { columns.append((join.name, join.memberColumn)) }
            return columns
        }
    }

    /// The columns of `relationships` (to-ones of `entity`): each foreign key
    /// and its entity column, which a delete rule's nullify sets to NULL.
    public func toOneColumns(of relationships: [RelationshipDescription], in entity: EntityDescription) throws -> [String] {
        let mapping = try schema.mapping(for: entity)
        var columns: [String] = []
        for relationship in relationships {
            guard let column = mapping.columns[relationship.index] else { continue }
            columns.append(column.name)
            if case .toOne(let entityColumn?) = column.kind { columns.append(entityColumn) }
        }
        return columns
    }

    /// `ACHANGE.ZCOLUMNS` of a batch update of `attributes` for a row of the
    /// entity numbered `number`, as the SQLite store's batches record it.
    ///
    /// - Throws: ``PersistentStoreError`` for an entity without a history layout.
    public func batchHistoryColumns(entityNumbered number: Int64, attributes: [AttributeDescription]) throws -> Data {
        guard let entity = history.entitiesByNumber[number] else {
            throw PersistentStoreError(.ioFailure, url: nil, message: "the history cannot record entity number \(number): it has no history layout")
        }
        return Data(entity.columnsMask(slots: attributes.map(\.index).filter { $0 < entity.bitsOfSlot.count }))
    }
}
