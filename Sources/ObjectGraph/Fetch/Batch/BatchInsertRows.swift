import Foundation

/// Reads a batch insert's rows one at a time, checked and converted, for a
/// store to write: the same rules for every store, and no row kept once read,
/// so a handler's rows stream through in flat memory.
///
/// Per row it costs one dictionary lookup per stored attribute of the entity
/// and one conversion per given value, into buffers reused from row to row;
/// the attributes' names, types, defaults and optionality are looked up once.
package struct BatchInsertRows {
    /// The entity's stored attributes in slot order: the values of a row, one each.
    package let attributes: [AttributeDescription]
    private let entityName: String
    private let names: [String]
    private let types: [AttributeType]
    private let defaults: [PropertyValue]
    private let isOptional: [Bool]
    private let entity: EntityDescription
    private let source: BatchInsertRequest.Rows
    /// The handler's dictionary, emptied for each row.
    private var scratch: [String: any Sendable] = [:]
    private var finished = false

    /// The position of the row last read (of the next row before the first call).
    package private(set) var index = -1
    /// The values of the row last read, one per attribute of ``attributes``.
    package private(set) var values: [PropertyValue]
    /// Whether the row last read gave each attribute (rather than leaving it to its default).
    package private(set) var given: [Bool]

    package init(_ insert: StoreBatchInsert) {
        entity = insert.entity
        entityName = insert.entity.name
        source = insert.rows
        attributes = insert.entity.slotProperties.compactMap { property in
            guard let attribute = property as? AttributeDescription, !attribute.isTransient else { return nil }
            return attribute
        }
        names = attributes.map(\.name)
        types = attributes.map(\.type)
        defaults = attributes.map(\.defaultValue)
        isOptional = attributes.map(\.isOptional)
        values = defaults
        given = Array(repeating: false, count: attributes.count)
    }

    /// Reads the next row into ``values`` and ``given``.
    ///
    /// - Returns: `false` when there are no more rows.
    /// - Throws: ``ObjectGraphError/unknownKey(_:entity:)``,
    ///   ``BatchRequestError/notAnAttribute(key:entity:)`` for a relationship,
    ///   ``ObjectGraphError/wrongValueType(key:entity:expected:actual:)`` or
    ///   ``ObjectGraphError/valueOutOfRange(key:entity:value:type:)`` for a value,
    ///   ``BatchRequestError/missingValue(key:entity:row:)`` for a non-optional
    ///   attribute left without a value.
    package mutating func next() throws -> Bool {
        guard !finished else { return false }
        index += 1
        switch source {
        case .objects(let objects):
            guard index < objects.count else {
                finished = true
                return false
            }
            try read(objects[index])
        case .handler(let handler):
            scratch.removeAll(keepingCapacity: true)
            if handler(index, &scratch) {
                finished = true
                return false
            }
            try read(scratch)
        }
        return true
    }

    /// Converts one dictionary into ``values`` and ``given``.
    private mutating func read(_ row: [String: any Sendable]) throws {
        var found = 0
        for position in 0..<names.count {
            if let raw = row[names[position]] {
                found += 1
                given[position] = true
                values[position] = try convert(raw, at: position)
            } else {
                given[position] = false
                values[position] = defaults[position]
            }
            if !isOptional[position], values[position].isNull {
                throw BatchRequestError.missingValue(key: names[position], entity: entityName, row: index)
            }
        }
        if found != row.count { try checkKeys(of: row) }
    }

    /// A value converted as key-value coding converts it; an optional holding
    /// nil is nil (found only once the conversion fails, so a row pays nothing for it).
    @inline(__always)
    private func convert(_ raw: any Sendable, at position: Int) throws -> PropertyValue {
        do {
            return try PropertyValue(raw, for: types[position], key: names[position], entity: entityName)
        } catch {
            if (raw as? any OptionalValue)?.isNone == true { return .null }
            throw error
        }
    }

    /// Throws for the first key of the row that is not a stored attribute;
    /// a transient attribute is accepted and not stored, as it has no column.
    private func checkKeys(of row: [String: any Sendable]) throws {
        for key in row.keys.sorted() where !names.contains(key) {
            switch try entity.property(forKey: key) {
            case is RelationshipDescription:
                throw BatchRequestError.notAnAttribute(key: key, entity: entityName)
            case let attribute as AttributeDescription where attribute.isTransient:
                continue
            default:
                throw ObjectGraphError.unknownKey(key, entity: entityName)
            }
        }
    }
}

/// An `Optional` seen through `Any`, to tell a nil value from a value of the wrong type.
private protocol OptionalValue {
    var isNone: Bool { get }
}

extension Optional: OptionalValue {
    var isNone: Bool { self == nil }
}
