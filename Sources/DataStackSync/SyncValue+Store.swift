import DataStack
import Foundation

extension SyncValue {
    /// An attribute's stored value as it travels; nil for a relationship value
    /// (those travel by global ID, which the engine looks up).
    init?(attributeValue value: PropertyValue) {
        switch value {
        case .null: self = .null
        case .integer(let number): self = .integer(number)
        case .double(let number): self = .double(number)
        case .bool(let flag): self = .bool(flag)
        case .string(let text): self = .string(text)
        case .date(let date): self = .date(date)
        case .data(let data): self = .data(data)
        case .uuid(let id): self = .uuid(id)
        case .uri(let url): self = .url(url)
        case .decimal(let decimal): self = .decimal(decimal.description)
        case .object, .objects: return nil
        }
    }

    /// The Swift value `setValue(_:forKey:)` takes for an attribute of `type`;
    /// throws `.corruptChange` when the value cannot be one (a change of
    /// another model, or damaged).
    func swiftValue(for attribute: AttributeDescription, entity: String) throws(SyncError) -> Any? {
        func mismatch() -> SyncError {
            SyncError(.corruptChange, message: "a pulled value \(self) does not fit \(entity).\(attribute.name), of type \(attribute.type)")
        }
        switch self {
        case .null: return nil
        case .integer(let number):
            switch attribute.type {
            case .integer16: guard let value = Int16(exactly: number) else { throw mismatch() }; return value
            case .integer32: guard let value = Int32(exactly: number) else { throw mismatch() }; return value
            case .integer64: return number
            case .boolean: return number != 0
            default: throw mismatch()
            }
        case .double(let number):
            switch attribute.type {
            case .float: return Float(number)
            case .double: return number
            default: throw mismatch()
            }
        case .bool(let flag): return flag
        case .string(let text): return text
        case .date(let date): return date
        case .data(let data): return data
        case .uuid(let id): return id
        case .url(let url): return url
        case .decimal(let text):
            guard let decimal = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")) else { throw mismatch() }
            return decimal
        case .object: throw mismatch()
        }
    }
}
