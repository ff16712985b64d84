import Foundation

/// A generation of the stores' data: what a context pinned to it reads, until
/// the context moves on (Core Data: `NSQueryGenerationToken`).
///
/// ```swift
/// try viewContext.setQueryGenerationFrom(.current)       // pinned at its next read
/// let shown = try viewContext.fetch(request)              // the generation is fixed here
/// // … importers save; viewContext still reads the data as it was …
/// try reportContext.setQueryGenerationFrom(viewContext.queryGenerationToken)   // the same data
/// ```
///
/// Tokens are compared by identity: two contexts pinned to one generation
/// hold the same token. ``current`` is not a generation but the request for
/// one: a context given it pins itself to the store's data as of its next read.
public final class QueryGenerationToken: Hashable, Sendable, CustomStringConvertible {
    /// Asks a context to read the stores' data as it is when the context next
    /// reads, and to keep reading that generation.
    public static let current = QueryGenerationToken(nil)

    /// The stores' snapshots; nil for ``current``.
    let generation: QueryGeneration?

    init(_ generation: QueryGeneration?) {
        self.generation = generation
    }

    public static func == (lhs: QueryGenerationToken, rhs: QueryGenerationToken) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    public var description: String {
        generation == nil ? "QueryGenerationToken.current" : "QueryGenerationToken(\(ObjectIdentifier(self)))"
    }
}

// MARK: - Pinning a context

extension ManagedObjectContext {
    /// The generation of the stores' data this context reads: nil when it
    /// reads the latest data, ``QueryGenerationToken/current`` when it is to
    /// pin itself at its next read, else the token of the generation it reads.
    ///
    /// A child context reads through its parent and has none: it sees the
    /// generation its root context reads.
    public var queryGenerationToken: QueryGenerationToken? {
        assertOnQueue()
        return parent == nil ? pinnedToken : nil
    }

    /// Pins the context's reads to a generation of the stores' data, or
    /// unpins them (Core Data: `setQueryGenerationFrom(_:)`).
    ///
    /// - ``QueryGenerationToken/current``: the context's next read — a fetch,
    ///   a count, a fault or a to-many that fires — fixes the generation, and
    ///   every read after it sees the stores as they were then, whatever other
    ///   contexts, coordinators or processes save meanwhile.
    /// - Another context's ``queryGenerationToken``: this context reads that
    ///   generation too.
    /// - nil: the context reads the latest data again.
    ///
    /// A pinned context moves on to the data as it is at its next read after
    /// it saves (its own changes are then in the store), after ``reset()``,
    /// and when it merges a save (``mergeChanges(fromContextDidSave:)``, as a
    /// stack's main context does after each import): the generation only
    /// keeps what was read before from changing underneath. The lookups a
    /// save makes (uniqueness constraints) and the save itself always see the
    /// latest data.
    ///
    /// Only a root context can be pinned, and only on SQLite stores in WAL
    /// mode (the default): each generation holds a read transaction on a
    /// connection of its own, open while any context is pinned to it. While
    /// it is open SQLite cannot fold the write-ahead log back past it, so the
    /// `-wal` file grows with every save until the context moves on; pin for
    /// a screen's lifetime, not the app's.
    ///
    /// - Throws: ``ObjectGraphError/Code-swift.struct/invalidQueryGeneration``
    ///   for a child context, or a token of another coordinator's context;
    ///   ``ObjectGraphError/Code-swift.struct/unsupportedStore`` when a store of
    ///   the coordinator cannot keep a generation (an in-memory store, a SQLite
    ///   store in another journal mode, a store of your own that does not
    ///   conform to ``QueryGenerationStore``). The context is unchanged then.
    public func setQueryGenerationFrom(_ token: QueryGenerationToken?) throws {
        assertOnQueue()
        guard parent == nil else {
            throw ObjectGraphError.invalidQueryGeneration("""
                a child context reads through its parent: pin the root context (\(rootContextName)) instead
                """)
        }
        guard let token else {
            pinnedToken = nil
            return
        }
        guard let coordinator = persistentStoreCoordinator else {
            throw ObjectGraphError.invalidQueryGeneration("the context has no coordinator, so no store to read")
        }
        guard let generation = token.generation else {
            for store in coordinator.persistentStores {
                guard let pinnable = store as? any QueryGenerationStore, pinnable.canPinQueryGenerations else {
                    throw ObjectGraphError.unsupportedQueryGenerations(store: store)
                }
            }
            pinnedToken = .current
            return
        }
        guard generation.coordinator === coordinator else {
            throw ObjectGraphError.invalidQueryGeneration("the token is of a context of another coordinator")
        }
        pinnedToken = token
    }

    private var rootContextName: String {
        var root = self
        while let parent = root.parent { root = parent }
        return root.name.map { "“\($0)”" } ?? "unnamed"
    }

    /// The snapshot of `store` this context's reads go to, pinning the
    /// context now if it waits for its first read: for a store that serves a
    /// pinned context (``QueryGenerationStore``), called from its reads on
    /// the context's queue. Nil when the context reads the latest data, and
    /// during a save.
    ///
    /// - Throws: what opening the stores' snapshots throws.
    @_spi(StoreImplementation)
    public func queryGenerationSnapshot(of store: any PersistentStore) throws -> (any StoreQueryGeneration)? {
        try pinnedQueryGeneration()?.snapshot(of: store)
    }

    /// The generation the context's reads see, fixed now if the context
    /// waited for its first read; nil when it reads the latest data.
    package func pinnedQueryGeneration() throws -> QueryGeneration? {
        guard let token = pinnedToken, !isSaving else { return nil }
        if let generation = token.generation { return generation }
        guard let coordinator = persistentStoreCoordinator else { return nil }
        let generation = try coordinator.openQueryGeneration()
        pinnedToken = QueryGenerationToken(generation)
        return generation
    }

    /// The generation the context's reads see if it is fixed already; nil
    /// when it reads the latest data, waits for its first read, or saves.
    package var fixedQueryGeneration: QueryGeneration? {
        isSaving ? nil : pinnedToken?.generation
    }

    /// Moves a pinned context on: its next read pins it to the data as it is then.
    func advanceQueryGeneration() {
        if pinnedToken != nil { pinnedToken = .current }
    }
}

extension ObjectGraphError {
    static func invalidQueryGeneration(_ reason: String) -> ObjectGraphError {
        ObjectGraphError(.invalidQueryGeneration, message: "cannot set the query generation: \(reason)")
    }

    static func unsupportedQueryGenerations(store: any PersistentStore) -> ObjectGraphError {
        let place = store.url.map { " at \($0.path)" } ?? ""
        let why = store is any QueryGenerationStore
            ? "is not configured to keep one (a SQLite store keeps them in WAL mode only)"
            : "cannot keep one"
        return ObjectGraphError(.unsupportedStore, message: """
            cannot pin a query generation: the \(store.type.rawValue) store\(place) \(why)
            """)
    }
}

// MARK: - Stores that keep generations

/// A snapshot of one store's data that reads can go back to: what a store
/// that conforms to ``QueryGenerationStore`` gives for a context to pin.
/// The store recognizes its own (a SQLite store's holds a connection in a
/// read transaction) and releases what it holds when the snapshot is released.
public protocol StoreQueryGeneration: AnyObject, Sendable {}

/// A store that can keep a generation of its data for pinned contexts
/// (``ManagedObjectContext/setQueryGenerationFrom(_:)``).
///
/// Its reads for a context — ``PersistentStore/execute(_:in:)``,
/// ``PersistentStore/newValues(forObjectWith:in:)``,
/// ``PersistentStore/newValue(forRelationship:forObjectWith:in:)`` — ask the
/// context for its snapshot (``ManagedObjectContext/queryGenerationSnapshot(of:)``)
/// and read there when it gives one.
public protocol QueryGenerationStore: PersistentStore {
    /// Whether the store can keep generations as it is configured.
    var canPinQueryGenerations: Bool { get }
    /// A snapshot of the store's data as it is now.
    func openQueryGeneration() throws -> any StoreQueryGeneration
}
