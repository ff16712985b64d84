@_spi(DataStackInternal) import DataStackSupport
import Foundation

/// What a fetch returns (Core Data: `NSFetchRequestResultType`).
public enum FetchResultType: Int, Sendable, Hashable {
    /// Managed objects (the default).
    case managedObject = 0
    /// Object IDs only.
    case managedObjectID = 1
    /// `[String: Any]` dictionaries of the properties to fetch and computed values.
    case dictionary = 2
    /// The number of matching objects.
    case count = 4
}

/// A description of objects to fetch (Core Data: `NSFetchRequest`).
///
/// ```swift
/// var request = FetchRequest<Ticker>(entityName: "Ticker")
/// request.predicate = try FetchPredicate(format: "price > %@", 100)
/// request.sortDescriptors = [FetchSort(key: "symbol")]
/// request.fetchLimit = 10
/// let tickers = try context.fetch(request)
/// ```
///
/// `Result` is what ``ManagedObjectContext/fetch(_:)`` returns: a
/// ``ManagedObject`` class for `.managedObject` results, ``ObjectID`` for
/// `.managedObjectID`, `[String: Any]` for `.dictionary`.
///
/// ## Topics
/// - ``FetchResultType``
/// - ``FetchSort``
/// - ``FetchPredicate``
public struct FetchRequest<Result>: @unchecked Sendable {
    // @unchecked Sendable: every stored property is a Sendable value; `Result` is only a phantom type.

    /// The entity to fetch.
    public var entityName: String
    /// Which objects match; nil for all. The default is nil.
    public var predicate: FetchPredicate?
    /// How to order the results, first key first. The default is none (store order).
    public var sortDescriptors: [FetchSort] = []
    /// The most results to return; 0 for no limit. The default is 0.
    public var fetchLimit: Int = 0
    /// How many matching results to skip. The default is 0.
    public var fetchOffset: Int = 0
    /// How many objects to load at a time when firing faults; 0 to load each when touched. The default is 0.
    public var fetchBatchSize: Int = 0
    /// What the fetch returns. The default is `.managedObject`.
    public var resultType: FetchResultType = .managedObject
    /// The values of each `.dictionary` result: attribute names, key paths
    /// through to-one relationships (`"company.sector"`) and computed
    /// ``ExpressionDescription``s; nil for all attributes.
    ///
    /// ```swift
    /// request.propertiesToFetch = ["company.sector", .expression(ExpressionDescription(
    ///     name: "total", expression: .sum(.keyPath("price")), resultType: .double))]
    /// ```
    public var propertiesToFetch: [PropertyToFetch]?
    /// For `.dictionary` results: the key paths (or names of fetched
    /// expressions) whose equal values make one result (SQL's `GROUP BY`). Every
    /// other fetched value must then be an aggregate. The default is none.
    public var propertiesToGroupBy: [String] = []
    /// Which groups of a grouped fetch are kept (SQL's `HAVING`); fetched values
    /// are `$name` variables: `try FetchPredicate(format: "$total > 100")`. The default is nil.
    public var havingPredicate: FetchPredicate?
    /// Whether unsaved changes in the context (and its parents) count. The default is true.
    ///
    /// Ignored for `.dictionary` results, which reflect saved state only, as in
    /// Core Data: their values (sums, counts, groups) are computed by the store,
    /// and folding unsaved objects into them would mean evaluating the whole
    /// fetch in memory. Save to the store first to count unsaved work (a child
    /// context's save only reaches its parent, which these fetches don't read).
    public var includesPendingChanges = true
    /// Whether objects of subentities match too. The default is true.
    public var includesSubentities = true
    /// Whether objects come back as faults, their values loaded on first access. The default is true.
    public var returnsObjectsAsFaults = true
    /// Whether objects the context has already loaded take the current values
    /// of the store (of the parent, for a child context). The default is false:
    /// a fetch returns registered objects as they are, whatever the store now
    /// holds.
    ///
    /// With true, each loaded object the fetch returns takes its row as the
    /// store holds it now — the row this fetch read, or else one read from the
    /// store, never a row the coordinator cached before — with its unsaved
    /// changes kept on top, as
    /// ``ManagedObjectContext/refresh(_:mergeChanges:)`` with `mergeChanges:
    /// true` keeps them; it stays loaded, and its next save is checked against
    /// the row's new version. Objects that were faults come back as the other
    /// options make them. The rows are read before any object changes: if
    /// they cannot be, the fetch throws and every object keeps what it had.
    /// Ignored for results other than `.managedObject`.
    public var shouldRefreshRefetchedObjects = false
    /// Whether a `.managedObject` fetch reads the objects' rows at all. The
    /// default is true: the rows go to the coordinator's row cache, so firing
    /// one of the faults costs no query. With false only the IDs are read
    /// (`SELECT Z_PK, Z_ENT`), nothing is cached, and each object is a fault
    /// whatever ``returnsObjectsAsFaults`` says, firing with a query of its
    /// own (or of its ``fetchBatchSize`` batch) — Core Data's
    /// `includesPropertyValues = false`, for fetches that touch few of the
    /// objects they return, or only their identity.
    public var includesPropertyValues = true
    /// Relationship key paths (`"tracks"`, `"books.authors"`) whose destinations
    /// are loaded with `.managedObject` results: one query per step of each key
    /// path, whatever the number of objects, instead of one per object when the
    /// relationships are first used. The default is none.
    public var relationshipKeyPathsForPrefetching: [String] = []
    /// For `.dictionary` results: drop duplicate dictionaries. The default is false.
    public var returnsDistinctResults = false
    /// The stores to search; nil for all of the coordinator's stores.
    public var affectedStores: [any PersistentStore]?

    /// Creates a request for the objects of an entity.
    public init(entityName: String) {
        self.entityName = entityName
    }

    /// Creates a request with a predicate and sort descriptors.
    public init(entityName: String, predicate: FetchPredicate?, sortDescriptors: [FetchSort] = []) {
        self.entityName = entityName
        self.predicate = predicate
        self.sortDescriptors = sortDescriptors
    }
}

extension FetchRequest where Result: ManagedObject {
    /// Creates a request for the entity named like `Result`'s class (`Ticker` → `"Ticker"`),
    /// or the name its ``ManagedObject/entityDeclaration`` gives.
    public init() {
        self.init(entityName: className(of: Result.self))
    }
}

/// Entity names by class: the type's name is demangled at every call, and
/// ``FetchRequest/init()`` asks for it at every fetch.
private let classNames = Locked<[ObjectIdentifier: String]>([:])

private func className(of type: ManagedObject.Type) -> String {
    let key = ObjectIdentifier(type)
    if let name = classNames.withLock({ $0[key] }) { return name }
    let name = ClassDeclarations.entityName(of: type)
    classNames.withLock { $0[key] = name }
    return name
}
