import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - One destination table's mapping

extension MappingModel {
    /// Infers where the rows and columns of one destination table come from:
    /// for each property of its hierarchy, the store column it is copied from
    /// (under its name or renaming identifier, of a type that holds its
    /// values), the default filled where it has no value, the rank of an
    /// ordered inverse, and the to-one keys cleaned after copying. What cannot
    /// be inferred is gathered in ``problems``, one line per property.
    struct TableInference {
        let table: TableLayout.Table
        let schema: TableLayout
        let numbers: [String: Int64]
        let source: StoreSchemaSnapshot
        let sourceOf: [ObjectIdentifier: StoreSchemaSnapshot.Entity]
        /// The root of the store's hierarchy the rows come from; nil for a table that starts empty.
        let sourceRoot: StoreSchemaSnapshot.Entity?
        let requiresValues: Bool
        let countRows: CountRows
        let countRowsOutside: CountRowsOutside?

        private(set) var mapping: TableMapping
        private(set) var problems: [String] = []
        /// Store columns already mapped to a property (upper-cased), each used once.
        private var usedSourceColumns = Set<String>()

        init(table: TableLayout.Table, schema: TableLayout, numbers: [String: Int64], source: StoreSchemaSnapshot,
             sourceOf: [ObjectIdentifier: StoreSchemaSnapshot.Entity], sourceRoot: StoreSchemaSnapshot.Entity?,
             requiresValues: Bool, countRows: @escaping CountRows, countRowsOutside: CountRowsOutside?) {
            self.table = table
            self.schema = schema
            self.numbers = numbers
            self.source = source
            self.sourceOf = sourceOf
            self.sourceRoot = sourceRoot
            self.requiresValues = requiresValues
            self.countRows = countRows
            self.countRowsOutside = countRowsOutside
            mapping = TableMapping(table: table, sourceTable: sourceRoot?.table, sourceMaxPrimaryKey: sourceRoot?.maxPrimaryKey ?? 0)
            sourceColumns = sourceRoot?.table.flatMap { source.columns[$0] } ?? [:]
        }

        private var sourceTable: String? { sourceRoot?.table }
        /// The source table's columns, by upper-cased name.
        private let sourceColumns: [String: StoreSchemaSnapshot.Column]

        mutating func infer() throws {
            let hierarchy = table.root.selfAndDescendants
            for entity in hierarchy {
                if let match = sourceEntity(entity), let number = numbers[entity.name] {
                    mapping.entityNumbers.append((match.number, number))
                }
            }
            for entity in hierarchy {
                let entityMapping = try schema.mapping(for: entity)
                for property in entity.properties where !property.isTransient {
                    try infer(property, of: entity, in: entityMapping)
                }
            }
        }

        private mutating func infer(_ property: PropertyDescription, of entity: EntityDescription,
                                    in entityMapping: TableLayout.EntityMapping) throws {
            let label = "\(entity.name).\(property.name)"
            if let relationship = property as? RelationshipDescription, relationship.isToMany {
                try refuseToOneBecomingToMany(relationship, of: entity, label: label)
                return
            }
            guard property.index >= 0, let column = entityMapping.columns[property.index] else { return }
            let expectedType = schema.dialect.columnType(declared: MappingModel.declaredType(of: property))
            var found = MappingModel.sourceColumn(for: property, destination: column.name, in: sourceColumns, excluding: usedSourceColumns)
            if let candidate = found, !MappingModel.typesMatch(candidate.declaredType, expectedType) {
                guard property is RelationshipDescription else {
                    problems.append("\(label) is \(MappingModel.describe(property)) (\(expectedType)) in the model but the store's column \(candidate.name) is \(candidate.declaredType); changing an attribute's type cannot be inferred")
                    return
                }
                // An attribute of the same name was replaced by a relationship: Core Data
                // matches by kind, so the attribute is removed and the relationship added.
                found = nil
            }
            let defaultValue = (property as? AttributeDescription)?.defaultValue ?? .null
            if let found {
                usedSourceColumns.insert(found.name.uppercased())
                if let attribute = property as? AttributeDescription, try !acceptsTypeChange(of: attribute, of: entity, in: found, label: label) {
                    return
                }
                mapping.columns.append((column.name, found.name))
                try fillIfNewlyRequired(property, of: entity, column: column.name, from: found, defaultValue: defaultValue, label: label)
                copyRank(of: property, with: found)
            } else {
                try fillNew(property, of: entity, column: column.name, defaultValue: defaultValue, label: label)
            }
            // Dropped: a destination outside this configuration has no table here, so no key to clean.
            if case .toOne(let entityColumn) = column.kind, let relationship = property as? RelationshipDescription,
               let destination = relationship.destinationEntity, let destinationMapping = try? schema.mapping(for: destination) {
                mapping.toOnes.append(ToOne(column: column.name, entityColumn: entityColumn, destinationTable: destinationMapping.table,
                                            destinationNumbers: destinationMapping.numbersWithDescendants, isCopied: found != nil))
            }
        }

        /// A to-many has no column; a to-one's foreign key under its name, over rows, means it was to-one.
        private mutating func refuseToOneBecomingToMany(_ relationship: RelationshipDescription, of entity: EntityDescription,
                                                        label: String) throws {
            let old = "Z" + (relationship.renamingIdentifier ?? relationship.name).uppercased()
            if let column = sourceColumns[old], column.declaredType == schema.dialect.keyType, !usedSourceColumns.contains(old),
               try rows(ofKind: entity) > 0 {
                problems.append("\(label) is to-many in the model but a to-one in the store (column \(column.name)); changing a to-one relationship to to-many cannot be inferred")
            }
        }

        /// Whether the attribute's values in `column` can be read as its type
        /// in the model, given the type the store recorded for it (stores
        /// written here record their model): widened at once, narrowed when
        /// every value fits, else refused.
        private mutating func acceptsTypeChange(of attribute: AttributeDescription, of entity: EntityDescription,
                                                in column: StoreSchemaSnapshot.Column, label: String) throws -> Bool {
            let metadata = source.metadata
            guard let sourceName = sourceEntity(entity)?.name,
                  let before = [attribute.renamingIdentifier, attribute.name].compactMap({ $0 }).lazy.compactMap({
                      ManagedObjectModel.recordedType(of: $0, entity: sourceName, in: metadata)
                  }).first, before != attribute.type else { return true }
            let change = "\(label) was \(before.modelEditorName) in the store and is \(attribute.type.modelEditorName) in the model"
            switch MappingModel.typeChange(from: before, to: attribute.type) {
            case .widening:
                return true
            case .narrowing(let range):
                guard let sourceTable, let countRowsOutside else {
                    problems.append("\(change); narrowing it cannot be checked here")
                    return false
                }
                let outside = try countRowsOutside(sourceTable, sourceNumbers(ofKind: entity), column.name, range)
                guard outside == 0 else {
                    problems.append("\(change), but \(outside) \(entity.name) row\(outside == 1 ? " has a value" : "s have values") outside \(range.lowerBound)…\(range.upperBound)")
                    return false
                }
                return true
            case .refused:
                problems.append("\(change); changing an attribute's type that way cannot be inferred")
                return false
            }
        }

        /// A property that became required: its default where stored rows have
        /// none, or a refusal when it has no default.
        private mutating func fillIfNewlyRequired(_ property: PropertyDescription, of entity: EntityDescription, column: String,
                                                  from found: StoreSchemaSnapshot.Column, defaultValue: PropertyValue, label: String) throws {
            let alreadyRequired = sourceEntity(entity).map {
                ManagedObjectModel.wasRecordedRequired(property.renamingIdentifier ?? property.name, entity: $0.name, in: source.metadata)
            } ?? false
            guard !property.isOptional && !alreadyRequired else { return }
            let empty = try rows(ofKind: entity, nullIn: found.name)
            guard empty > 0 else { return }
            if !defaultValue.isNull {
                mapping.fills.append(Fill(column: column, value: defaultValue, entityNumbers: destinationNumbers(ofKind: entity)))
            } else if requiresValues {
                problems.append("\(label) is required but \(empty) \(entity.name) row\(empty == 1 ? " has" : "s have") no value in the store and it has no default value")
            }
        }

        /// A property the store does not have: its default in every row, or a
        /// refusal when it is required without one and rows exist.
        private mutating func fillNew(_ property: PropertyDescription, of entity: EntityDescription, column: String,
                                      defaultValue: PropertyValue, label: String) throws {
            if !defaultValue.isNull {
                mapping.fills.append(Fill(column: column, value: defaultValue, entityNumbers: destinationNumbers(ofKind: entity)))
            } else if !property.isOptional && requiresValues {
                let existing = try rows(ofKind: entity)
                if existing > 0 {
                    let kind = property is RelationshipDescription ? "relationship" : "attribute without a default value"
                    problems.append("\(label) is a new required \(kind), and the store has \(existing) \(entity.name) row\(existing == 1 ? "" : "s") without a value for it")
                }
            }
        }

        /// The row's rank in an ordered inverse (`Z_FOK_<NAME>`) follows its key.
        private mutating func copyRank(of property: PropertyDescription, with found: StoreSchemaSnapshot.Column) {
            guard let relationship = property as? RelationshipDescription,
                  let orderColumn = schema.orderColumns[ObjectIdentifier(relationship)],
                  let sourceOrder = sourceColumns["Z_FOK_" + found.name.uppercased().dropFirst()],
                  !usedSourceColumns.contains(sourceOrder.name.uppercased()) else { return }
            usedSourceColumns.insert(sourceOrder.name.uppercased())
            mapping.columns.append((orderColumn, sourceOrder.name))
        }

        // MARK: - The table's entities in the store

        private func sourceEntity(_ entity: EntityDescription) -> StoreSchemaSnapshot.Entity? {
            guard let match = sourceOf[ObjectIdentifier(entity)], match.rootNumber == sourceRoot?.number else { return nil }
            return match
        }

        private func sourceNumbers(ofKind entity: EntityDescription) -> [Int64] {
            entity.selfAndDescendants.compactMap { sourceEntity($0)?.number }
        }

        private func destinationNumbers(ofKind entity: EntityDescription) -> [Int64] {
            entity.selfAndDescendants.compactMap { numbers[$0.name] }
        }

        private func rows(ofKind entity: EntityDescription, nullIn column: String? = nil) throws -> Int {
            guard let sourceTable else { return 0 }
            return try countRows(sourceTable, sourceNumbers(ofKind: entity), column)
        }
    }
}
