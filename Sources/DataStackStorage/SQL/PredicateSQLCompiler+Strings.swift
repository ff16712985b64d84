import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - String operators and lists, as the dialect writes them
extension PredicateSQLCompiler {
    /// `BEGINSWITH`, `ENDSWITH`, `CONTAINS`, `LIKE` or `MATCHES` of `left` against `right`.
    func stringTest(_ op: ComparisonOperator, _ left: Operand, _ right: Operand, options: ComparisonOptions) throws -> String {
        let test: SQLStringTest = switch op {
        case .beginsWith: .beginsWith
        case .endsWith: .endsWith
        case .contains: .contains
        case .like: .like
        default: .matches
        }
        return try dialectWrites { try dialect.stringTest(test, left, right, options: options) }
    }

    /// `operand` folded for `[c]`/`[d]`.
    func folded(_ operand: Operand, _ options: ComparisonOptions) throws -> Operand {
        guard !options.isEmpty else { return operand }
        return try dialectWrites { try dialect.folded(operand, options: options) }
    }

    /// The rows of a long `IN` list bound as one JSON array (``PredicateSQLList``).
    func jsonListSQL(_ array: Operand) -> String {
        dialect.jsonArrayElements(array.sql, asText: array.family == .text)
    }

    /// Runs a dialect requirement, turning what it throws into the predicate's problem.
    func dialectWrites<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let problem as PredicateProblem {
            throw problem
        } catch {
            throw PredicateProblem(String(describing: error))
        }
    }
}
