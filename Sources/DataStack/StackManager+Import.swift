import Foundation

/// How far a background import has come.
public struct ImportProgress: Sendable, Equatable {
    /// Inputs handed to the import closure so far.
    public var processedInputs: Int
    /// Chunks saved so far.
    public var savedChunks: Int
    /// Objects inserted by the saved chunks.
    public var insertedObjects: Int
    /// Objects updated by the saved chunks.
    public var updatedObjects: Int
}

/// What an import does when a chunk's save finds objects that another writer
/// — another importer, another process — changed since the chunk read them.
///
/// ```swift
/// try await stack.performImport(quotes, upserting: Company.self, by: "symbol", key: \.symbol,
///                               onConflict: .rebuildChunk(attempts: 100)) { quote, company, _ in
///     company.updateCount += 1        // computed from the stored value: survives a conflict
/// }
/// ```
public enum ImportConflictResolution: Sendable, Equatable {
    /// The importer's merge policy settles the conflict,
    /// ``ObjectGraph/MergePolicy/mergeByPropertyObjectTrump``: property by
    /// property, the values the chunk set win. Right for values an input
    /// states (a price); a value computed from what the chunk read (a counter
    /// incremented) overwrites the other writer's and loses its change. The default.
    case mergeByPropertyObjectTrump
    /// The chunk's save fails on a conflict (``ObjectGraph/MergePolicy/error``),
    /// and the chunk is built again on a fresh importer context — `body` runs
    /// again for each of its inputs, on the store's current rows — and saved
    /// again, up to `attempts` saves in all; then the conflict is thrown. An
    /// increment is applied to the fresh value and survives. `body` must be
    /// free to run more than once for an input.
    ///
    /// The chunk is built again at once, without a pause: the save detects a
    /// conflict inside its write transaction, against a save of the other
    /// writer that has already committed, so the fresh context reads the
    /// newer rows. A rebuilt chunk meets a conflict again only when the other
    /// writer committed once more in between — each failed attempt is another
    /// writer's save on disk, so importers that meet cannot keep failing each
    /// other without one of them saving (as with Core Data's `NSMergePolicy.error`
    /// and a retry on a refreshed context). Waiting for the other writer's
    /// write lock is the store's busy mode (``ObjectGraph/StoreOptions/busyMode``), not
    /// the import's; `attempts` bounds the work one chunk may redo when other
    /// writers save faster than it can be rebuilt.
    case rebuildChunk(attempts: Int)
}

// MARK: - Background import loops

extension StackManager {
    /// Imports a sequence of inputs in chunks, each on a fresh importer context
    /// that is saved and reset after its chunk, so memory stays flat however
    /// long the sequence is.
    ///
    /// ```swift
    /// let summary = try await stack.performImport(quotes, chunkSize: 1_000) { quote, context in
    ///     let update = StockUpdate(context: context)
    ///     update.price = quote.price
    /// } progress: { print("\($0.processedInputs) imported") }
    /// ```
    ///
    /// Each chunk's save goes to disk on the importer's queue and is merged into
    /// the main context like any importer save. Cancelling the calling task
    /// stops the loop after the chunk being saved: every chunk reported in
    /// `progress` is on disk, and nothing of a half-built chunk is.
    ///
    /// - Parameters:
    ///   - inputs: what to import; read lazily, one chunk at a time.
    ///   - chunkSize: inputs per save. The default is 1,000.
    ///   - onConflict: what a save that meets another writer's changes does.
    ///     The default, ``ImportConflictResolution/mergeByPropertyObjectTrump``, keeps the chunk's values.
    ///   - body: turns one input into objects in the given context.
    ///   - progress: called after each saved chunk.
    /// - Returns: the final progress.
    /// - Throws: `CancellationError` when cancelled, ``StackError/Code/closed``
    ///   when the stack was closed (``close()``) before a chunk, or the first error of
    ///   `body` or of a save (that chunk is not saved; earlier chunks are).
    @discardableResult
    public func performImport<Inputs: Sequence>(
        _ inputs: Inputs,
        chunkSize: Int = 1_000,
        onConflict: ImportConflictResolution = .mergeByPropertyObjectTrump,
        _ body: @escaping @Sendable (Inputs.Element, ManagedObjectContext) throws -> Void,
        progress: (@Sendable (ImportProgress) -> Void)? = nil
    ) async throws -> ImportProgress where Inputs.Element: Sendable {
        try await performChunkedImport(inputs, chunkSize: chunkSize, onConflict: onConflict, progress: progress) { chunk, context in
            for input in chunk { try body(input, context) }
        }
    }

    /// The loop of both import methods: `fill` builds one chunk's objects in a
    /// fresh importer context, which is then saved and reset.
    func performChunkedImport<Inputs: Sequence>(
        _ inputs: Inputs,
        chunkSize: Int,
        onConflict: ImportConflictResolution,
        progress: (@Sendable (ImportProgress) -> Void)?,
        _ fill: @escaping @Sendable ([Inputs.Element], ManagedObjectContext) throws -> Void
    ) async throws -> ImportProgress where Inputs.Element: Sendable {
        var state = ImportProgress(processedInputs: 0, savedChunks: 0, insertedObjects: 0, updatedObjects: 0)
        var iterator = inputs.makeIterator()
        let size = max(1, chunkSize)
        while true {
            try Task.checkCancellation()
            _ = try openSetup(for: "performImport")
            var chunk: [Inputs.Element] = []
            chunk.reserveCapacity(size)
            while chunk.count < size, let input = iterator.next() { chunk.append(input) }
            if chunk.isEmpty { break }
            let counts = try await saveChunk(chunk, onConflict: onConflict, fill)
            state.processedInputs += chunk.count
            state.savedChunks += 1
            state.insertedObjects += counts.0
            state.updatedObjects += counts.1
            progress?(state)
        }
        return state
    }

    /// Builds one chunk's objects in a fresh importer context with `fill` and
    /// saves it; with ``ImportConflictResolution/rebuildChunk(attempts:)``, a
    /// save that meets a conflict is thrown away and the chunk built again.
    /// Returns the saved chunk's inserted and updated object counts.
    private func saveChunk<Input: Sendable>(
        _ chunk: [Input], onConflict: ImportConflictResolution,
        _ fill: @escaping @Sendable ([Input], ManagedObjectContext) throws -> Void
    ) async throws -> (Int, Int) {
        var attempt = 0
        while true {
            attempt += 1
            let context = importerContext()
            if case .rebuildChunk = onConflict { context.mergePolicy = .error }
            do {
                return try await context.perform { () throws -> (Int, Int) in
                    defer { context.reset() }
                    // Most imports insert an object or so per input.
                    context.reserveCapacity(forInserting: chunk.count)
                    try fill(chunk, context)
                    let counts = context.pendingChangeCounts
                    try context.save()
                    return (counts.inserted, counts.updated)
                }
            } catch let error as ObjectGraphError {
                guard case .rebuildChunk(let attempts) = onConflict, attempt < attempts else { throw error }
                switch error.code {
                case .mergeConflict, .uniquenessConflict: break
                default: throw error
                }
                // At once: the conflicting save has committed, and the fresh context reads its rows
                // (see `rebuildChunk`). A cancelled import stops rather than rebuild.
                try Task.checkCancellation()
            }
        }
    }
}
