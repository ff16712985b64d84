import Foundation

extension FetchSort {
    /// Orders two values the way the SQLite store's `ORDER BY` does, so in-memory
    /// sorting (pending changes, the in-memory store, a custom store) agrees with it:
    /// nil first, numbers by value, strings by their UTF-8 bytes (ASCII case
    /// folded when case-insensitive, like `COLLATE NOCASE`), dates by time.
    public static func compare(_ lhs: PropertyValue, _ rhs: PropertyValue, caseInsensitive: Bool) -> ComparisonResult {
        switch (lhs, rhs) {
        case (.null, .null): return .orderedSame
        case (.null, _): return .orderedAscending
        case (_, .null): return .orderedDescending
        case let (.string(a), .string(b)):
            return caseInsensitive ? compareBytes(a.utf8.lazy.map(asciiLowercased), b.utf8.lazy.map(asciiLowercased))
                                   : compareBytes(a.utf8, b.utf8)
        case let (.bool(a), .bool(b)): return order(a ? 1 : 0, b ? 1 : 0)
        case let (.data(a), .data(b)): return compareBytes(a, b)
        case let (.uuid(a), .uuid(b)): return compareBytes(withUnsafeBytes(of: a.uuid, Array.init), withUnsafeBytes(of: b.uuid, Array.init))
        case let (.uri(a), .uri(b)): return compareBytes(a.absoluteString.utf8, b.absoluteString.utf8)
        case let (.object(a), .object(b)): return order(a.primaryKey ?? 0, b.primaryKey ?? 0)
        default:
            return ManagedObject.compare(lhs, rhs) ?? .orderedSame
        }
    }

    /// Sorts objects of `entity` by the given keys, reading each key once per object.
    package static func sort(_ objects: [ManagedObject], by sorts: [FetchSort], from entity: EntityDescription) throws -> [ManagedObject] {
        try first(objects.count, of: objects, by: sorts, from: entity)
    }

    /// The first `count` objects in the order of the given keys, in that order;
    /// reads each key once per object.
    ///
    /// For a `count` well below the number of objects (a limited fetch over
    /// many pending changes), it keeps the best so far in a sorted buffer
    /// instead of sorting everything: most objects cost one comparison with
    /// the worst kept. Ties keep the objects' given order, as a stable sort does.
    package static func first(_ count: Int, of objects: [ManagedObject], by sorts: [FetchSort],
                              from entity: EntityDescription) throws -> [ManagedObject] {
        guard count > 0 else { return [] }
        let paths = try sorts.map { try ToOneKeyPath($0.keyPath, from: entity) }
        let keyed = try objects.map { object in
            (object, try zip(sorts, paths).map { sort, path in sort.sortValue(try object.value(at: path)) })
        }
        func precedes(_ lhs: (ManagedObject, [PropertyValue]), _ rhs: (ManagedObject, [PropertyValue])) -> Bool {
            for (index, sort) in sorts.enumerated() {
                let result = compare(lhs.1[index], rhs.1[index], caseInsensitive: sort.caseInsensitive)
                if result != .orderedSame { return (result == .orderedAscending) == sort.ascending }
            }
            return false
        }
        guard count < keyed.count / 4 else { return keyed.sorted(by: precedes).prefix(count).map(\.0) }
        var best: [(ManagedObject, [PropertyValue])] = []
        best.reserveCapacity(count + 1)
        for candidate in keyed {
            if best.count == count, let worst = best.last, !precedes(candidate, worst) { continue }
            // After every kept object it does not precede: equal ones stay in their given order.
            var low = 0, high = best.count
            while low < high {
                let middle = (low + high) / 2
                if precedes(candidate, best[middle]) { high = middle } else { low = middle + 1 }
            }
            best.insert(candidate, at: low)
            if best.count > count { best.removeLast() }
        }
        return best.map(\.0)
    }

    private static func order<T: Comparable>(_ a: T, _ b: T) -> ComparisonResult {
        a < b ? .orderedAscending : (a > b ? .orderedDescending : .orderedSame)
    }

    private static func asciiLowercased(_ byte: UInt8) -> UInt8 {
        (65...90).contains(byte) ? byte + 32 : byte
    }

    private static func compareBytes<A: Sequence, B: Sequence>(_ a: A, _ b: B) -> ComparisonResult
    where A.Element == UInt8, B.Element == UInt8 {
        var left = a.makeIterator()
        var right = b.makeIterator()
        while true {
            switch (left.next(), right.next()) {
            case (nil, nil): return .orderedSame
            case (nil, _): return .orderedAscending
            case (_, nil): return .orderedDescending
            case let (x?, y?) where x != y: return x < y ? .orderedAscending : .orderedDescending
            default: continue
            }
        }
    }
}

extension ManagedObject {
    /// The value at a key path resolved from this object's entity (or one of
    /// its superentities); nil past a nil relationship.
    ///
    /// - Throws: ``FaultFulfillmentError`` when an object on the path cannot be
    ///   read: a sort or a list must not place it by a value it does not have.
    package func value(at path: ToOneKeyPath, from position: Int = 0) throws -> PropertyValue {
        let context = managedObjectContext
        return try path.value(from: self, at: position, read: { object, property in
            try object.loadValues()
            return object.slots[property.index]
        }, destination: { context?.object(with: $0) })
    }
}
