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
        _ body: @escaping @Sendable (Inputs.Element, ManagedObjectContext) throws -> Void,
        progress: (@Sendable (ImportProgress) -> Void)? = nil
    ) async throws -> ImportProgress where Inputs.Element: Sendable {
        try await performChunkedImport(inputs, chunkSize: chunkSize, progress: progress) { chunk, context in
            for input in chunk { try body(input, context) }
        }
    }

    /// The loop of both import methods: `fill` builds one chunk's objects in a
    /// fresh importer context, which is then saved and reset.
    func performChunkedImport<Inputs: Sequence>(
        _ inputs: Inputs,
        chunkSize: Int,
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
            let batch = chunk
            let context = importerContext()
            let counts = try await context.perform { () throws -> (Int, Int) in
                defer { context.reset() }
                // Most imports insert an object or so per input.
                context.reserveCapacity(forInserting: batch.count)
                try fill(batch, context)
                let counts = context.pendingChangeCounts
                try context.save()
                return (counts.inserted, counts.updated)
            }
            state.processedInputs += batch.count
            state.savedChunks += 1
            state.insertedObjects += counts.0
            state.updatedObjects += counts.1
            progress?(state)
        }
        return state
    }
}
