import Foundation

// MARK: - Validation predicates

extension CompiledModelDecoder {
    /// `NSComparisonPredicate` operator codes (`NSPredicateOperatorType`) that
    /// Xcode's validation fields compile to.
    private enum Operator: Int64 {
        case lessThan = 0, lessThanOrEqual = 1, greaterThan = 2, greaterThanOrEqual = 3, matches = 6
    }

    /// Reads the attribute's validation predicates back into the fields Xcode
    /// compiled them from: a minimum and maximum (`SELF >= 1`), a minimum and
    /// maximum length (`length <= 20`) and a regular expression
    /// (`SELF MATCHES "…"`). Any other predicate is a warning: the attribute
    /// loads without it.
    mutating func readValidation(of object: ArchivedObject, into attribute: AttributeDescription, in context: String) throws {
        let predicates = try reading("\(context).NSValidationPredicates") { try object.objects("NSValidationPredicates") ?? [] }
        for predicate in predicates {
            if try !readComparison(predicate, into: attribute, in: context) {
                warn(predicate, "\(context): a validation predicate (\(predicate.className ?? "?")) other than a minimum, maximum, length or regular expression was ignored")
            }
        }
    }

    /// Applies one comparison predicate; false when it is not one Xcode's fields make.
    private mutating func readComparison(_ predicate: ArchivedObject, into attribute: AttributeDescription, in context: String) throws -> Bool {
        try reading("\(context) validation") {
            guard predicate.classChain.contains("NSComparisonPredicate"),
                  let left = try predicate.object("NSLeftExpression"),
                  let right = try predicate.object("NSRightExpression"),
                  let operatorObject = try predicate.object("NSPredicateOperator"),
                  let code = try operatorObject.integer("NSOperatorType"),
                  let op = Operator(rawValue: code),
                  right.classChain.contains("NSConstantValueExpression"),
                  let constant = try right.value("NSConstantValue") else { return false }

            if op == .matches {
                guard left.classChain.contains("NSSelfExpression"), case .string(let pattern) = constant else { return false }
                guard XcodeModelValues.applyRegularExpression(pattern, to: attribute) else {
                    throw error(.invalidValue, "\(context) has a regular expression that does not compile: \(pattern)")
                }
                return true
            }
            let isMinimum = op == .greaterThan || op == .greaterThanOrEqual
            if left.classChain.contains("NSSelfExpression") {
                switch attribute.type {
                case .integer16, .integer32, .integer64, .double, .float, .decimal, .date:
                    let bound = try propertyValue(constant, of: attribute.type, in: "\(context) \(isMinimum ? "minimum" : "maximum")")
                    if isMinimum { attribute.minimumValue = bound } else { attribute.maximumValue = bound }
                    return true
                default:
                    return false
                }
            }
            guard try keyPath(of: left) == "length", case .integer(let length) = constant,
                  let count = Int(exactly: length), count >= 0 else { return false }
            if isMinimum { attribute.minimumLength = count } else { attribute.maximumLength = count }
            return true
        }
    }

    /// The key path an archived key-path expression reads (`length`), or nil
    /// for any other expression.
    private func keyPath(of expression: ArchivedObject) throws -> String? {
        if expression.classChain.contains("NSKeyPathSpecifierExpression") {
            return try expression.string("NSKeyPath")
        }
        guard expression.classChain.contains("NSKeyPathExpression") || expression.classChain.contains("NSFunctionExpression"),
              let argument = try expression.objects("NSArguments")?.first else { return nil }
        if argument.classChain.contains("NSKeyPathSpecifierExpression") { return try argument.string("NSKeyPath") }
        if argument.classChain.contains("NSConstantValueExpression"), case .string(let path)? = try argument.value("NSConstantValue") {
            return path
        }
        return nil
    }
}
