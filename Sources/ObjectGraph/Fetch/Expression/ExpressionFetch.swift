import Foundation

/// The computed part of a dictionary fetch, checked against the entity: the
/// values to fetch, the grouping, the having predicate and the order of the
/// results (Core Data: `propertiesToFetch` with `NSExpressionDescription`s,
/// `propertiesToGroupBy`, `havingPredicate`).
///
/// A context builds it from a ``FetchRequest`` whose `.dictionary` fetch has an
/// ``ExpressionDescription``, a key path through a relationship, grouping or a
/// having predicate, and hands it to the store in ``StoreFetch/expressions``.
/// The SQLite store compiles it to one `SELECT … GROUP BY … HAVING … ORDER BY … LIMIT`;
/// the in-memory store evaluates it with the same results.
///
/// Each store applies, in SQL's order: the fetch's predicate, the grouping (one
/// group for the whole fetch when there are aggregates but no grouping, one
/// per object when there are neither), the having predicate, the values,
/// ``StoreFetch/returnsDistinctResults``, the sort, the offset and the limit.
public struct ExpressionFetch: Sendable {
    /// One value of each result dictionary.
    public struct Column: Sendable {
        /// The key in the result dictionary.
        public var name: String
        public var expression: FetchExpression
        /// The type the value is read as.
        public var resultType: AttributeType
    }

    /// The values of each result, in `propertiesToFetch` order.
    public var columns: [Column]
    /// What the objects are grouped by; empty for no grouping.
    public var groupBy: [FetchExpression]
    /// Which groups are kept; its `$name` variables are the values of ``columns``.
    public var having: FetchPredicate?
    /// For each of the fetch's sort descriptors, the index of the column it sorts by.
    public var sortColumns: [Int]

    /// Whether objects are reduced to groups (by grouping or by an aggregate), rather than read one by one.
    public var isAggregating: Bool {
        !groupBy.isEmpty || columns.contains { $0.expression.node.containsAggregate }
    }
}

// MARK: - Checking a request

extension ExpressionFetch {
    /// The computed part of `request`, or nil when it is a plain fetch (no
    /// expression, no key path through a relationship, no grouping or having).
    ///
    /// Core Data's rules are checked here, so that both stores refuse the same
    /// requests with the same error: expressions, grouping and having need
    /// `.dictionary` results; in a grouped or aggregating fetch every value must
    /// be an aggregate or read only grouped key paths; a having predicate needs
    /// grouping; sorts name fetched values.
    ///
    /// - Throws: ``FetchExpressionError`` naming the part of the request.
    init?<Result>(request: FetchRequest<Result>, entity: EntityDescription) throws {
        guard Self.isComputed(request) else { return nil }
        let checker = ExpressionChecker(entity: entity)
        guard request.resultType == .dictionary else {
            let location = request.havingPredicate != nil ? "havingPredicate"
                : request.propertiesToGroupBy.isEmpty ? "propertiesToFetch" : "propertiesToGroupBy"
            throw checker.error(.needsDictionaryResults, location,
                                "expressions, grouping and having need dictionary results (resultType = .dictionary)")
        }
        columns = try Self.columns(request.propertiesToFetch ?? [], checker: checker)
        groupBy = try Self.groupBy(request.propertiesToGroupBy, columns: columns, checker: checker)
        having = request.havingPredicate
        sortColumns = []   // read once the grouping is checked, so that its errors come first, as they always have
        let grouped = Set(groupBy.flatMap(\.node.keyPathsOutsideAggregates))
        try checkColumnsAreGrouped(grouped, checker: checker)
        if let having {
            try checkHaving(having, grouped: grouped, checker: checker)
        }
        sortColumns = try sortColumns(of: request.sortDescriptors, checker: checker)
    }

    /// Whether the request computes anything: an expression, a key path through
    /// a relationship, grouping or a having predicate.
    private static func isComputed<Result>(_ request: FetchRequest<Result>) -> Bool {
        !request.propertiesToGroupBy.isEmpty || request.havingPredicate != nil
            || (request.propertiesToFetch ?? []).contains { if case .keyPath(let keyPath) = $0 { keyPath.contains(".") } else { true } }
    }

    /// The fetched values, each checked against the entity; names are unique.
    private static func columns(_ properties: [PropertyToFetch], checker: ExpressionChecker) throws -> [Column] {
        var columns: [Column] = []
        for (index, property) in properties.enumerated() {
            let location = "propertiesToFetch[\(index)] '\(property.name)'"
            if columns.contains(where: { $0.name == property.name }) {
                throw checker.error(.unknownName, location, "another fetched value already has this name")
            }
            switch property {
            case .keyPath(let keyPath):
                let expression = FetchExpression.keyPath(keyPath)
                guard let type = try checker.type(of: expression.node, at: location) else {
                    throw checker.error(.unknownKeyPath, location, "\(keyPath) is a relationship; fetch one of its destination's attributes")
                }
                columns.append(Column(name: keyPath, expression: expression, resultType: type))
            case .expression(let description):
                _ = try checker.type(of: description.expression.node, at: location)
                columns.append(Column(name: description.name, expression: description.expression, resultType: description.resultType))
            }
        }
        if columns.isEmpty {
            throw checker.error(.unknownName, "propertiesToFetch", "a grouped or computed fetch needs the values to fetch")
        }
        return columns
    }

    /// The grouping: a fetched value's expression by its name, else a key path
    /// to an attribute; never an aggregate.
    private static func groupBy(_ names: [String], columns: [Column], checker: ExpressionChecker) throws -> [FetchExpression] {
        try names.enumerated().map { index, name in
            let location = "propertiesToGroupBy[\(index)] '\(name)'"
            let expression = columns.first { $0.name == name }?.expression ?? .keyPath(name)
            if expression.node.containsAggregate {
                throw checker.error(.notGrouped, location, "\(expression) is an aggregate; group by key paths")
            }
            if try checker.type(of: expression.node, at: location) == nil {
                throw checker.error(.unknownKeyPath, location, "\(name) is a relationship; group by one of its destination's attributes")
            }
            return expression
        }
    }

    /// In a grouped or aggregating fetch, each fetched value is grouped or reads
    /// key paths only inside aggregates.
    private func checkColumnsAreGrouped(_ grouped: Set<[String]>, checker: ExpressionChecker) throws {
        guard isAggregating else { return }
        for (index, column) in columns.enumerated() where !groupBy.contains(column.expression) {
            if let loose = column.expression.node.keyPathsOutsideAggregates.first(where: { !grouped.contains($0) }) {
                throw checker.error(.notGrouped, "propertiesToFetch[\(index)] '\(column.name)'",
                                    "\(loose.joined(separator: ".")) is neither in propertiesToGroupBy nor inside an aggregate")
            }
        }
    }

    /// The column each sort descriptor names: the results are sorted by their fetched values.
    private func sortColumns(of sortDescriptors: [FetchSort], checker: ExpressionChecker) throws -> [Int] {
        try sortDescriptors.enumerated().map { index, sort in
            if sort.relevanceQuery != nil {
                throw checker.error(.unknownName, "sortDescriptors[\(index)] '\(sort.key)'",
                                    "a computed or grouped fetch can't sort by relevance; it sorts by its fetched values")
            }
            guard let column = columns.firstIndex(where: { $0.name == sort.key }) else {
                throw checker.error(.unknownName, "sortDescriptors[\(index)] '\(sort.key)'",
                                    "a computed or grouped fetch sorts by the names of its fetched values")
            }
            return column
        }
    }

    /// A having predicate reads fetched values as `$name` and otherwise only grouped key paths.
    private func checkHaving(_ having: FetchPredicate, grouped: Set<[String]>, checker: ExpressionChecker) throws {
        guard !groupBy.isEmpty else {
            throw checker.error(.notGrouped, "havingPredicate", "a having predicate needs propertiesToGroupBy")
        }
        do {
            try having.checkBounds()
        } catch {
            throw error.error(format: having.source ?? having.description)
        }
        var problem: FetchExpressionError?
        _ = having.expression.rewritten { node in
            switch node {
            case .variable(let name, let keys) where problem == nil:
                if !keys.isEmpty || !columns.contains(where: { $0.name == name }) {
                    problem = checker.error(.unknownName, "havingPredicate",
                                            "$\(([name] + keys).joined(separator: ".")) names no fetched value")
                }
            case .keyPath(let keys) where problem == nil && !grouped.contains(keys):
                problem = checker.error(.notGrouped, "havingPredicate",
                                        "\(keys.joined(separator: ".")) is not in propertiesToGroupBy; name fetched values as $name")
            case .aggregate, .subquery:
                if problem == nil {
                    problem = checker.error(.notGrouped, "havingPredicate", "use a fetched aggregate as $name, not a collection operator")
                }
            default:
                break
            }
            return nil
        }
        if let problem { throw problem }
    }
}
