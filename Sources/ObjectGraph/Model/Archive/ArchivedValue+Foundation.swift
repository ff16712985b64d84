import Foundation

extension ArchivedValue {
    /// The value as plain Swift and Foundation types, as `NSKeyedUnarchiver` would
    /// hand it to Swift: `String`, `Int`, `Double`, `Bool`, `Date`, `Data`, `UUID`,
    /// `URL`, `NSNull`, `[Any]`, `[AnyHashable: Any]` and `Set<AnyHashable>`.
    ///
    /// So `value as? [String]` and `value as? [String: Any]` work. Dictionary keys
    /// and set members are ``hashableFoundationValue``.
    public var foundationValue: Any {
        switch self {
        case .array(let elements):
            elements.map(\.foundationValue)
        case .dictionary(let dictionary):
            Dictionary(dictionary.map { ($0.key.hashableFoundationValue, $0.value.foundationValue) },
                       uniquingKeysWith: { first, _ in first })
        default:
            hashableFoundationValue.base
        }
    }

    /// The value as a hashable Swift value: as ``foundationValue``, with arrays
    /// as `[AnyHashable]` and dictionaries as `[AnyHashable: AnyHashable]`.
    public var hashableFoundationValue: AnyHashable {
        switch self {
        case .null: AnyHashable(NSNull())
        case .bool(let bool): AnyHashable(bool)
        case .integer(let integer): Int(exactly: integer).map { AnyHashable($0) } ?? AnyHashable(integer)
        case .double(let double): AnyHashable(double)
        case .string(let string): AnyHashable(string)
        case .date(let date): AnyHashable(date)
        case .data(let data): AnyHashable(data)
        case .uuid(let uuid): AnyHashable(uuid)
        case .url(let url): AnyHashable(url)
        case .array(let elements): AnyHashable(elements.map(\.hashableFoundationValue))
        case .dictionary(let dictionary):
            AnyHashable(Dictionary(dictionary.map { ($0.key.hashableFoundationValue, $0.value.hashableFoundationValue) },
                                   uniquingKeysWith: { first, _ in first }))
        case .set(let members): AnyHashable(Set(members.map(\.hashableFoundationValue)))
        }
    }

    /// A value from Swift or Foundation types; nil when `any` is, or contains,
    /// something a secure-coding archive of Foundation values cannot hold.
    ///
    /// Takes `String`, `Bool`, every fixed-width integer that fits `Int64`,
    /// `Double`, `Float`, `Decimal` (as a double), `Date`, `Data`, `UUID`, `URL`,
    /// `NSNull`, `NSNumber`, arrays, dictionaries and sets of these (as `[Any]`,
    /// `[AnyHashable: Any]`, `Set<AnyHashable>`, or any `NSArray`, `NSDictionary`,
    /// `NSSet`), `AnyHashable` wrapping any of them, and `ArchivedValue` itself.
    /// A Swift `Bool` becomes ``bool(_:)``; an `NSNumber` becomes ``double(_:)``
    /// when it holds a floating-point number, else ``integer(_:)``.
    public init?(_ any: Any) {
        switch any {
        case let value as ArchivedValue: self = value
        case let value as AnyHashable where type(of: any) == AnyHashable.self:
            guard let unwrapped = ArchivedValue(value.base) else { return nil }
            self = unwrapped
        case is NSNull: self = .null
        case let value as String where type(of: any) == String.self: self = .string(value)
        case let value as Bool where type(of: any) == Bool.self: self = .bool(value)
        case let value as Int where type(of: any) == Int.self: self = .integer(Int64(value))
        case let value as Int64 where type(of: any) == Int64.self: self = .integer(value)
        case let value as Int32 where type(of: any) == Int32.self: self = .integer(Int64(value))
        case let value as Int16 where type(of: any) == Int16.self: self = .integer(Int64(value))
        case let value as Int8 where type(of: any) == Int8.self: self = .integer(Int64(value))
        case let value as UInt where type(of: any) == UInt.self:
            guard let integer = Int64(exactly: value) else { return nil }
            self = .integer(integer)
        case let value as UInt64 where type(of: any) == UInt64.self:
            guard let integer = Int64(exactly: value) else { return nil }
            self = .integer(integer)
        case let value as UInt32 where type(of: any) == UInt32.self: self = .integer(Int64(value))
        case let value as UInt16 where type(of: any) == UInt16.self: self = .integer(Int64(value))
        case let value as UInt8 where type(of: any) == UInt8.self: self = .integer(Int64(value))
        case let value as Double where type(of: any) == Double.self: self = .double(value)
        case let value as Float where type(of: any) == Float.self: self = .double(Double(value))
        case let value as Decimal where type(of: any) == Decimal.self:
            self = .double(NSDecimalNumber(decimal: value).doubleValue)
        case let value as Date: self = .date(value)
        case let value as Data: self = .data(value)
        case let value as UUID: self = .uuid(value)
        case let value as URL: self = .url(value)
        case let value as NSNumber:
            let type = String(cString: value.objCType)
            self = type == "d" || type == "f" ? .double(value.doubleValue) : .integer(value.int64Value)
        case let value as NSString: self = .string(value as String)
        case let values as [Any]:
            var elements: [ArchivedValue] = []
            for element in values {
                guard let converted = ArchivedValue(element) else { return nil }
                elements.append(converted)
            }
            self = .array(elements)
        case let values as [AnyHashable: Any]:
            var dictionary: [ArchivedValue: ArchivedValue] = [:]
            for (key, element) in values {
                guard let key = ArchivedValue(key.base), let element = ArchivedValue(element) else { return nil }
                dictionary[key] = element
            }
            self = .dictionary(dictionary)
        case let values as Set<AnyHashable>:
            var members: Set<ArchivedValue> = []
            for member in values {
                guard let converted = ArchivedValue(member.base) else { return nil }
                members.insert(converted)
            }
            self = .set(members)
        default:
            return nil
        }
    }
}
