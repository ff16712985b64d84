import Foundation

// MARK: - String operators, folding and value families, per dialect
//
// SQLite runs the `DS_` functions the store installs (PredicateSQLFunctions.swift),
// which call the in-memory evaluator's own code, so the two agree to the
// character. PostgreSQL cannot call Swift: there the operators are written
// with its built-in functions, which agree with the evaluator on text
// without `[d]`:
// - `BEGINSWITH` `starts_with(a, b)`, `ENDSWITH` `right(a, length(b)) = b`,
//   `CONTAINS` `strpos(a, b) > 0`;
// - `LIKE` `a LIKE b`, with `b`'s `*` and `?` turned into `%` and `_` and its
//   own `%`, `_` and `\` escaped;
// - `MATCHES` `a ~ ('^(?:' || b || ')$')` (`~*` with `[c]`): the whole string,
//   as ICU's `matches`; PostgreSQL's regular expressions are POSIX ARE, which
//   agree with ICU's on the common syntax but not on every extension;
// - `[c]` `lower()` on both sides. `[d]` throws: PostgreSQL removes accents only
//   through the `unaccent` extension, whose rules are not Foundation's.
extension PredicateSQLCompiler {
    /// `BEGINSWITH`, `ENDSWITH`, `CONTAINS`, `LIKE` or `MATCHES` of `left` against `right`.
    func stringTest(_ op: ComparisonOperator, _ left: Operand, _ right: Operand, options: ComparisonOptions) throws -> String {
        guard dialect == .postgreSQL else {
            let function: String
            switch op {
            case .beginsWith: function = "DS_BEGINSWITH"
            case .endsWith: function = "DS_ENDSWITH"
            case .contains: function = "DS_CONTAINS"
            case .like: function = "DS_LIKE"
            default: function = "DS_MATCHES"
            }
            return "\(function)(\(left.sql), \(right.sql), \(options.rawValue))"
        }
        if left.isNil || right.isNil { return "NULL" }
        guard left.family == .text, right.family == .text else {
            throw PredicateProblem("\(op.rawValue) compares text, and PostgreSQL compares a string with nothing else")
        }
        if op == .matches {
            try requireNoDiacriticFolding(options)
            let test = options.contains(.caseInsensitive) ? "~*" : "~"
            return "(\(left.sql) \(test) ('^(?:' || \(right.sql) || ')$'))"
        }
        let a = try folded(left, options).sql, b = try folded(right, options).sql
        switch op {
        case .beginsWith: return "starts_with(\(a), \(b))"
        case .endsWith: return "(right(\(a), length(\(b))) = \(b))"
        case .contains: return "(strpos(\(a), \(b)) > 0)"
        default:
            // Escape LIKE's own wildcards and escape character, then turn Core Data's into them.
            var pattern = b
            for (from, to) in [("\\\\", "\\\\\\\\"), ("%", "\\\\%"), ("_", "\\\\_"), ("*", "%"), ("?", "_")] {
                pattern = "replace(\(pattern), E'\(from)', E'\(to)')"
            }
            return "(\(a) LIKE \(pattern))"
        }
    }

    /// `operand` folded for `[c]`/`[d]`.
    func folded(_ operand: Operand, _ options: ComparisonOptions) throws -> Operand {
        guard !options.isEmpty else { return operand }
        switch dialect {
        case .sqlite:
            return Operand(sql: "DS_FOLD(\(operand.sql), \(options.rawValue))", family: operand.family)
        case .postgreSQL:
            try requireNoDiacriticFolding(options)
            // Only text folds; the evaluator leaves other values as they are.
            guard operand.family == .text else { return operand }
            return Operand(sql: "lower(\(operand.sql))", family: operand.family)
        }
    }

    private func requireNoDiacriticFolding(_ options: ComparisonOptions) throws {
        if options.contains(.diacriticInsensitive) {
            throw PredicateProblem("[d] (diacritic-insensitive) comparisons can't be compiled for PostgreSQL, which has no accent folding built in")
        }
    }

    /// Throws unless every operand that is not nil is of one family (PostgreSQL only).
    func requireOneFamily(_ operands: [Operand]) throws {
        let families = Set(operands.compactMap(\.family))
        guard families.count > 1 else { return }
        let names = families.map { family -> String in
            switch family {
            case .numeric: "a number"
            case .text: "text"
            case .blob: "binary data"
            }
        }.sorted()
        throw PredicateProblem("the comparison puts \(names.joined(separator: " beside ")), and PostgreSQL compares values of one kind only")
    }

    /// The rows of a long `IN` list bound as one JSON array (``PredicateSQLList``).
    func jsonListSQL(_ array: Operand) -> String {
        switch dialect {
        case .sqlite:
            return "SELECT value FROM json_each(\(array.sql))"
        case .postgreSQL:
            let element = array.family == .text ? "v" : "v::bigint"
            return "SELECT \(element) FROM jsonb_array_elements_text(\(array.sql)::jsonb) AS v"
        }
    }
}
