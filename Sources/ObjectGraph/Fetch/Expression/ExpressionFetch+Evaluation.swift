import Foundation

extension ExpressionFetch {
    /// The result dictionaries for `rows`, the objects that match the fetch's
    /// predicate, computed in memory with the SQL store's rules and order of
    /// steps (see ``ExpressionFetch``): what the in-memory store returns, and
    /// what a custom store without SQL can return.
    ///
    /// - Throws: ``FetchExpressionError`` for values the checks could not rule
    ///   out (a sum over a column holding text); ``FetchPredicateError`` from
    ///   the having predicate; whatever the subjects throw.
    ///
    /// - Complexity: O(*n* · *c* + *g* log *g*), *n* = rows, *c* = columns, *g* = groups.
    public func results(for rows: [any PredicateSubject], of fetch: StoreFetch) throws -> [[String: PropertyValue]] {
        do {
            var kept: [(raw: [PredicateScalar], values: [String: PropertyValue])] = []
            for group in try groups(of: rows) {
                let raw = try columns.map { try $0.expression.node.value(in: group) }
                if let having, try !isKept(group, having, raw) { continue }
                let values = Dictionary(uniqueKeysWithValues: zip(columns, raw).map { column, value in
                    (column.name, value.propertyValue(as: column.resultType))
                })
                kept.append((raw, values))
            }
            if fetch.returnsDistinctResults {
                var seen = Set<[String: PropertyValue]>()
                kept = kept.filter { seen.insert($0.values).inserted }
            }
            var results = kept.map(\.values)
            if !sortColumns.isEmpty {
                results = sorted(results, by: fetch.sortDescriptors)
            }
            if fetch.fetchOffset > 0 { results = Array(results.dropFirst(fetch.fetchOffset)) }
            if fetch.fetchLimit > 0 { results = Array(results.prefix(fetch.fetchLimit)) }
            return results
        } catch let problem as PredicateProblem {
            throw FetchExpressionError(.needsNumbers, entityName: fetch.entity.name, location: "propertiesToFetch", message: problem.reason)
        }
    }

    /// One group per grouped value (in order of first appearance), one for all
    /// rows when aggregating without grouping (even none: `count` is then 0),
    /// one per row otherwise.
    private func groups(of rows: [any PredicateSubject]) throws -> [ExpressionGroup] {
        guard isAggregating else { return rows.map { ExpressionGroup(rows: [$0]) } }
        guard !groupBy.isEmpty else { return [ExpressionGroup(rows: rows)] }
        var order: [[PredicateScalar]] = []
        var members: [[PredicateScalar]: [any PredicateSubject]] = [:]
        for row in rows {
            let key = try groupBy.map { try $0.node.value(in: ExpressionGroup(rows: [row])) }
            if members[key] == nil { order.append(key) }
            members[key, default: []].append(row)
        }
        return order.map { ExpressionGroup(rows: members[$0] ?? []) }
    }

    /// Whether a group passes the having predicate, its `$name`s bound to the group's values.
    private func isKept(_ group: ExpressionGroup, _ having: FetchPredicate, _ raw: [PredicateScalar]) throws -> Bool {
        var variables: [String: PredicateEvaluator.Value] = [:]
        for (column, value) in zip(columns, raw) { variables[column.name] = .scalar(value) }
        let object: PredicateEvaluator.Value = group.rows.first.map { .subject($0) } ?? .scalar(.null)
        do {
            return try PredicateEvaluator(variables: variables).test(having.expression, on: object) == true
        } catch let problem as PredicateProblem {
            throw problem.error(format: having.source ?? having.description)
        }
    }

    private func sorted(_ results: [[String: PropertyValue]], by sorts: [FetchSort]) -> [[String: PropertyValue]] {
        let keys = zip(sortColumns, sorts).map { (name: columns[$0.0].name, sort: $0.1) }
        return results.enumerated().sorted { lhs, rhs in
            for key in keys {
                let order = FetchSort.compare(lhs.element[key.name] ?? .null, rhs.element[key.name] ?? .null,
                                              caseInsensitive: key.sort.caseInsensitive)
                if order != .orderedSame { return (order == .orderedAscending) == key.sort.ascending }
            }
            return lhs.offset < rhs.offset
        }.map(\.element)
    }
}
