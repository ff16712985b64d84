import Foundation

/// Reads a batch insert's rows one at a time, checked and converted, for a
/// store to write: the same rules for every store, and no row kept once read,
/// so a handler's rows stream through in flat memory.
///
/// Per row it costs a walk over the row's entries, one conversion per given
/// value and no hashing (see ``read(_:)``), into buffers reused from row to
/// row; the attributes' names, types, defaults and optionality are looked up once.
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
    /// For each entry of a row in iteration order, the attribute it matched in the previous row (-1: none yet).
    private var hints: [Int] = []
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
    /// - Throws: ``ObjectGraphError/Code-swift.struct/unknownKey``,
    ///   ``ObjectGraphError/Code-swift.struct/notAnAttribute`` for a relationship,
    ///   ``ObjectGraphError/Code-swift.struct/wrongValueType`` or
    ///   ``ObjectGraphError/Code-swift.struct/valueOutOfRange`` for a value,
    ///   ``ObjectGraphError/Code-swift.struct/missingValue`` for a non-optional
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
    ///
    /// The row is walked entry by entry and each key matched to its attribute
    /// by comparing names, starting with the attribute the same entry matched
    /// in the previous row: rows filled the same way walk in the same order,
    /// so a key usually matches at the first comparison (of two short strings,
    /// a couple of machine words) where a lookup per attribute would hash
    /// every name of every row.
    private mutating func read(_ row: [String: any Sendable]) throws {
        // Worked on as local buffers, taken out of `self` and put back, so that no write checks for a copy.
        var values = self.values, given = self.given, hints = self.hints
        (self.values, self.given, self.hints) = ([], [], [])
        defer { (self.values, self.given, self.hints) = (values, given, hints) }
        if hints.count < row.count { hints += repeatElement(-1, count: row.count - hints.count) }
        try values.withUnsafeMutableBufferPointer { values in
            try given.withUnsafeMutableBufferPointer { given in
                try hints.withUnsafeMutableBufferPointer { hints in
                    given.update(repeating: false)
                    var entry = 0
                    for (key, raw) in row {
                        defer { entry += 1 }
                        let hint = hints[entry]
                        let position: Int
                        if hint >= 0, names[hint] == key {
                            position = hint
                        } else if let found = names.firstIndex(of: key) {
                            position = found
                            hints[entry] = found
                        } else {
                            try checkKey(key)
                            continue
                        }
                        given[position] = true
                        values[position] = try convert(raw, at: position)
                    }
                    for position in given.indices where !given[position] {
                        values[position] = defaults[position]
                        if !isOptional[position] && values[position].isNull {
                            throw ObjectGraphError.missingValue(key: names[position], entity: entityName, row: index)
                        }
                    }
                    for position in given.indices where given[position] && !isOptional[position] && values[position].isNull {
                        throw ObjectGraphError.missingValue(key: names[position], entity: entityName, row: index)
                    }
                }
            }
        }
    }

    /// A value converted as key-value coding converts it; an optional holding
    /// nil is nil (found only once the conversion fails, so a row pays nothing for it).
    @inline(__always)
    private func convert(_ raw: any Sendable, at position: Int) throws -> PropertyValue {
        if let value = Self.exactValue(raw, for: types[position]) { return value }
        do {
            return try PropertyValue(raw, for: attributes[position], entity: entityName)
        } catch {
            if (raw as? any OptionalValue)?.isNone == true { return .null }
            throw error
        }
    }

    /// The value when it is already of the Swift type the attribute keeps
    /// (`String` for a string, `Double` for a double, `Int` or `Int64` for an
    /// integer in range, `Date`, `Bool`), else nil for the general conversion.
    ///
    /// Why not `raw as? String`: a dynamic cast out of an existential costs
    /// about 40 ns, and ``PropertyValue/init(_:for:key:entity:)`` first asks
    /// whether any value is `NSNull`, a cast to a class that on Linux searches
    /// for a bridging conformance — together a third of a batch insert's time.
    /// The existential is opened instead (`T` is the value's dynamic type), its
    /// type compared with the expected one, and only an exact match reinterpreted,
    /// so `unsafeBitCast` never sees a value of another type.
    @inline(__always)
    private static func exactValue<T: Sendable>(_ value: T, for type: AttributeType) -> PropertyValue? {
        switch type {
        case .string:
            if T.self == String.self { return .string(unsafeBitCast(value, to: String.self)) }
        case .double:
            if T.self == Double.self { return .double(unsafeBitCast(value, to: Double.self)) }
        case .integer64:
            if T.self == Int.self { return .integer(Int64(unsafeBitCast(value, to: Int.self))) }
            if T.self == Int64.self { return .integer(unsafeBitCast(value, to: Int64.self)) }
        case .integer16, .integer32:
            let integer: Int64
            if T.self == Int.self {
                integer = Int64(unsafeBitCast(value, to: Int.self))
            } else if T.self == Int64.self {
                integer = unsafeBitCast(value, to: Int64.self)
            } else {
                return nil
            }
            // Out of range: the general conversion throws the error that says so.
            return type.integerRange?.contains(integer) == true ? .integer(integer) : nil
        case .date:
            if T.self == Date.self { return .date(unsafeBitCast(value, to: Date.self)) }
        case .boolean:
            if T.self == Bool.self { return .bool(unsafeBitCast(value, to: Bool.self)) }
        default:
            break
        }
        return nil
    }

    /// Throws for a key that is not a stored attribute; a transient attribute
    /// is accepted and not stored, as it has no column.
    private func checkKey(_ key: String) throws {
        switch try entity.property(forKey: key) {
        case is RelationshipDescription:
            throw ObjectGraphError.notAnAttribute(key: key, entity: entityName)
        case let attribute as AttributeDescription where attribute.isTransient:
            return
        default:
            throw ObjectGraphError.unknownKey(key, entity: entityName)
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
