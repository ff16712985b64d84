import Foundation

extension PropertyValue {
    /// Converts a Swift value given through key-value coding or a batch insert
    /// into the slot value for `attribute`: for a transformable attribute whose
    /// transformer keeps keyed archives (``AttributeDescription/archivesValues``),
    /// a Foundation value becomes the archive Core Data would store; otherwise
    /// as ``init(_:for:key:entity:)`` converts for the attribute's type.
    package init(_ value: Any, for attribute: AttributeDescription, entity: String) throws(ObjectGraphError) {
        // `NSNull` is no value, not a value to archive.
        if attribute.archivesValues, !(value is NSNull), let archived = attribute.archivedBytes(for: value) {
            self = .data(archived)
            return
        }
        try self.init(value, for: attribute.type, key: attribute.name, entity: entity)
    }

    /// Converts a Swift value given through key-value coding into the slot value
    /// for an attribute of `type`.
    ///
    /// Integers of any width are accepted for integer and floating-point
    /// attributes (checked against the attribute's range), `Float` and `Double`
    /// for floating-point attributes, and `Encodable` values for transformable
    /// ones. Anything else throws ``ObjectGraphError/Code-swift.struct/wrongValueType``.
    package init(_ value: Any, for type: AttributeType, key: String, entity: String = "?") throws(ObjectGraphError) {
        func wrongType() -> ObjectGraphError {
            .wrongValueType(key: key, entity: entity, expected: type.valueDescription, actual: "\(Swift.type(of: value))")
        }
        if value is NSNull { self = .null; return }
        switch type {
        case .integer16, .integer32, .integer64:
            guard let integer = Self.integer(from: value) else {
                // An unsigned integer past Int64.max is an integer all the same: too big, not the wrong type.
                if let unsigned = value as? UInt64 ?? (value as? UInt).map(UInt64.init) {
                    throw .valueOutOfRange(key: key, entity: entity, value: String(unsigned), type: type)
                }
                throw wrongType()
            }
            guard let range = type.integerRange, range.contains(integer) else {
                throw .valueOutOfRange(key: key, entity: entity, value: String(integer), type: type)
            }
            self = .integer(integer)
        case .double, .float:
            if let double = value as? Double { self = .double(double) }
            else if let float = value as? Float { self = .double(Double(float)) }
            else if let integer = Self.integer(from: value) { self = .double(Double(integer)) }
            else { throw wrongType() }
        case .decimal:
            if let decimal = value as? Decimal { self = .decimal(decimal) }
            else if let double = value as? Double { self = .decimal(Decimal(double)) }
            else if let integer = Self.integer(from: value) { self = .decimal(Decimal(integer)) }
            else { throw wrongType() }
        case .boolean:
            guard let bool = value as? Bool else { throw wrongType() }
            self = .bool(bool)
        case .string:
            guard let string = value as? String else { throw wrongType() }
            self = .string(string)
        case .date:
            guard let date = value as? Date else { throw wrongType() }
            self = .date(date)
        case .binaryData:
            if let data = value as? Data { self = .data(data) }
            else if let bytes = value as? [UInt8] { self = .data(Data(bytes)) }
            else { throw wrongType() }
        case .uuid:
            guard let uuid = value as? UUID else { throw wrongType() }
            self = .uuid(uuid)
        case .uri:
            guard let url = value as? URL else { throw wrongType() }
            self = .uri(url)
        case .transformable:
            if let data = value as? Data { self = .data(data); return }
            guard let encodable = value as? any Encodable else { throw wrongType() }
            do {
                self = .data(try TransformableCoding.encode(encodable))
            } catch {
                throw wrongType()
            }
        }
    }

    /// The value of any Swift integer as an `Int64`; nil for other values and for
    /// unsigned values beyond `Int64.max`.
    package static func integer(from value: Any) -> Int64? {
        switch value {
        case let v as Int: Int64(v)
        case let v as Int64: v
        case let v as Int32: Int64(v)
        case let v as Int16: Int64(v)
        case let v as Int8: Int64(v)
        case let v as UInt8: Int64(v)
        case let v as UInt16: Int64(v)
        case let v as UInt32: Int64(v)
        case let v as UInt: Int64(exactly: v)
        case let v as UInt64: Int64(exactly: v)
        default: nil
        }
    }

    /// The Swift value key-value coding returns for this slot value of an attribute
    /// of `type`: `Int` for every integer type, `Float` for float, `Double`,
    /// `Decimal`, `Bool`, `String`, `Date`, `Data`, `UUID`, `URL`; `Data` for a
    /// transformable (decode it with ``Managed`` or ``TransformableCoding``).
    package func anyValue(for type: AttributeType) -> Any? {
        switch self {
        case .null: nil
        case .integer(let v): Int(truncatingIfNeeded: v)
        case .double(let v): type == .float ? Float(v) : v
        case .bool(let v): v
        case .string(let v): v
        case .date(let v): v
        case .data(let v): v
        case .uuid(let v): v
        case .uri(let v): v
        case .decimal(let v): v
        case .object(let id): id
        case .objects(let ids): ids
        }
    }
}

extension AttributeType {
    /// What an attribute of this type takes, for error messages.
    package var valueDescription: String {
        switch self {
        case .integer16: "an integer (Int16)"
        case .integer32: "an integer (Int32)"
        case .integer64: "an integer (Int64)"
        case .double: "a Double"
        case .float: "a Float"
        case .decimal: "a Decimal"
        case .boolean: "a Bool"
        case .string: "a String"
        case .date: "a Date"
        case .binaryData: "Data"
        case .uuid: "a UUID"
        case .uri: "a URL"
        case .transformable: "an Encodable value or Data"
        }
    }
}

/// How transformable attributes turn `Codable` values into bytes: a binary
/// property list, the format Core Data's default transformer also produces.
public enum TransformableCoding {
    /// Encodes a value for a transformable attribute.
    public static func encode(_ value: some Encodable) throws -> Data {
        let encoder = PropertyListEncoder()
        encoder.outputFormat = .binary
        return try encoder.encode(EncodingBox(value: value))
    }

    /// Decodes a transformable attribute's bytes.
    public static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        try PropertyListDecoder().decode(DecodingBox<T>.self, from: data).value
    }

    // Property lists need a container at the top; a scalar alone would not encode.
    private struct EncodingBox<T: Encodable>: Encodable { var value: T }
    private struct DecodingBox<T: Decodable>: Decodable { var value: T }
}

// MARK: - Reals read as integers and decimals

extension PropertyValue {
    /// A real read as an integer attribute, as SQLite's `CAST(… AS INTEGER)`
    /// makes it: truncated toward zero, clamped to `Int64`'s range; nil for
    /// NaN, which SQLite holds as NULL. (A plain conversion would trap on a
    /// sum or product past `Int64`'s range.)
    package static func integer(truncating value: Double) -> PropertyValue {
        if value.isNaN { return .null }
        if value >= Double(Int64.max) { return .integer(.max) }
        if value <= Double(Int64.min) { return .integer(.min) }
        return .integer(Int64(value))
    }

    /// A real read as a decimal attribute: the shortest decimal text of the
    /// double, which is the value meant (Core Data stores decimals as
    /// doubles); `Decimal.nan` for an infinite or NaN double, which no decimal
    /// holds (Foundation's conversion would trap on infinity).
    package static func decimal(fromStored value: Double) -> PropertyValue {
        guard value.isFinite else { return .decimal(.nan) }
        return .decimal(Decimal(string: String(value)) ?? Decimal(value))
    }
}
