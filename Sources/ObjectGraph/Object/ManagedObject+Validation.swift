import Foundation

extension ManagedObject {
    /// Checks every property against the model's rules: required values, value
    /// types, integer ranges, minimum and maximum, length, regular expression,
    /// and relationship counts.
    ///
    /// A floating-point attribute may not hold NaN, on any store: SQLite
    /// stores NaN as NULL, so it would read back as nil (or `0` through a
    /// non-optional typed property). Infinities are kept.
    ///
    /// - Throws: ``ObjectGraphError/Code-swift.struct/validationFailed`` listing every broken
    ///   rule; ``FaultFulfillmentError`` when values it checks cannot be read.
    public func validateValues() throws {
        try loadValues()
        var errors: [ValidationError] = []
        for check in entity.validationChecks {
            let property: PropertyDescription
            switch check {
            case .plainAttribute(let index, let type, let isOptional):
                // The common case, checked inline: present when required, of the right kind, in range.
                let fits = slots.withUnsafeBufferPointer { slots in
                    slots[index].isNull ? isOptional : type.accepts(slots[index]) && Self.fitsStorage(slots[index], type)
                }
                if fits { continue }
                property = entity.slotProperties[index]
            case .property(let other):
                property = other
            }
            if let reason = try problem(with: slots[property.index], for: property) {
                errors.append(ValidationError(objectID: objectID, key: property.name, reason: reason))
            }
        }
        if !errors.isEmpty { throw ObjectGraphError.validationFailed(errors) }
    }

    /// Checks that no `.deny` relationship still holds objects. Objects that
    /// are deleted too (by the same save) do not count.
    ///
    /// - Throws: ``ObjectGraphError/Code-swift.struct/validationFailed`` naming the
    ///   relationship; ``FaultFulfillmentError`` when it cannot be read.
    public func validateDeleteRules() throws {
        var errors: [ValidationError] = []
        for case let relationship as RelationshipDescription in entity.slotProperties where relationship.deleteRule == .deny {
            let count = try objectIDs(for: relationship).filter { id in
                managedObjectContext?.registeredObject(for: id)?.isDeleted != true
            }.count
            if count > 0 {
                errors.append(ValidationError(objectID: objectID, key: relationship.name,
                                              reason: "the delete rule is deny and \(count) related object\(count == 1 ? "" : "s") remain"))
            }
        }
        if !errors.isEmpty { throw ObjectGraphError.validationFailed(errors) }
    }

    private func problem(with value: PropertyValue, for property: PropertyDescription) throws -> String? {
        if let relationship = property as? RelationshipDescription {
            let count: Int
            switch value {
            case .object: count = 1
            case .objects(let ids): count = ids.count
            default: count = relationship.isToMany ? try objectIDs(for: relationship).count : 0
            }
            if count == 0 && !relationship.isOptional { return "a value is required" }
            if relationship.isToMany && count > 0 || !relationship.isOptional {
                if relationship.minCount > 0 && count < relationship.minCount {
                    return "holds \(count) objects, fewer than the minimum of \(relationship.minCount)"
                }
                if relationship.maxCount > 0 && count > relationship.maxCount {
                    return "holds \(count) objects, more than the maximum of \(relationship.maxCount)"
                }
            }
            return nil
        }
        guard let attribute = property as? AttributeDescription else { return nil }
        if value.isNull { return attribute.isOptional ? nil : "a value is required" }
        if !attribute.type.accepts(value) {
            return "holds \(value.kindDescription), not \(attribute.type.valueDescription)"
        }
        if case .integer(let integer) = value, let range = attribute.type.integerRange, !range.contains(integer) {
            return "\(integer) does not fit in \(attribute.type.rawValue)"
        }
        if case .double(let number) = value, number.isNaN {
            return "is NaN, which a store cannot hold faithfully (SQLite reads it back as nil); store nil or a number"
        }
        if let minimum = attribute.minimumValue, Self.compare(value, minimum) == .orderedAscending {
            return "is below the minimum \(Self.text(minimum))"
        }
        if let maximum = attribute.maximumValue, Self.compare(value, maximum) == .orderedDescending {
            return "is above the maximum \(Self.text(maximum))"
        }
        let length: Int? = switch value {
        case .string(let string): string.count
        case .data(let data): data.count
        default: nil
        }
        if let length {
            if let minimum = attribute.minimumLength, length < minimum { return "is shorter than \(minimum)" }
            if let maximum = attribute.maximumLength, length > maximum { return "is longer than \(maximum)" }
        }
        if case .string(let string) = value, let regex = try? attribute.regex() {
            let range = NSRange(string.startIndex..., in: string)
            let match = regex.firstMatch(in: string, options: [.anchored], range: range)
            if match?.range != range { return "does not match the pattern \(attribute.regularExpression ?? "")" }
        }
        return nil
    }

    /// Whether a value of the right kind can be stored as it is: an integer
    /// within its type's range, a number other than NaN.
    private static func fitsStorage(_ value: PropertyValue, _ type: AttributeType) -> Bool {
        switch value {
        case .integer(let integer): type.integerRange?.contains(integer) ?? true
        case .double(let number): !number.isNaN
        default: true
        }
    }

    /// Orders two numbers or two dates; nil when they cannot be compared.
    package static func compare(_ lhs: PropertyValue, _ rhs: PropertyValue) -> ComparisonResult? {
        func order<T: Comparable>(_ a: T, _ b: T) -> ComparisonResult {
            a < b ? .orderedAscending : (a > b ? .orderedDescending : .orderedSame)
        }
        switch (lhs, rhs) {
        case let (.integer(a), .integer(b)): return order(a, b)
        case let (.integer(a), .double(b)): return order(Double(a), b)
        case let (.double(a), .integer(b)): return order(a, Double(b))
        case let (.double(a), .double(b)): return order(a, b)
        case let (.decimal(a), .decimal(b)): return order(a, b)
        case let (.decimal(a), .integer(b)): return order(a, Decimal(b))
        case let (.decimal(a), .double(b)): return order(a, Decimal(b))
        case let (.date(a), .date(b)): return order(a, b)
        case let (.string(a), .string(b)): return order(a, b)
        default: return nil
        }
    }

    private static func text(_ value: PropertyValue) -> String {
        switch value {
        case .integer(let v): String(v)
        case .double(let v): String(v)
        case .decimal(let v): "\(v)"
        case .date(let v): "\(v)"
        default: value.kindDescription
        }
    }
}
