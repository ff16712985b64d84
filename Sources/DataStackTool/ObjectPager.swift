import Foundation
import DataStack

/// Walks the objects of exactly one entity (not its subentities) a page at a
/// time, resetting the context after each page, so that a dump of a store of
/// any size holds one page of objects in memory.
///
/// Without a predicate the pages follow the primary key: each page is a fetch
/// of `SELF > <last key>` with a fetch limit. One entity's rows then come
/// from a range of the table's rowid (or of its `Z_ENT` index, whose entries
/// end with the rowid), so they come back in key order, and each page costs
/// its own rows only. Every page is checked to continue that order.
///
/// With a predicate, which may lead SQLite to another index and another
/// order, the pages are offset/limit pages of the same query instead:
/// SQLite runs the same plan for each, so the pages tile the result, at
/// the cost of stepping over the earlier rows again for each page.
struct ObjectPager {
    let context: ManagedObjectContext
    let entity: EntityDescription
    let predicate: FetchPredicate?
    /// Objects per page.
    static let pageSize = 500
    var pageSize = Self.pageSize

    /// Calls `body` with each page of objects, on the context's queue; the
    /// objects are valid only until `body` returns.
    func forEachPage(_ body: ([ManagedObject]) throws -> Void) throws {
        var last: ObjectID?
        var offset = 0
        while true {
            var request = FetchRequest<ManagedObject>(entityName: entity.name)
            request.includesSubentities = false
            request.includesPendingChanges = false
            request.fetchLimit = pageSize
            if let predicate {
                request.predicate = predicate
                request.fetchOffset = offset
            } else if let last {
                request.predicate = try FetchPredicate(format: "SELF > %@", last)
            }
            let page = try context.fetch(request)
            if predicate == nil { try checkKeyOrder(page, after: last?.primaryKey) }
            try body(page)
            context.reset()
            guard page.count == pageSize else { return }
            offset += page.count
            last = page.last?.objectID
        }
    }

    /// Throws unless the page's keys ascend from `after`: rows out of key
    /// order would make the next page skip some.
    private func checkKeyOrder(_ page: [ManagedObject], after: Int64?) throws {
        var previous = after ?? Int64.min
        for object in page {
            let key = object.objectID.primaryKey ?? Int64.min
            guard key > previous else {
                throw ToolError(.internalError, "the rows of \(entity.name) did not come back in key order (p\(key) after p\(previous)); the dump stopped")
            }
            previous = key
        }
    }
}
