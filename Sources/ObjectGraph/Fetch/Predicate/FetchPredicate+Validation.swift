import Foundation

extension FetchPredicate {
    /// Checks the predicate against an entity: every key path names existing
    /// properties (through relationships to their destination entities),
    /// collection operators and `ANY`/`ALL`/`NONE` get to-many key paths, and
    /// `@sum`/`@avg` get numbers.
    ///
    /// A fetch makes the same checks; this lets a predicate that a person
    /// typed (a search field, a command line) be checked against each entity
    /// before anything is fetched, to tell them which key is wrong and where,
    /// or to pick the entities a predicate fits.
    ///
    /// Unsubstituted `$variables` are allowed here; evaluating or compiling throws for them.
    ///
    /// - Throws: ``FetchPredicateError`` naming the entity and the key, as in
    ///   "entity Ticker has no property 'prize'"; for a predicate built in code
    ///   deeper than ``maximumDepth``, saying so.
    public func validate(for entity: EntityDescription) throws {
        do {
            try checkBounds()
            try PredicateValidator().check(expression, self: entity, variables: [:])
        } catch let problem as PredicateProblem {
            throw problem.error(format: source ?? description)
        }
    }
}

/// What a key path reaches, found from the model alone.
package struct KeyPathInfo {
    /// Whether it passes a to-many relationship.
    package var crossesToMany = false
    /// The entity it ends at, when it ends at a relationship (or is empty).
    var entity: EntityDescription?
    /// The attribute it ends at, if it does.
    package var attribute: AttributeDescription?

    /// Follows `keys` from `entity`.
    ///
    /// - Throws: ``PredicateProblem`` for a key the entity does not have, or a key after an attribute.
    package static func walk(_ keys: [String], from start: EntityDescription) throws -> KeyPathInfo {
        var info = KeyPathInfo(entity: start)
        for (position, key) in keys.enumerated() {
            guard let entity = info.entity else {
                let previous = keys[position - 1]
                throw PredicateProblem("'\(previous)' is an attribute, not a relationship, in key path \(keys.joined(separator: "."))", key: previous)
            }
            guard let property = entity.propertiesByName[key] else {
                throw PredicateProblem("entity \(entity.name) has no property '\(key)'", key: key)
            }
            if let relationship = property as? RelationshipDescription {
                guard let destination = relationship.destinationEntity else {
                    throw PredicateProblem("\(entity.name).\(key) has no destination entity", key: key)
                }
                if relationship.isToMany { info.crossesToMany = true }
                info.entity = destination
            } else {
                info.entity = nil
                info.attribute = property as? AttributeDescription
            }
        }
        return info
    }
}

struct PredicateValidator {
    func check(_ expression: PredicateNode, self entity: EntityDescription,
               variables: [String: EntityDescription]) throws {
        switch expression {
        case .truePredicate, .falsePredicate, .constant:
            return
        case .and(let children), .or(let children), .collection(let children):
            for child in children { try check(child, self: entity, variables: variables) }
        case .not(let child):
            try check(child, self: entity, variables: variables)
        case .comparison(let lhs, let op, let rhs, _, let modifier):
            try check(lhs, self: entity, variables: variables)
            try check(rhs, self: entity, variables: variables)
            if op == .textSearch {
                if case .constant = rhs { _ = try PredicateSearch.query(from: rhs) }
                if let info = try info(lhs, self: entity, variables: variables), lhs.isKeyPathOrVariable {
                    _ = try PredicateSearch.attributes(info, keys: lhs.keyPathKeys)
                } else if !lhs.isKeyPathOrVariable {
                    throw PredicateProblem("MATCHES[search] needs an attribute key path or SELF on its left")
                }
            }
            if modifier != .direct, try info(lhs, self: entity, variables: variables)?.crossesToMany != true,
               try info(rhs, self: entity, variables: variables)?.crossesToMany != true {
                throw PredicateProblem("\(modifier.rawValue) needs a to-many key path, and \(FetchPredicate(expression: lhs)) is not one")
            }
        case .keyPath, .variable:
            _ = try info(expression, self: entity, variables: variables)
        case .aggregate(let function, let collection, let keys):
            let element = try elementEntity(of: collection, self: entity, variables: variables, for: "@" + function.rawValue)
            guard function != .count else {
                if !keys.isEmpty { throw PredicateProblem("@count takes no key path after it") }
                return
            }
            guard let element else { return }
            let target = try KeyPathInfo.walk(keys, from: element)
            if function == .sum || function == .avg, let attribute = target.attribute, !attribute.type.isNumeric {
                throw PredicateProblem("@\(function.rawValue) needs a number, and \(element.name).\(keys.joined(separator: ".")) is \(attribute.type.rawValue)", key: keys.last)
            }
            if target.attribute == nil, function == .sum || function == .avg {
                throw PredicateProblem("@\(function.rawValue) needs an attribute after it", key: keys.last)
            }
        case .subquery(let collection, let variable, let predicate):
            guard let element = try elementEntity(of: collection, self: entity, variables: variables, for: "SUBQUERY") else { return }
            var inner = variables
            inner[variable] = element
            try check(predicate, self: element, variables: inner)
        }
    }

    /// What a key path or variable reaches; nil for an unsubstituted variable.
    private func info(_ expression: PredicateNode, self entity: EntityDescription,
                      variables: [String: EntityDescription]) throws -> KeyPathInfo? {
        switch expression {
        case .keyPath(let keys):
            return try KeyPathInfo.walk(keys, from: entity)
        case .variable(let name, let keys):
            guard let bound = variables[name] else { return nil }
            return try KeyPathInfo.walk(keys, from: bound)
        default:
            return KeyPathInfo()
        }
    }

    /// The entity of the elements of a to-many collection; nil when unknown (an unsubstituted variable).
    private func elementEntity(of collection: PredicateNode, self entity: EntityDescription,
                               variables: [String: EntityDescription], for what: String) throws -> EntityDescription? {
        switch collection {
        case .subquery:
            try check(collection, self: entity, variables: variables)
            guard case .subquery(let inner, _, _) = collection else { return nil }
            return try elementEntity(of: inner, self: entity, variables: variables, for: what)
        case .keyPath, .variable:
            guard let info = try info(collection, self: entity, variables: variables) else { return nil }
            guard info.crossesToMany, let element = info.entity else {
                throw PredicateProblem("\(what) needs a to-many relationship, and \(FetchPredicate(expression: collection)) is not one")
            }
            return element
        default:
            throw PredicateProblem("\(what) needs a to-many key path")
        }
    }
}

extension AttributeType {
    /// Whether values are numbers (booleans and dates included), as SQL compares them.
    var isNumeric: Bool {
        switch self {
        case .integer16, .integer32, .integer64, .double, .float, .decimal, .boolean, .date: true
        default: false
        }
    }
}
