@_spi(DataStackInternal) import DataStackSQLite
@_spi(StoreImplementation) import DataStackStorage
import Foundation
@_spi(StoreImplementation) import ObjectGraph

// How property values are written to and read from Core Data's columns.
extension Statement {
    /// Binds a slot value as Core Data stores it: dates as seconds since
    /// 2001-01-01, booleans as 0/1, UUIDs as 16 bytes, URLs and decimals as
    /// text and double, to-one relationships as the destination's primary key.
    func bind(_ value: PropertyValue, at index: Int32) throws {
        switch value {
        case .null: try bindNull(at: index)
        case .integer(let v): try bind(v, at: index)
        case .double(let v): try bind(v, at: index)
        case .bool(let v): try bind(Int64(v ? 1 : 0), at: index)
        case .string(let v): try bind(v, at: index)
        case .date(let v): try bind(v.timeIntervalSinceReferenceDate, at: index)
        case .data(let v): try bind(v, at: index)
        case .uuid(let v): try bind(withUnsafeBytes(of: v.uuid) { Data($0) }, at: index)
        case .uri(let v): try bind(v.absoluteString, at: index)
        case .decimal(let v): try bind(NSDecimalNumber(decimal: v).doubleValue, at: index)
        case .object(let id):
            if let pk = id.primaryKey { try bind(pk, at: index) } else { try bindNull(at: index) }
        case .objects: try bindNull(at: index)
        }
    }

    /// Binds a value of a row to be run by ``execute()``: text as
    /// ``bindForExecution(_:at:)-(String,_)`` binds it, the rest as ``bind(_:at:)-(PropertyValue,_)``.
    func bindForExecution(_ value: PropertyValue, at index: Int32) throws {
        if case .string(let text) = value {
            try bindForExecution(text, at: index)
        } else {
            try bind(value, at: index)
        }
    }

    /// Reads a column as a value of an attribute of `type`, tolerating the
    /// storage classes older Core Data versions used (whole-second dates as integers).
    /// ``attributeValue(at:type:)`` into a row kept as bytes: text and blobs
    /// are copied as they are, not made into strings and data; what has no
    /// compact form is kept as the value `attributeValue` gives.
    @inline(__always)   // once per column of every row a fetch of faults reads
    func encodeAttribute(at index: Int32, type: AttributeType, into row: EncodedStoreNode.Builder) {
        // One column lookup per column (``ColumnValue``): its type and its contents from one value.
        let column = column(at: index)
        switch type {
        case .string:
            column.withText { text in if let text { row.appendString(utf8: text) } else { row.appendNull() } }
        case .uri:
            column.withText { text in if let text { row.appendURI(utf8: text) } else { row.appendNull() } }
        case .binaryData, .transformable:
            withBlob(at: index) { bytes in if let bytes { row.appendData(bytes) } else { row.appendNull() } }
        case .double, .float, .date, .boolean, .integer16, .integer32, .integer64:
            // As `attributeValue`: SQLite converts what the column holds.
            // A date column has NUMERIC affinity, so a whole date is stored as an integer.
            let storage = column.type
            switch type {
            case _ where storage == .null: row.appendNull()
            case .double, .float: row.appendDouble(column.double)
            case .date: row.appendDate(secondsSinceReferenceDate: column.double)
            case .boolean: row.appendBool(column.int64 != 0)
            case _ where storage == .double: row.append(attributeValue(at: index, type: type))
            default: row.appendInteger(column.int64)
            }
        case .decimal, .uuid:
            row.append(attributeValue(at: index, type: type))
        }
    }

    @inline(__always)   // once per column of every row a fetch of values reads
    func attributeValue(at index: Int32, type: AttributeType) -> PropertyValue {
        // Text tells NULL apart by itself (`withText`), without a type check
        // first: strings are the most common attribute. One column lookup
        // (``ColumnValue``), not the text's and then its length's.
        if type == .string {
            return column(at: index).withText { text in text.map { .string(String(decoding: $0, as: UTF8.self)) } } ?? .null
        }
        // Numbers read their type and value from one column lookup (``ColumnValue``).
        let column = column(at: index)
        let storage: ColumnType = type == .uri ? .text : column.type
        if storage == .null { return .null }
        switch type {
        case .integer16, .integer32, .integer64:
            return storage == .double ? .integer(truncating: column.double) : .integer(column.int64)
        case .boolean:
            return .bool(column.int64 != 0)
        case .double, .float:
            return .double(column.double)
        case .decimal:
            if storage == .text, let text = string(at: index), let decimal = Decimal(string: text) { return .decimal(decimal) }
            return .decimal(fromStored: double(at: index))
        case .string:
            return string(at: index).map(PropertyValue.string) ?? .null
        case .uri:
            return string(at: index).flatMap(URL.init(string:)).map(PropertyValue.uri) ?? .null
        case .date:
            return .date(Date(timeIntervalSinceReferenceDate: column.double))
        case .binaryData, .transformable:
            return data(at: index).map(PropertyValue.data) ?? .null
        case .uuid:
            guard let data = data(at: index), data.count == 16 else {
                return string(at: index).flatMap(UUID.init(uuidString:)).map(PropertyValue.uuid) ?? .null
            }
            let uuid = data.withUnsafeBytes { UUID(uuid: $0.loadUnaligned(as: uuid_t.self)) }
            return .uuid(uuid)
        }
    }
}
