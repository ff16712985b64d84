import Foundation

extension FetchExpression {
    /// Checks the expression against `entity`, for a request of one's own (a
    /// batch update's values), and returns the type of its value (nil for an
    /// object or the constant nil).
    ///
    /// - Throws: ``FetchExpressionError`` at `location`, as a fetch would throw it.
    package func check(for entity: EntityDescription, at location: String) throws -> AttributeType? {
        try ExpressionChecker(entity: entity).type(of: node, at: location)
    }
}

/// Checks an expression against an entity and infers the type of its value,
/// so that a bad request fails before any store sees it.
struct ExpressionChecker {
    let entity: EntityDescription

    func error(_ code: FetchExpressionError.Code, _ location: String, _ reason: String) -> FetchExpressionError {
        FetchExpressionError(code, entityName: entity.name, location: location, message: reason)
    }

    /// The type of the expression's value; nil for an object (a key path ending
    /// at a to-one relationship, or the object itself) or the constant nil.
    ///
    /// - Throws: ``FetchExpressionError`` for an unknown or to-many key path,
    ///   `sum`/`average`/arithmetic over something not numeric, an object where
    ///   a value is needed, or an aggregate inside an aggregate.
    func type(of node: FetchExpression.Node, at location: String, insideAggregate: Bool = false) throws -> AttributeType? {
        switch node {
        case .keyPath(let keys):
            let info: KeyPathInfo
            do {
                info = try KeyPathInfo.walk(keys, from: entity)
            } catch let problem as PredicateProblem {
                throw error(.unknownKeyPath, location, problem.reason)
            }
            if info.crossesToMany {
                throw error(.unknownKeyPath, location, "\(FetchExpression.Node.keyPath(keys)) crosses a to-many relationship")
            }
            if info.entity == nil && info.attribute == nil {
                throw error(.unknownKeyPath, location, "\(keys.joined(separator: ".")) is not an attribute")
            }
            return info.attribute?.type
        case .constant(let value):
            return Self.type(of: value)
        case .arithmetic(let op, let lhs, let rhs):
            let types = try [lhs, rhs].map { operand -> AttributeType? in
                let type = try self.type(of: operand, at: location, insideAggregate: insideAggregate)
                if let type, !type.isNumeric {
                    throw error(.needsNumbers, location, "\(op.rawValue) needs numbers, and \(operand) is \(type.rawValue)")
                }
                if type == nil, case .keyPath = operand {
                    throw error(.needsNumbers, location, "\(op.rawValue) needs numbers, and \(operand) is an object")
                }
                return type
            }
            if op == .divide { return .double }
            if (op == .add || op == .subtract), types.contains(.date) { return .date }
            if types.allSatisfy({ $0 == nil || [.integer16, .integer32, .integer64, .boolean].contains($0!) }) { return .integer64 }
            return .double
        case .aggregate(let function, let argument):
            if insideAggregate {
                throw error(.notGrouped, location, "\(node) is an aggregate inside an aggregate")
            }
            let type = try self.type(of: argument, at: location, insideAggregate: true)
            switch function {
            case .count, .countDistinct:
                return .integer64
            case .sum, .average:
                if let type, !type.isNumeric {
                    throw error(.needsNumbers, location, "\(function.rawValue) needs numbers, and \(argument) is \(type.rawValue)")
                }
                if type == nil, case .keyPath = argument {
                    throw error(.needsNumbers, location, "\(function.rawValue) needs numbers, and \(argument) is an object")
                }
                return .double
            case .min, .max:
                if type == nil, case .keyPath = argument {
                    throw error(.unknownKeyPath, location, "\(function.rawValue) needs an attribute, and \(argument) is an object")
                }
                return type
            }
        }
    }

    /// The attribute type a constant is stored as.
    static func type(of value: PropertyValue) -> AttributeType? {
        switch value {
        case .null, .object, .objects: nil
        case .integer: .integer64
        case .double: .double
        case .bool: .boolean
        case .string: .string
        case .date: .date
        case .data: .binaryData
        case .uuid: .uuid
        case .uri: .uri
        case .decimal: .decimal
        }
    }
}
