import Foundation

/// Reads a batch insert's rows one at a time, checked and converted, for a
/// store to write: the same rules for every store, and no row kept once read,
/// so a handler's rows stream through in flat memory.
///
/// Per row it costs a walk over the row's entries, one conversion per given
/// value and no hashing (see ``read(_:)``), into buffers reused from row to
/// row; the attributes' names, types, defaults and optionality are looked up once.
@_spi(StoreImplementation) public struct BatchInsertRows {
    /// The entity's stored attributes in slot order: the values of a row, one each.
    public let attributes: [AttributeDescription]
    private let entityName: String
    private let names: [String]
    /// Each name's two words, for matching a key by comparing them (see ``read(_:)``).
    private let nameBits: [NameBits]
    /// For each attribute, the Swift types whose values it takes as they are.
    private let exactTypes: [ExactType]
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
    public private(set) var index = -1
    /// The values of the row last read, one per attribute of ``attributes``.
    public private(set) var values: [PropertyValue]
    /// Whether the row last read gave each attribute (rather than leaving it to its default).
    public private(set) var given: [Bool]

    public init(_ insert: StoreBatchInsert) {
        entity = insert.entity
        entityName = insert.entity.name
        source = insert.rows
        attributes = insert.entity.slotProperties.compactMap { property in
            guard let attribute = property as? AttributeDescription, !attribute.isTransient else { return nil }
            return attribute
        }
        names = attributes.map(\.name)
        nameBits = names.map(Self.bits(of:))
        types = attributes.map(\.type)
        exactTypes = types.map(ExactType.init(for:))
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
    public mutating func next() throws -> Bool {
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
    /// in the previous row: rows filled the same way walk in the same order
    /// (the handler's dictionary is one storage, cleared), so a key usually
    /// matches at the first comparison, where a lookup per attribute would hash
    /// every name of every row. A name is compared by its two words first: a
    /// short ASCII name is its words (Swift's small-string form), so dictionaries
    /// of their own each, whose order differs, cost a word comparison per
    /// attribute and no string comparison; other keys fall back to `==`.
    private mutating func read(_ row: [String: any Sendable]) throws {
        // Worked on as local buffers, taken out of `self` and put back, so that no write checks for a copy.
        var values = self.values, given = self.given, hints = self.hints
        (self.values, self.given, self.hints) = ([], [], [])
        defer { (self.values, self.given, self.hints) = (values, given, hints) }
        if hints.count < row.count { hints += repeatElement(-1, count: row.count - hints.count) }
        // Read through locals, so the loop never copies `self`.
        let names = names, nameBits = nameBits, exactTypes = exactTypes
        try values.withUnsafeMutableBufferPointer { values in
            try given.withUnsafeMutableBufferPointer { given in
                try hints.withUnsafeMutableBufferPointer { hints in
                    given.update(repeating: false)
                    var entry = 0
                    // By index, each value read where it lies (the subscript lends
                    // it) rather than copied out by an iterator and destroyed after.
                    var cursor = row.startIndex
                    let end = row.endIndex
                    while cursor != end {
                        defer {
                            entry += 1
                            cursor = row.index(after: cursor)
                        }
                        let key = row.keys[cursor]
                        let bits = Self.bits(of: key)
                        let hint = hints[entry]
                        var position: Int
                        if hint >= 0, nameBits[hint] == bits {
                            position = hint
                        } else {
                            position = nameBits.firstIndex { $0 == bits } ?? -1
                            if position < 0 {
                                guard let found = names.firstIndex(of: key) else {
                                    try checkKey(key)
                                    continue
                                }
                                position = found
                            }
                            hints[entry] = position
                        }
                        given[position] = true
                        if let value = Self.exactValue(row.values[cursor], of: exactTypes[position]) {
                            values[position] = value
                        } else {
                            values[position] = try convert(row.values[cursor], at: position)
                        }
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

    /// A string's two words as they are (no retain): equal words are equal strings.
    private typealias NameBits = (UInt64, UInt64)

    @inline(__always)
    private static func bits(of name: String) -> NameBits {
        unsafeBitCast(name, to: NameBits.self)
    }

    /// A value converted as key-value coding converts it; an optional holding
    /// nil is nil (found only once the conversion fails, so a row pays nothing for it).
    private func convert(_ raw: any Sendable, at position: Int) throws -> PropertyValue {
        do {
            return try PropertyValue(raw, for: attributes[position], entity: entityName)
        } catch {
            if (raw as? any OptionalValue)?.isNone == true { return .null }
            throw error
        }
    }

    /// The value when it is already of the Swift type the attribute keeps
    /// (`String` for a string, `Double` for a double, `Int` or `Int64` for an
    /// integer in range, `Date`, `Bool`: `exact` from ``ExactType/metadata(for:)``),
    /// else nil for the general conversion.
    ///
    /// Why not `raw as? String`: a dynamic cast out of an existential costs
    /// about 40 ns, and ``PropertyValue/init(_:for:key:entity:)`` first asks
    /// whether any value is `NSNull`, a cast to a class that on Linux searches
    /// for a bridging conformance — together a third of a batch insert's time.
    /// Nor a generic function opening the existential (it runs unspecialized,
    /// the value copied through its type's value witnesses) or `type(of:)` (a
    /// runtime call). The existential is read where it lies instead, by Swift's
    /// layout of an existential container (docs/ABI/TypeLayout.rst, "Existential
    /// Container Layout"; `any Sendable` has `Any`'s, `Sendable` being a marker
    /// protocol): three words of inline buffer, then the type metadata. Each
    /// type taken here fits the buffer and is bitwise takable, so a value of it
    /// always lies inline, at the start; it is read only once the metadata
    /// word is that type's, so no value is ever read as another type.
    @inline(__always)
    private static func exactValue(_ value: borrowing any Sendable, of exact: ExactType) -> PropertyValue? {
        guard exact.kind != .none else { return nil }
        return withUnsafePointer(to: value) { container -> PropertyValue? in
            let raw = UnsafeRawPointer(container)
            let metadata = raw.load(fromByteOffset: 3 * MemoryLayout<Int>.size, as: UnsafeRawPointer.self)
            switch exact.kind {
            case .none: return nil
            case .string: return metadata == exact.metadata ? .string(raw.load(as: String.self)) : nil
            case .double: return metadata == exact.metadata ? .double(raw.load(as: Double.self)) : nil
            case .date: return metadata == exact.metadata ? .date(raw.load(as: Date.self)) : nil
            case .bool: return metadata == exact.metadata ? .bool(raw.load(as: Bool.self)) : nil
            case .integer:
                let integer: Int64
                if metadata == exact.metadata {
                    integer = Int64(raw.load(as: Int.self))
                } else if metadata == exact.otherMetadata {
                    integer = raw.load(as: Int64.self)
                } else {
                    return nil
                }
                // Out of range: the general conversion throws the error that says so.
                if let range = exact.range, !range.contains(integer) { return nil }
                return .integer(integer)
            }
        }
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

/// The Swift types whose values an attribute takes as they are
/// (`BatchInsertRows.exactValue(_:of:)`), by their type metadata.
private struct ExactType {
    enum Kind {
        case none, string, double, date, bool, integer
    }

    let kind: Kind
    /// The type's metadata; for an integer `Int`'s.
    let metadata: UnsafeRawPointer?
    /// For an integer, `Int64`'s.
    let otherMetadata: UnsafeRawPointer?
    /// For a 16- or 32-bit integer, the values it holds.
    let range: ClosedRange<Int64>?

    init(for type: AttributeType) {
        func metadata(_ type: Any.Type) -> UnsafeRawPointer { unsafeBitCast(type, to: UnsafeRawPointer.self) }
        var other: UnsafeRawPointer?
        var range: ClosedRange<Int64>?
        switch type {
        case .string: (kind, self.metadata) = (.string, metadata(String.self))
        case .double: (kind, self.metadata) = (.double, metadata(Double.self))
        case .date: (kind, self.metadata) = (.date, metadata(Date.self))
        case .boolean: (kind, self.metadata) = (.bool, metadata(Bool.self))
        case .integer16, .integer32, .integer64:
            (kind, self.metadata) = (.integer, metadata(Int.self))
            other = metadata(Int64.self)
            range = type == .integer64 ? nil : type.integerRange
        default: (kind, self.metadata) = (.none, nil)
        }
        otherMetadata = other
        self.range = range
    }
}
