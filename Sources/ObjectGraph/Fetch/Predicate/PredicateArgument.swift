import Foundation

/// A value that can stand for `%@` in a predicate format or for a `$variable`.
///
/// `ManagedObject` conforms, giving `.object(objectID)`, so
/// `FetchPredicate(format: "company == %@", apple)` compares by object ID. The
/// value is read once, when the predicate is created: the predicate never keeps
/// the object, so it stays `Sendable`.
public protocol PredicateArgumentConvertible {
    /// The constant the argument stands for.
    var predicateArgument: PropertyValue { get }
}

extension PropertyValue: PredicateArgumentConvertible {
    public var predicateArgument: PropertyValue { self }
}

extension ObjectID: PredicateArgumentConvertible {
    public var predicateArgument: PropertyValue { .object(self) }
}

/// Turns format arguments and substitution values into predicate constants.
enum PredicateArgument {
    /// `value` as a constant expression: a scalar constant, or a collection for an array or a set.
    ///
    /// - Parameter depth: the depth the expression takes in the predicate's
    ///   tree; arrays nested so deep that their elements would pass
    ///   ``FetchPredicate/maximumDepth`` are refused.
    /// - Throws: a ``PredicateProblem`` naming the unsupported type, or the depth.
    static func expression(from value: Any?, for specifier: String, depth: Int) throws -> PredicateNode {
        guard depth <= FetchPredicate.maximumDepth else { throw PredicateProblem(PredicateLimits.depthReason) }
        guard let value = unwrap(value) else { return .constant(.null) }
        if let scalar = scalar(from: value) { return .constant(scalar) }
        if let array = value as? [Any] {
            return .collection(try array.map { try expression(from: $0, for: specifier, depth: depth + 1) })
        }
        if let set = value as? Set<AnyHashable> {
            // A set has no order; sort the constants so equal sets give equal predicates.
            let elements = try set.map { try expression(from: $0.base, for: specifier, depth: depth + 1) }
            return .collection(elements.sorted { String(describing: $0) < String(describing: $1) })
        }
        throw PredicateProblem("unsupported argument type \(type(of: value)) for \(specifier)")
    }

    /// `value` as an integer, for `%d`, `%i`, `%ld` and friends.
    static func integer(from value: Any?, for specifier: String) throws -> PredicateNode {
        guard let value = unwrap(value) else { return .constant(.null) }
        if let integer = PropertyValue.integer(from: value) { return .constant(.integer(integer)) }
        if let bool = value as? Bool { return .constant(.integer(bool ? 1 : 0)) }
        throw PredicateProblem("unsupported argument type \(type(of: value)) for \(specifier); it takes an integer")
    }

    /// `value` as a floating-point number, for `%f`, `%lf`, `%g` and `%e`.
    static func double(from value: Any?, for specifier: String) throws -> PredicateNode {
        guard let value = unwrap(value) else { return .constant(.null) }
        if let double = value as? Double { return .constant(.double(double)) }
        if let float = value as? Float { return .constant(.double(Double(float))) }
        if let integer = PropertyValue.integer(from: value) { return .constant(.double(Double(integer))) }
        if let decimal = value as? Decimal { return .constant(.double(PredicateScalar.double(from: decimal))) }
        throw PredicateProblem("unsupported argument type \(type(of: value)) for \(specifier); it takes a number")
    }

    /// `value` as a key path, for `%K`.
    static func keyPath(from value: Any?) throws -> [String] {
        guard let value = unwrap(value) else {
            throw PredicateProblem("%K needs a key path string, not nil")
        }
        guard let string = value as? String else {
            throw PredicateProblem("unsupported argument type \(type(of: value)) for %K; it takes a key path string")
        }
        let keys = string.split(separator: ".", maxSplits: FetchPredicate.maximumKeyPathLength,
                                omittingEmptySubsequences: false).map(String.init)
        guard !string.isEmpty, !keys.contains(where: \.isEmpty) else {
            throw PredicateProblem("'\(string)' given for %K is not a key path")
        }
        guard keys.count <= FetchPredicate.maximumKeyPathLength else {
            throw PredicateProblem(PredicateLimits.keyPathReason(of: "the key path given for %K"))
        }
        return keys
    }

    // MARK: - Scalars

    private static func scalar(from value: Any) -> PropertyValue? {
        switch value {
        case let v as PredicateArgumentConvertible: return v.predicateArgument
        case is NSNull: return .null
        case let v as String: return .string(v)
        case let v as Substring: return .string(String(v))
        case let v as Bool: return .bool(v)
        case let v as Double: return .double(v)
        case let v as Float: return .double(Double(v))
        case let v as Decimal: return .decimal(v)
        case let v as Date: return .date(v)
        case let v as Data: return .data(v)
        case let v as UUID: return .uuid(v)
        case let v as URL: return .uri(v)
        default: return PropertyValue.integer(from: value).map { .integer($0) }
        }
    }

    /// Looks through `Optional`s nested in `Any` (an `[Any]` may hold `String?` values).
    private static func unwrap(_ value: Any?) -> Any? {
        guard let value else { return nil }
        let mirror = Mirror(reflecting: value)
        guard mirror.displayStyle == .optional else { return value }
        return unwrap(mirror.children.first?.value)
    }
}
