import CHeapUsage
import DataStack
import Foundation
import GRDB

/// Heap bytes each fetched object holds while the fetch's result is alive: the
/// fault task's two ways and a loaded object, beside GRDB's hand-written
/// record. Measured once, untimed, on stores of their own after the timed
/// repetitions, as the allocator's bytes in use (`mallinfo2`) before and after
/// the fetch — RSS moves in pages and keeps what earlier tasks freed. Each
/// reader's page cache is warmed first, as GRDB's is.
enum ObjectMemory {
    struct Row {
        var way: String
        var bytesPerObject: Double
    }

    static func measure(_ rows: [TickerValues], chunkSize: Int) async throws -> [Row] {
        if heap_bytes_in_use() == 0 { return [] }   // no mallinfo2 on this system
        let directory = ScratchDirectory("object-memory")
        let (stack, watcher) = try await DataStackBench.open(directory.file("DataStack.sqlite"))
        let chunks = try await DataStackBench.insert(rows, chunkSize: chunkSize, into: stack)
        try await watcher.wait(for: chunks)
        var result: [Row] = []
        let ways: [(String, returnsFaults: Bool, includesValues: Bool)] = [
            ("DataStack fault, row cached (default)", true, true),
            ("DataStack fault, includesPropertyValues = false", true, false),
            ("DataStack loaded object (returnsObjectsAsFaults = false)", false, true),
        ]
        for way in ways {
            // A stack of its own for each way: no rows cached or objects registered by the one before.
            let (reader, _) = try await DataStackBench.open(directory.file("DataStack.sqlite"))
            let bytes = try await reader.mainContext.perform {
                // SQLite's page cache fills as the first read goes through the
                // table — a fixed cost of the connection (2 MB at most by default),
                // not of each object, which counted 21 bytes an object at 100,000
                // when the reader was cold. GRDB's connection reads warm (its
                // insert filled the cache): an ID fetch, which registers no
                // objects, warms this one alike.
                var warmUp = FetchRequest<ObjectID>(entityName: BenchModel.entityName)
                warmUp.resultType = .managedObjectID
                guard try reader.mainContext.fetch(warmUp).count == rows.count else { throw BenchError("object memory: warm-up read too few rows") }
                var request = FetchRequest<BenchTicker>()
                request.returnsObjectsAsFaults = way.returnsFaults
                request.includesPropertyValues = way.includesValues
                let before = heapBytesInUse()
                let objects = try reader.mainContext.fetch(request)
                let after = heapBytesInUse()
                guard objects.count == rows.count else { throw BenchError("object memory: fetched \(objects.count) of \(rows.count)") }
                return withExtendedLifetime(objects) { Double(after - before) / Double(rows.count) }
            }
            result.append(Row(way: way.0, bytesPerObject: bytes))
        }
        let queue = try GRDBBench.open(directory.file("grdb.sqlite").path)
        try GRDBBench.insert(rows, chunkSize: chunkSize, as: .handWritten, into: queue)
        let grdb = try await queue.read { db in
            let before = heapBytesInUse()
            let records = try HandWrittenTicker.fetchAll(db)
            let after = heapBytesInUse()
            return withExtendedLifetime(records) { Double(after - before) / Double(records.count) }
        }
        try queue.close()
        result.append(Row(way: "GRDB hand-written record (fetchAll)", bytesPerObject: grdb))
        return result
    }

    private static func heapBytesInUse() -> Int { Int(heap_bytes_in_use()) }
}
