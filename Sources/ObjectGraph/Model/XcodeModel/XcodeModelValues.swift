import Foundation

/// How the strings in an Xcode model file become typed values: attribute type
/// names, delete rules, flags, and default, minimum and maximum values.
///
/// Each function returns nil for a string it cannot read, and the caller turns that
/// into a ``ModelLoadingError`` naming the element. Nothing is guessed: a default
/// of `"ten"` for an integer attribute is an error, not zero.
enum XcodeModelValues {
    /// The ``AttributeType`` for Xcode's `attributeType` name, as the model editor writes it.
    static let attributeTypes: [String: AttributeType] = [
        "Integer 16": .integer16,
        "Integer 32": .integer32,
        "Integer 64": .integer64,
        "Double": .double,
        "Float": .float,
        "Decimal": .decimal,
        "Boolean": .boolean,
        "String": .string,
        "Date": .date,
        "Binary": .binaryData,
        "UUID": .uuid,
        "URI": .uri,
        "Transformable": .transformable,
    ]

    /// Why a type name that Xcode can write has no ``AttributeType`` here.
    static func unsupportedTypeReason(_ name: String) -> String? {
        switch name {
        case "Undefined":
            "\"Undefined\" attributes are transient placeholders whose values Core Data never stores; declare a concrete type"
        case "ObjectID":
            "\"ObjectID\" attributes hold object IDs, which are not stored in attributes here; use a relationship"
        case "Composite":
            "composite attributes (Core Data 2023) are not supported; flatten them into separate attributes"
        default:
            nil
        }
    }

    /// Xcode's `deletionRule` names.
    static let deleteRules: [String: DeleteRule] = [
        "Nullify": .nullify,
        "Cascade": .cascade,
        "Deny": .deny,
        "No Action": .noAction,
        "NoAction": .noAction,
    ]

    /// Reads Xcode's `YES`/`NO` and the spellings hand-edited files use.
    static func bool(from string: String) -> Bool? {
        switch string.trimmingCharacters(in: .whitespaces).lowercased() {
        case "yes", "true", "1": true
        case "no", "false", "0": false
        default: nil
        }
    }

    /// Reads a default, minimum or maximum value written as a string, for an
    /// attribute of `type`.
    ///
    /// - Integers accept a whole number, also written with a fractional part of
    ///   zero (`"2.0"`), and must fit the type's width.
    /// - Dates accept seconds since 2001-01-01 (how Xcode stores them), ISO 8601,
    ///   or `yyyy-MM-dd HH:mm:ss Z` (how `NSDate` prints).
    /// - Binary and transformable attributes have no textual default: nil.
    static func value(from string: String, for type: AttributeType) -> PropertyValue? {
        let trimmed = string.trimmingCharacters(in: .whitespacesAndNewlines)
        switch type {
        case .integer16, .integer32, .integer64:
            guard let integer = integer(from: trimmed), let range = type.integerRange, range.contains(integer) else { return nil }
            return .integer(integer)
        case .double, .float:
            return Double(trimmed).map(PropertyValue.double)
        case .decimal:
            // Decimal(string:) accepts a numeric prefix ("1abc" reads as 1); insist on a whole number.
            guard Double(trimmed) != nil, let decimal = Decimal(string: trimmed, locale: Locale(identifier: "en_US_POSIX")) else { return nil }
            return .decimal(decimal)
        case .boolean:
            return bool(from: trimmed).map(PropertyValue.bool)
        case .string:
            return .string(string)
        case .date:
            return date(from: trimmed).map(PropertyValue.date)
        case .uuid:
            return UUID(uuidString: trimmed).map(PropertyValue.uuid)
        case .uri:
            return URL(string: trimmed).map(PropertyValue.uri)
        case .binaryData, .transformable:
            return nil
        }
    }

    /// A whole number, also when written with a zero fraction.
    static func integer(from string: String) -> Int64? {
        if let integer = Int64(string) { return integer }
        guard let double = Double(string), double.rounded() == double, let integer = Int64(exactly: double) else { return nil }
        return integer
    }

    /// A date written as seconds since 2001-01-01 00:00:00 UTC or as a calendar date.
    static func date(from string: String) -> Date? {
        if let seconds = Double(string) { return Date(timeIntervalSinceReferenceDate: seconds) }
        let iso = ISO8601DateFormatter()
        if let date = iso.date(from: string) { return date }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        for format in ["yyyy-MM-dd HH:mm:ss Z", "yyyy-MM-dd HH:mm:ss", "yyyy-MM-dd"] {
            formatter.dateFormat = format
            if let date = formatter.date(from: string) { return date }
        }
        return nil
    }

    /// Sets an attribute's minimum and maximum from the strings a model file
    /// holds: values for numbers and dates, lengths for strings, binary data and
    /// transformables. Used by the XML and the Xcode 3 readers alike.
    ///
    /// - Returns: false when bounds have no meaning for the type (booleans,
    ///   UUIDs, URIs) and were left unset, for the caller to warn about.
    /// - Throws: ``InvalidLimit`` naming the bound that does not read, as in
    ///   `minimum "ten" is not an integer of 16 bits`.
    static func applyLimits(minimum: String?, maximum: String?, to attribute: AttributeDescription) throws(InvalidLimit) -> Bool {
        let type = attribute.type
        switch type {
        case .integer16, .integer32, .integer64, .double, .float, .decimal, .date:
            func bound(_ string: String, _ what: String) throws(InvalidLimit) -> PropertyValue {
                guard let value = value(from: string, for: type) else {
                    throw InvalidLimit(description: "\(what) \"\(string)\" is not \(type.valueDescription)")
                }
                return value
            }
            if let minimum { attribute.minimumValue = try bound(minimum, "minimum") }
            if let maximum { attribute.maximumValue = try bound(maximum, "maximum") }
            return true
        case .string, .binaryData, .transformable:
            func length(_ string: String, _ what: String) throws(InvalidLimit) -> Int {
                guard let count = count(from: string) else {
                    throw InvalidLimit(description: "\(what) length \"\(string)\" is not a whole number")
                }
                return count
            }
            if let minimum { attribute.minimumLength = try length(minimum, "minimum") }
            if let maximum { attribute.maximumLength = try length(maximum, "maximum") }
            return true
        case .boolean, .uuid, .uri:
            return false
        }
    }

    /// Sets an attribute's regular expression when the pattern compiles.
    /// Used by every model reader (Xcode XML, Xcode 3, compiled).
    ///
    /// - Returns: false, leaving the attribute as it was, when the pattern does
    ///   not compile; the caller throws, naming the attribute and the pattern.
    static func applyRegularExpression(_ pattern: String, to attribute: AttributeDescription) -> Bool {
        // Only whether it compiles matters here; the parser's own message says less than the pattern.
        guard (try? NSRegularExpression(pattern: pattern)) != nil else { return false }
        attribute.regularExpression = pattern
        return true
    }

    /// A minimum or maximum that does not read as its attribute's type; the
    /// caller prefixes the attribute (`Item.count minimum "ten" is not …`).
    struct InvalidLimit: Error, CustomStringConvertible {
        let description: String
    }

    /// A non-negative count (`minCount`, `maxCount`, lengths).
    static func count(from string: String) -> Int? {
        guard let value = Int(string.trimmingCharacters(in: .whitespaces)), value >= 0 else { return nil }
        return value
    }
}
