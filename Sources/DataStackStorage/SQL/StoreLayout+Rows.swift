import Foundation
@_spi(StoreImplementation) import ObjectGraph

/// Reads the rows of a ``StoreLayout`` query into a store's IDs and nodes,
/// by the same per-entity row layout the SQLite store decodes with.
///
/// A row whose entity number (`Z_ENT`, or a to-one's entity column) the
/// model lacks throws ``PersistentStoreError/Code/incompatibleModel`` naming
/// the row: skipping it would turn a database the model does not describe
/// into a missing row.
///
/// A reader keeps the last row's entity and layout, so the rows of one
/// entity (most results) are read without a lookup per row.
@_spi(StoreImplementation)
public struct RowReader {
    let schema: TableLayout
    let identity: StoreIdentity
    private var last: (number: Int64, entity: EntityDescription, layout: RowLayout)?
    private var scopes: ObjectIDScopeCache
    /// The chunks ``encodedNode(from:)`` fills, made at its first row.
    private var encoder: EncodedStoreNode.Builder?

    init(schema: TableLayout, identity: StoreIdentity) {
        self.schema = schema
        self.identity = identity
        self.scopes = ObjectIDScopeCache(store: identity)
    }

    /// The ID of row `primaryKey` of the entity numbered `entityNumber`.
    public mutating func objectID(entityNumber: Int64, primaryKey: Int64) throws -> ObjectID {
        scopes.objectID(of: try entity(numbered: entityNumber, row: primaryKey), primaryKey: primaryKey)
    }

    /// The ID of a row whose first two columns are `Z_PK` and `Z_ENT`.
    public mutating func objectID(from row: some StoredRow) throws -> ObjectID {
        try objectID(entityNumber: try row.int64(at: 1), primaryKey: try row.int64(at: 0))
    }

    /// The node of a full row (``StoreLayout/query(for:)`` with managed-object
    /// results, or ``StoreLayout/rowsQuery(for:)``).
    public mutating func node(from row: some StoredRow) throws -> IncrementalStoreNode {
        let (key, entity, layout) = try head(of: row)
        var values = ContiguousArray<PropertyValue>()
        values.reserveCapacity(layout.steps.count)
        for (slot, step) in layout.steps.enumerated() {
            switch step {
            case .constant(let index):
                values.append(layout.constants[index])
            case .attribute(let position, let type):
                values.append(try Self.value(of: type, at: Int(position), in: row))
            case .externalData(let position):
                values.append(try row.data(at: Int(position)).map(PropertyValue.data) ?? .null)
            case .toOne(let position, let entityPosition, let destination):
                values.append(try toOne(at: Int(position), entityAt: Int(entityPosition), destination: destination,
                                        slot: slot, of: entity, key: key, layout: layout, in: row))
            }
        }
        return IncrementalStoreNode(objectID: scopes.objectID(of: entity, primaryKey: key),
                                    values: values, version: try row.int64(at: 2))
    }

    /// A full row kept as bytes, for a fetch of faults
    /// (``ObjectGraph/StoreFetch/returnsObjectsAsFaults``): the rows go to the
    /// coordinator's row cache, where most are never read, and a fault decodes
    /// its own when it fires (see ``ObjectGraph/EncodedStoreNode``). The values
    /// are those ``node(from:)`` reads; text is kept as the database sent it,
    /// with no `String` made for it until then. Consecutive rows share the
    /// reader's chunks of bytes.
    ///
    /// A row the model cannot read throws as in ``node(from:)``; what it had
    /// appended goes with the builder, so no later row starts with it.
    public mutating func encodedNode(from row: some StoredRow) throws -> EncodedStoreNode {
        let builder: EncodedStoreNode.Builder
        if let encoder {
            builder = encoder
        } else {
            builder = EncodedStoreNode.Builder()
            encoder = builder
        }
        do {
            return try appendRow(row, to: builder)
        } catch {
            encoder = nil
            throw error
        }
    }

    /// The row's values appended to `builder`, finished as a row.
    private mutating func appendRow(_ row: some StoredRow, to builder: EncodedStoreNode.Builder) throws -> EncodedStoreNode {
        let (key, entity, layout) = try head(of: row)
        for (slot, step) in layout.steps.enumerated() {
            switch step {
            case .constant(let index):
                builder.append(layout.constants[index])
            case .attribute(let position, let type):
                try Self.encode(type, at: Int(position), in: row, into: builder)
            case .externalData(let position):
                Self.appendData(try row.data(at: Int(position)), to: builder)
            case .toOne(let position, let entityPosition, let destination):
                builder.append(try toOne(at: Int(position), entityAt: Int(entityPosition), destination: destination,
                                         slot: slot, of: entity, key: key, layout: layout, in: row))
            }
        }
        return builder.finish(scope: scopes.scope(of: entity), primaryKey: key, version: try row.int64(at: 2))
    }

    /// A full row's key, entity and layout: the last row's when its entity
    /// number is the same (most results hold one entity).
    private mutating func head(of row: some StoredRow) throws -> (key: Int64, entity: EntityDescription, layout: RowLayout) {
        let key = try row.int64(at: 0)
        let number = try row.int64(at: 1)
        if let last, last.number == number { return (key, last.entity, last.layout) }
        let entity = try self.entity(numbered: number, row: key)
        guard let layout = schema.mappings[ObjectIdentifier(entity)]?.rowLayout else { throw ObjectGraphError.noStore(entity: entity.name) }
        last = (number, entity, layout)
        return (key, entity, layout)
    }

    /// A to-one's value in row `key`: its destination's ID, named by the
    /// row's entity column for a destination with subentities, or null.
    private mutating func toOne(at position: Int, entityAt entityPosition: Int, destination: Int, slot: Int,
                                of entity: EntityDescription, key: Int64, layout: RowLayout,
                                in row: some StoredRow) throws -> PropertyValue {
        if row.isNull(at: position) { return .null }
        if entityPosition >= 0 {
            let number = try row.int64(at: entityPosition)
            guard let target = schema.entitiesByNumber[number] else {
                throw PersistentStoreError(.incompatibleModel, url: nil, message: """
                    the to-one '\(entity.slotProperties[slot].name)' of \(entity.name) row \(key) points at \
                    entity number \(number), which no entity of the model has
                    """)
            }
            return .object(scopes.objectID(of: target, primaryKey: try row.int64(at: position)))
        }
        guard let target = layout.destinations[destination] else { return .null }
        return .object(scopes.objectID(of: target, primaryKey: try row.int64(at: position)))
    }

    /// A column appended as ``value(of:at:in:)`` reads it: numbers, dates and
    /// booleans in their compact forms, text and bytes as they are, the rest
    /// (decimals, UUIDs) as values.
    private static func encode(_ type: AttributeType, at column: Int, in row: some StoredRow,
                               into builder: EncodedStoreNode.Builder) throws {
        if row.isNull(at: column) { return builder.appendNull() }
        switch type {
        case .integer16, .integer32, .integer64: builder.appendInteger(try row.int64(at: column))
        case .boolean: builder.appendBool(try row.int64(at: column) != 0)
        case .double, .float: builder.appendDouble(try row.double(at: column))
        case .date: builder.appendDate(secondsSinceReferenceDate: try row.double(at: column))
        case .string: row.withUTF8(at: column) { text in if let text { builder.appendString(utf8: text) } else { builder.appendNull() } }
        case .uri: row.withUTF8(at: column) { text in if let text { builder.appendURI(utf8: text) } else { builder.appendNull() } }
        case .binaryData, .transformable: appendData(try row.data(at: column), to: builder)
        case .decimal, .uuid: builder.append(try value(of: type, at: column, in: row))
        }
    }

    private static func appendData(_ data: Data?, to builder: EncodedStoreNode.Builder) {
        guard let data else { return builder.appendNull() }
        data.withUnsafeBytes { builder.appendData($0) }
    }

    /// A dictionary result's row, read as ``StoreLayout/Query/dictionaryColumns`` says.
    public func dictionary(from row: some StoredRow, columns: [(name: String, type: AttributeType)]) throws -> [String: PropertyValue] {
        var dictionary: [String: PropertyValue] = [:]
        for (position, column) in columns.enumerated() {
            dictionary[column.name] = try Self.value(of: column.type, at: position, in: row)
        }
        return dictionary
    }

    /// A column read as an attribute of `type`, from the storage form
    /// (``PredicateScalar/binding(for:)``); the SQLite store's
    /// `Statement.attributeValue(at:type:)` reads the same form from SQLite.
    static func value(of type: AttributeType, at column: Int, in row: some StoredRow) throws -> PropertyValue {
        if row.isNull(at: column) { return .null }
        switch type {
        case .integer16, .integer32, .integer64: return .integer(try row.int64(at: column))
        case .boolean: return .bool(try row.int64(at: column) != 0)
        case .double, .float: return .double(try row.double(at: column))
        case .decimal: return .decimal(fromStored: try row.double(at: column))
        case .string: return row.string(at: column).map(PropertyValue.string) ?? .null
        case .uri: return row.string(at: column).flatMap(URL.init(string:)).map(PropertyValue.uri) ?? .null
        case .date: return .date(Date(timeIntervalSinceReferenceDate: try row.double(at: column)))
        case .binaryData, .transformable: return try row.data(at: column).map(PropertyValue.data) ?? .null
        case .uuid:
            guard let data = try row.data(at: column) else { return .null }
            guard data.count == 16 else {
                throw PersistentStoreError(.incompatibleModel, url: nil, message: "a UUID column holds \(data.count) bytes, not 16")
            }
            return .uuid(data.withUnsafeBytes { UUID(uuid: $0.loadUnaligned(as: uuid_t.self)) })
        }
    }

    private func entity(numbered number: Int64, row key: Int64) throws -> EntityDescription {
        guard let entity = schema.entitiesByNumber[number] else {
            throw PersistentStoreError(.incompatibleModel, url: nil, message: """
                row \(key) has entity number (Z_ENT) \(number), which no entity of the model has
                """)
        }
        return entity
    }
}
