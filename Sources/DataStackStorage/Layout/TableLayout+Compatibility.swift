import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - Checking an existing file's columns against the model

extension TableLayout {
    /// How the entity tables of an existing file differ from this mapping of
    /// the model, beyond the missing tables and columns that
    /// ``init(entities:numbers:existingColumns:url:)`` already refuses: one
    /// line per difference, empty when they match.
    ///
    /// - An attribute's column must be declared with the type Core Data gives
    ///   that attribute type (``declaredType(of:)``: INTEGER, FLOAT, DECIMAL,
    ///   TIMESTAMP, VARCHAR, BLOB), or its values would be read as another
    ///   type (an INTEGER column read as a Date gives dates in 2001).
    /// - Every column of an entity table must belong to the model, or rows
    ///   saved with the model would leave it NULL (a required attribute of the
    ///   model that wrote the store, say).
    ///
    /// Types that share a declared type (the integer sizes and Boolean; Double
    /// and Float; String and URI; Binary Data, UUID and Transformable) cannot
    /// be told apart here; for stores written here the version hashes can
    /// (``ManagedObjectModel/differences(of:fromModelRecordedIn:)``).
    ///
    /// - Parameter declaredTypes: each entity table's columns with their
    ///   declared types, as `PRAGMA table_info` gives them.
    package func columnDifferences(declaredTypes: [String: [String: String]]) -> [String] {
        var problems: [String] = []
        for table in tables {
            guard let real = declaredTypes[table.name] else { continue }
            var checked: Set<String> = []
            for entity in Self.depthFirst(table.root) {
                guard let mapping = mappings[ObjectIdentifier(entity)] else { continue }
                for (slot, column) in mapping.columns.enumerated() {
                    guard let column, case .attribute(let type) = column.kind,
                          checked.insert(column.name).inserted,
                          let declared = real[column.name] else { continue }
                    let expected = Self.declaredType(of: type)
                    if Self.normalized(declared) != expected {
                        let name = entity.slotProperties[slot].name
                        let owner = entity.slotProperties[slot].entity?.name ?? entity.name
                        problems.append("entity \(owner), attribute \(name): the store has \(declared.isEmpty ? "no declared type" : declared), "
                                        + "the model says \(type.modelEditorName) (column \(column.name) of \(table.name), which Core Data declares \(expected))")
                    }
                }
            }
            let known = Set(["Z_PK", "Z_ENT", "Z_OPT"] + table.columns.map(\.name))
            for name in real.keys.sorted() where !known.contains(name) {
                problems.append("entity \(table.root.name): the store has a column \(name) that the model has no property for (in \(table.name))")
            }
        }
        return problems
    }

    /// A declared type as Core Data compares it: upper-cased, without a length
    /// (`VARCHAR(255)` is `VARCHAR`) or surrounding spaces.
    private static func normalized(_ declared: String) -> String {
        let base = declared.split(separator: "(", maxSplits: 1).first.map(String.init) ?? declared
        return base.trimmingCharacters(in: .whitespaces).uppercased()
    }
}
