import Foundation
import ObjectGraph
@_spi(DataStackInternal) import DataStackSQLite

/// Reads a Core Data store directly with SQLite, following the layout facts of the
/// fixture corpus README, independently of the engine's own schema mapping: the
/// reference the engine's reads are compared with.
final class FixtureSQLite {
    /// A value as SQLite stores it.
    enum Value: Equatable, CustomStringConvertible {
        case null, integer(Int64), double(Double), text(String), blob(Data)

        var description: String {
            switch self {
            case .null: "NULL"
            case .integer(let v): "\(v)"
            case .double(let v): "\(v)"
            case .text(let v): "'\(v)'"
            case .blob(let v): "<\(v.count) bytes>"
            }
        }

        static func integerOrNil(_ value: Value) -> Int64? {
            switch value {
            case .integer(let v): v
            case .double(let v): Int64(exactly: v)
            default: nil
            }
        }

        static func doubleOrNil(_ value: Value) -> Double? {
            switch value {
            case .integer(let v): Double(v)
            case .double(let v): v
            default: nil
            }
        }

        /// Whether two stored values are the same value; an integer and a real
        /// holding the same number count as equal (a rewritten whole-second date).
        static func sameStoredValue(_ a: Value, _ b: Value) -> Bool {
            if a == b { return true }
            if let x = doubleOrNil(a), let y = doubleOrNil(b) { return x == y }
            return false
        }

        /// Whether an engine value (from `value(forKey:)`) is what SQLite holds for
        /// an attribute of `type`, as Core Data stores it.
        static func matches(_ value: Any?, _ stored: Value, type: AttributeType) -> Bool {
            guard let value else { return stored == .null }
            switch type {
            case .integer16, .integer32, .integer64:
                guard let int = value as? Int else { return false }
                return integerOrNil(stored) == Int64(int)
            case .boolean:
                guard let bool = value as? Bool else { return false }
                return integerOrNil(stored) == (bool ? 1 : 0)
            case .double:
                return (value as? Double) == doubleOrNil(stored)
            case .float:
                return (value as? Float) == doubleOrNil(stored).map(Float.init)
            case .decimal:
                guard let decimal = value as? Decimal else { return false }
                return NSDecimalNumber(decimal: decimal).doubleValue == doubleOrNil(stored)
            case .string:
                return stored == .text(value as? String ?? "\u{0}not a string")
            case .uri:
                return stored == .text((value as? URL)?.absoluteString ?? "\u{0}not a URL")
            case .date:
                return (value as? Date)?.timeIntervalSinceReferenceDate == doubleOrNil(stored)
            case .binaryData:
                guard let data = value as? Data else { return false }
                return stored == .blob(data)
            case .transformable:
                if let data = value as? Data { return stored == .blob(data) }
                // A keyed archive read as its Foundation value (the default transformer).
                guard case .blob(let bytes) = stored, let archived = try? ArchivedValue.unarchive(bytes) else { return false }
                return ArchivedValue(value) == archived
            case .uuid:
                guard let uuid = value as? UUID else { return false }
                return stored == .blob(withUnsafeBytes(of: uuid.uuid) { Data($0) })
            }
        }
    }

    struct PrimaryKeyRow: Equatable {
        let entity: Int64
        let name: String
        let superEntity: Int64
        let max: Int64
    }

    struct MetadataRow {
        let count: Int
        let version: Int64?
        let uuid: String?
        let plist: Data?
    }

    let model: ManagedObjectModel
    /// `Z_ENT` by entity name from `Z_PRIMARYKEY`; an entity renamed by migration is
    /// found under its renaming identifier, the name the file still records.
    let entityNumbers: [String: Int64]
    private let connection: Connection
    private var columnsByTable: [String: [String]] = [:]

    init(path: String, model: ManagedObjectModel) throws {
        self.model = model
        connection = try Connection(path: path)
        var byName: [String: Int64] = [:]
        let statement = try connection.prepare("SELECT Z_ENT, Z_NAME FROM Z_PRIMARYKEY")
        while try statement.step() {
            if let name = statement.string(at: 1) { byName[name] = statement.int64(at: 0) }
        }
        var numbers: [String: Int64] = [:]
        for entity in model.entities {
            numbers[entity.name] = byName[entity.name] ?? entity.renamingIdentifier.flatMap { byName[$0] }
        }
        entityNumbers = numbers
    }

    // MARK: - Names

    func table(for entity: EntityDescription) -> String {
        "Z" + entity.rootEntity.name.uppercased()
    }

    func column(for property: PropertyDescription, in entity: EntityDescription) -> String {
        "Z" + property.name.uppercased()
    }

    func columns(of table: String) throws -> [String] {
        if let cached = columnsByTable[table] { return cached }
        let names = try connection.columns(in: table).map(\.name)
        columnsByTable[table] = names
        return names
    }

    /// Each column of `table` with the type its `CREATE TABLE` declares.
    func declaredTypes(of table: String) throws -> [String: String] {
        Dictionary(try connection.columns(in: table).map { ($0.name, $0.declaredType) }, uniquingKeysWith: { first, _ in first })
    }

    private func number(of entity: EntityDescription) throws -> Int64 {
        guard let number = entityNumbers[entity.name] else {
            throw FixtureError("entity \(entity.name) has no row in Z_PRIMARYKEY")
        }
        return number
    }

    // MARK: - Rows

    /// Every row with the entity's own `Z_ENT`, by primary key, column by column.
    func rows(of entity: EntityDescription) throws -> [Int64: [String: Value]] {
        let number = try number(of: entity)
        return try select("SELECT * FROM \(table(for: entity)) WHERE Z_ENT = ?", number)
    }

    func row(of entity: EntityDescription, primaryKey: Int64) throws -> [String: Value]? {
        try select("SELECT * FROM \(table(for: entity)) WHERE Z_PK = ?", primaryKey)[primaryKey]
    }

    private func select(_ sql: String, _ argument: Int64) throws -> [Int64: [String: Value]] {
        let statement = try connection.prepare(sql)
        try statement.bind(argument, at: 1)
        var rows: [Int64: [String: Value]] = [:]
        while try statement.step() {
            var row: [String: Value] = [:]
            for index in 0..<statement.columnCount {
                row[statement.columnName(at: index)] = value(statement, index)
            }
            if case .integer(let pk)? = row["Z_PK"] { rows[pk] = row }
        }
        return rows
    }

    private func value(_ statement: Statement, _ index: Int32) -> Value {
        switch statement.columnType(at: index) {
        case .null: .null
        case .integer: .integer(statement.int64(at: index))
        case .double: .double(statement.double(at: index))
        case .text: .text(statement.string(at: index) ?? "")
        case .blob: .blob(statement.data(at: index) ?? Data())
        }
    }

    /// The primary keys a to-many relationship holds for the object `primaryKey`, as
    /// the file records them: in the destination's foreign key for a to-one inverse
    /// (ordered by `Z_FOK_<INVERSE>`), in the join table `Z_<n><REL>` for a
    /// many-to-many (ordered by `Z_FOK_<n><REL>`). Nil for a to-many without inverse.
    func destinationKeys(of relationship: RelationshipDescription, from entity: EntityDescription, primaryKey: Int64) throws -> [Int64]? {
        guard let inverse = relationship.inverseRelationship, let destination = relationship.destinationEntity,
              let owner = relationship.entity else { return nil }
        if !inverse.isToMany {
            let table = table(for: destination)
            let foreignKey = column(for: inverse, in: destination)
            let family = try destination.selfAndDescendants.map { try number(of: $0) }
            let fok = "Z_FOK_" + inverse.name.uppercased()
            let order = try relationship.isOrdered && columns(of: table).contains(fok) ? "\(fok), Z_PK" : "Z_PK"
            let sql = "SELECT Z_PK FROM \(table) WHERE \(foreignKey) = ? AND Z_ENT IN (\(family.map(String.init).joined(separator: ","))) ORDER BY \(order)"
            return try orderedKeys(sql, primaryKey)
        }
        let ownColumn = "Z_\(try number(of: owner))\(inverse.name.uppercased())"
        let relatedColumn = "Z_\(try number(of: destination))\(relationship.name.uppercased())"
        let candidates = [relatedColumn, ownColumn]
        guard let table = try candidates.first(where: { try connection.tableExists($0) }) else {
            throw FixtureError("no join table \(candidates.joined(separator: " or ")) for \(entity.name).\(relationship.name)")
        }
        let fok = "Z_FOK_" + relatedColumn.dropFirst(2)
        let order = try relationship.isOrdered && columns(of: table).contains(fok) ? "\(fok), \(relatedColumn)" : relatedColumn
        return try orderedKeys("SELECT \(relatedColumn) FROM \(table) WHERE \(ownColumn) = ? ORDER BY \(order)", primaryKey)
    }

    private func orderedKeys(_ sql: String, _ argument: Int64) throws -> [Int64] {
        let statement = try connection.prepare(sql)
        try statement.bind(argument, at: 1)
        var keys: [Int64] = []
        while try statement.step() { keys.append(statement.int64(at: 0)) }
        return keys
    }

    // MARK: - Bookkeeping tables

    func primaryKeyTable() throws -> [PrimaryKeyRow] {
        let statement = try connection.prepare("SELECT Z_ENT, Z_NAME, Z_SUPER, Z_MAX FROM Z_PRIMARYKEY ORDER BY Z_ENT")
        var rows: [PrimaryKeyRow] = []
        while try statement.step() {
            rows.append(PrimaryKeyRow(entity: statement.int64(at: 0), name: statement.string(at: 1) ?? "",
                                      superEntity: statement.int64(at: 2), max: statement.int64(at: 3)))
        }
        return rows
    }

    func metadataRow() throws -> MetadataRow {
        let statement = try connection.prepare("SELECT Z_VERSION, Z_UUID, Z_PLIST FROM Z_METADATA")
        var count = 0
        var first: MetadataRow?
        while try statement.step() {
            count += 1
            if first == nil {
                first = MetadataRow(count: 0, version: statement.int64(at: 0), uuid: statement.string(at: 1), plist: statement.data(at: 2))
            }
        }
        return MetadataRow(count: count, version: first?.version, uuid: first?.uuid, plist: first?.plist)
    }

    func integrityCheck() throws -> [String] {
        try connection.integrityCheck()
    }
}

/// A failure of the reference reader itself, with what it could not find.
struct FixtureError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The attribute a save test changes, and its new value.
struct FixtureEdit {
    let attribute: AttributeDescription
    let column: String
    let newValue: Any

    /// Picks a persistent attribute whose change cannot break validation: a string
    /// without pattern or length limits (a suffix keeps unique values unique), else
    /// a number, boolean or date outside any uniqueness constraint.
    init?(entity: EntityDescription, row: [String: FixtureSQLite.Value], reference: FixtureSQLite) {
        let constrained = Set(entity.uniquenessConstraints.flatMap { $0 })
        let attributes = entity.attributesByName.values.filter { !$0.isTransient }.sorted { $0.name < $1.name }
        let strings = attributes.filter { $0.type == .string && $0.regularExpression == nil && $0.maximumLength == nil && $0.minimumLength == nil }
        let others = attributes.filter { !constrained.contains($0.name) && $0.minimumValue == nil && $0.maximumValue == nil }
        for attribute in strings + others {
            let column = reference.column(for: attribute, in: entity)
            guard let stored = row[column] else { continue }
            let newValue: Any? = switch (attribute.type, stored) {
            case (.string, .text(let text)): text + " (edited)"
            case (.string, .null): "edited"
            case (.integer16, _), (.integer32, _), (.integer64, _):
                FixtureSQLite.Value.integerOrNil(stored).map { Int($0 == 0 ? 1 : $0 - 1) } ?? 1
            case (.boolean, _): FixtureSQLite.Value.integerOrNil(stored) != 1
            case (.double, _): (FixtureSQLite.Value.doubleOrNil(stored) ?? 0) + 0.5
            case (.date, _): Date(timeIntervalSinceReferenceDate: (FixtureSQLite.Value.doubleOrNil(stored) ?? 0) + 1)
            default: nil
            }
            guard let newValue else { continue }
            self.attribute = attribute
            self.column = column
            self.newValue = newValue
            return
        }
        return nil
    }

    /// A value for a required attribute of an object inserted into an empty store.
    static func sample(for type: AttributeType) -> Any {
        switch type {
        case .integer16, .integer32, .integer64: 1
        case .double, .float: 1.5
        case .decimal: Decimal(string: "1.5") ?? Decimal(1)
        case .boolean: true
        case .string: "sample"
        case .date: Date(timeIntervalSinceReferenceDate: 1_000)
        case .binaryData, .transformable: Data([1, 2, 3])
        case .uuid: UUID()
        case .uri: URL(fileURLWithPath: "/sample")
        }
    }
}
