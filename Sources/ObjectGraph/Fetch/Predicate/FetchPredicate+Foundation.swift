import Foundation

extension FetchPredicate {
    /// Translates a Foundation `#Predicate` over a `@Managed` subclass into the
    /// same tree ``init(format:_:)`` builds (Core Data: `NSPredicate(_:)` from a `Predicate`).
    ///
    /// ```swift
    /// let typed = try FetchPredicate(#Predicate<Ticker> { $0.price > 10 && $0.symbol == "X" }, entity: ticker)
    /// typed == (try FetchPredicate(format: "price > %@ AND symbol == %@", 10, "X"))   // true
    /// ```
    ///
    /// Supported: `==`, `!=`, `<`, `<=`, `>`, `>=`; `&&`, `||`, `!`; constants;
    /// `@Managed` properties, through to-one relationships with `?.`
    /// (`$0.company?.symbol` is `company.symbol`) or `!`; `.count` of a to-many
    /// relationship (`updates.@count`); `string.contains(s)` (`CONTAINS`),
    /// `string.starts(with: s)` (`BEGINSWITH`); `[a, b].contains($0.x)` (`x IN {a, b}`);
    /// `optional.flatMap { … } ?? false` and `x ?? false` around a condition.
    ///
    /// Each key path is named by reading it once on a throwaway object of its
    /// root class created with `init(entity:insertInto: nil)`, so a `@Managed`
    /// getter reports its slot; the result is cached per entity and key path.
    /// A non-optional to-one property traps when read that way (as it does on any
    /// object without a value): declare to-one properties optional.
    ///
    /// - Parameter entity: the entity of `Root`; the entities of related objects
    ///   are found through its relationships.
    /// - Throws: ``FetchPredicateError`` naming the Foundation expression type
    ///   that has no equivalent (arithmetic, `??` on values, captured objects…),
    ///   or the key path that is not a `@Managed` property of its entity.
    /// - Complexity: O(*n*) in the predicate's size, plus one object creation per
    ///   key path not translated before.
    public init<Root: ManagedObject>(_ predicate: Foundation.Predicate<Root>, entity: EntityDescription) throws {
        var translator = FoundationPredicateTranslator()
        translator.bindings[predicate.variable.key] = FoundationPredicateTranslator.Term(node: .keyPath([]), entity: entity)
        do {
            self.init(expression: try translator.condition(predicate.expression))
        } catch let problem as PredicateProblem {
            throw FetchPredicateError(format: "#Predicate<\(Root.self)>", message: problem.reason)
        }
    }
}

// MARK: - Translation

/// Walks a Foundation predicate expression, opening each `PredicateExpressions`
/// type through ``FoundationPredicateTranslatable``.
struct FoundationPredicateTranslator {
    /// A translated expression, and for a key path to objects, their entity.
    struct Term {
        var node: PredicateNode
        /// The entity of the objects the key path leads to; nil for values.
        var entity: EntityDescription?
        /// Whether the key path leads to a to-many relationship.
        var isToMany = false
    }

    /// What each `$variable` in the expression stands for.
    var bindings: [PredicateExpressions.VariableID: Term] = [:]

    mutating func translate(_ expression: Any) throws -> Term {
        guard let translatable = expression as? any FoundationPredicateTranslatable else {
            throw PredicateProblem("#Predicate expression \(Self.name(of: type(of: expression))) has no fetch predicate equivalent")
        }
        return try translatable.translate(with: &self)
    }

    /// A translated condition (as opposed to a value).
    mutating func condition(_ expression: Any) throws -> PredicateNode {
        let term = try translate(expression)
        if term.node.isPredicate { return term.node }
        if case .constant(.bool(let value)) = term.node { return value ? .truePredicate : .falsePredicate }
        // A Boolean attribute used as a condition: `$0.active`.
        return .comparison(lhs: term.node, op: .equal, rhs: .constant(.bool(true)), options: [], modifier: .direct)
    }

    mutating func comparison(_ lhs: Any, _ op: ComparisonOperator, _ rhs: Any) throws -> Term {
        Term(node: .comparison(lhs: try translate(lhs).node, op: op, rhs: try translate(rhs).node,
                               options: [], modifier: .direct))
    }

    /// `root.property` for a key path of one property.
    mutating func member(_ root: Any, _ keyPath: AnyKeyPath) throws -> Term {
        let base = try translate(root)
        guard case .keyPath(let path) = base.node, let entity = base.entity else {
            throw PredicateProblem("key path \(keyPath) is not applied to a managed object")
        }
        if base.isToMany {
            if let collection = type(of: keyPath).rootType as? any ManagedCountKeyPath.Type, keyPath == collection.countKeyPath {
                return Term(node: .aggregate(.count, collection: .keyPath(path), keyPath: []))
            }
            throw PredicateProblem("key path \(keyPath) on to-many relationship \(path.joined(separator: ".")) is not supported; only .count is")
        }
        guard let objectType = type(of: keyPath).rootType as? ManagedObject.Type else {
            throw PredicateProblem("key path \(keyPath) does not start at a managed object")
        }
        let slot = entity.managedSlots.probe.slot(
            for: keyPath,
            on: objectType.init(entity: entity, insertInto: nil),
            read: { object in _ = object[keyPath: keyPath] }
        )
        guard let slot else {
            throw PredicateProblem("key path \(keyPath) is not a @Managed property of entity \(entity.name)")
        }
        let property = entity.slotProperties[slot]
        if let relationship = property as? RelationshipDescription {
            return Term(node: .keyPath(path + [property.name]), entity: relationship.destinationEntity,
                        isToMany: relationship.isToMany)
        }
        return Term(node: .keyPath(path + [property.name]))
    }

    /// The type name with its generic arguments (`Arithmetic<KeyPath<…>, Value<Int>>`).
    static func name(of type: Any.Type) -> String {
        String(describing: type)
    }
}

/// A `PredicateExpressions` type that knows its fetch predicate equivalent.
protocol FoundationPredicateTranslatable {
    func translate(with translator: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Term
}

/// A to-many property type whose `.count` key path becomes `@count`.
protocol ManagedCountKeyPath {
    static var countKeyPath: AnyKeyPath { get }
}

extension Set: ManagedCountKeyPath {
    static var countKeyPath: AnyKeyPath { \Set.count }
}

extension Array: ManagedCountKeyPath {
    static var countKeyPath: AnyKeyPath { \Array.count }
}

// MARK: - Leaves

extension PredicateExpressions.Variable: FoundationPredicateTranslatable {
    func translate(with translator: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Term {
        guard let bound = translator.bindings[key] else {
            throw PredicateProblem("#Predicate variable of type \(Output.self) is not bound")
        }
        return bound
    }
}

extension PredicateExpressions.KeyPath: FoundationPredicateTranslatable {
    func translate(with translator: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Term {
        try translator.member(root, keyPath)
    }
}

extension PredicateExpressions.Value: FoundationPredicateTranslatable {
    func translate(with translator: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Term {
        do {
            return FoundationPredicateTranslator.Term(node: try PredicateArgument.expression(from: value, for: "a #Predicate constant", depth: 1))
        } catch let problem as PredicateProblem {
            throw PredicateProblem(problem.reason)
        }
    }
}

extension PredicateExpressions.NilLiteral: FoundationPredicateTranslatable {
    func translate(with translator: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Term {
        FoundationPredicateTranslator.Term(node: .constant(.null))
    }
}

// MARK: - Comparisons

extension PredicateExpressions.Equal: FoundationPredicateTranslatable {
    func translate(with translator: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Term {
        try translator.comparison(lhs, .equal, rhs)
    }
}

extension PredicateExpressions.NotEqual: FoundationPredicateTranslatable {
    func translate(with translator: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Term {
        try translator.comparison(lhs, .notEqual, rhs)
    }
}

extension PredicateExpressions.Comparison: FoundationPredicateTranslatable {
    func translate(with translator: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Term {
        let mapped: ComparisonOperator = switch op {
        case .lessThan: .less
        case .lessThanOrEqual: .lessOrEqual
        case .greaterThan: .greater
        case .greaterThanOrEqual: .greaterOrEqual
        }
        return try translator.comparison(lhs, mapped, rhs)
    }
}

extension PredicateExpressions.CollectionContainsCollection: FoundationPredicateTranslatable {
    func translate(with translator: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Term {
        guard Base.Output.self == String.self else {
            throw PredicateProblem("#Predicate contains(_:) on \(Base.Output.self) is not supported; only on String")
        }
        return try translator.comparison(base, .contains, other)
    }
}

extension PredicateExpressions.SequenceStartsWith: FoundationPredicateTranslatable {
    func translate(with translator: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Term {
        guard Base.Output.self == String.self else {
            throw PredicateProblem("#Predicate starts(with:) on \(Base.Output.self) is not supported; only on String")
        }
        return try translator.comparison(base, .beginsWith, prefix)
    }
}

extension PredicateExpressions.SequenceContains: FoundationPredicateTranslatable {
    func translate(with translator: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Term {
        try translator.comparison(element, .in, sequence)
    }
}

// MARK: - Logic

extension PredicateExpressions.Conjunction: FoundationPredicateTranslatable {
    func translate(with translator: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Term {
        let left = try translator.condition(lhs)
        return FoundationPredicateTranslator.Term(node: .and(flattening: [left, try translator.condition(rhs)]))
    }
}

extension PredicateExpressions.Disjunction: FoundationPredicateTranslatable {
    func translate(with translator: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Term {
        let left = try translator.condition(lhs)
        return FoundationPredicateTranslator.Term(node: .or(flattening: [left, try translator.condition(rhs)]))
    }
}

extension PredicateExpressions.Negation: FoundationPredicateTranslatable {
    func translate(with translator: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Term {
        FoundationPredicateTranslator.Term(node: .not(try translator.condition(wrapped)))
    }
}

// MARK: - Optionals

extension PredicateExpressions.OptionalFlatMap: FoundationPredicateTranslatable {
    func translate(with translator: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Term {
        // `a?.b` and `a.flatMap { … }`: the variable stands for `a`; a nil `a`
        // makes key paths through it nil, as in the fetch predicate grammar.
        let base = try translator.translate(wrapped)
        let previous = translator.bindings[variable.key]
        translator.bindings[variable.key] = base
        defer { translator.bindings[variable.key] = previous }
        return try translator.translate(transform)
    }
}

extension PredicateExpressions.ForcedUnwrap: FoundationPredicateTranslatable {
    func translate(with translator: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Term {
        try translator.translate(inner)
    }
}

extension PredicateExpressions.NilCoalesce: FoundationPredicateTranslatable {
    func translate(with translator: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Term {
        // Only `condition ?? false`: a comparison with nil is already false.
        guard let fallback = rhs as? PredicateExpressions.Value<Bool>, fallback.value == false else {
            throw PredicateProblem("#Predicate ?? is supported only as `condition ?? false`")
        }
        return FoundationPredicateTranslator.Term(node: try translator.condition(lhs))
    }
}
