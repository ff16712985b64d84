import CFaultVFS
import Foundation
import ObjectGraph
import Testing

/// Every I/O call a fetch makes fails, one at a time, once or for good (as a
/// disk that keeps failing does), on a freshly opened store whose page cache
/// is empty. A fetch whose reads fail throws; it never returns fewer rows or
/// other values. Once the disk recovers, the same fetch in the same context
/// returns every row: an error is never remembered as data.
@Suite struct FaultInjectionFetchTests {
    // Enough rows for each table to span several pages, so a fetch reads several times.
    static let companies = 150
    static let updatesEach = 4

    /// The fetches checked, each with the answer the seeded store gives.
    enum Fetch: String, CaseIterable, Sendable {
        /// Every company, sorted, with its values.
        case companies
        /// `count(for:)` of the price updates.
        case count
        /// Price updates matching a predicate, as object IDs.
        case predicateIDs
        /// Every company with its `updates` prefetched.
        case prefetchingUpdates

        /// What the fetch answers, as lines to compare.
        func run(in context: ManagedObjectContext) throws -> [String] {
            switch self {
            case .companies:
                return try context.fetch(companiesBySymbol).map { "\($0.symbol) \($0.employees)" }
            case .count:
                return ["\(try context.count(for: FetchRequest<StockUpdate>(entityName: "StockUpdate")))"]
            case .predicateIDs:
                var request = FetchRequest<ObjectID>(entityName: "StockUpdate", predicate: try FetchPredicate(format: "volume == %@", 1))
                request.resultType = .managedObjectID
                return ["\(try context.fetch(request).count) IDs"]
            case .prefetchingUpdates:
                var request = companiesBySymbol
                request.relationshipKeyPathsForPrefetching = ["updates"]
                return try context.fetch(request).map { "\($0.symbol) \($0.updates.count)" }
            }
        }

        var expected: [String] {
            let indexes = (0..<FaultInjectionFetchTests.companies).sorted { "C\($0)" < "C\($1)" }
            return switch self {
            case .companies: indexes.map { "C\($0) \($0 * 10)" }
            case .count: ["\(FaultInjectionFetchTests.companies * FaultInjectionFetchTests.updatesEach)"]
            case .predicateIDs: ["\(FaultInjectionFetchTests.companies) IDs"]
            case .prefetchingUpdates: indexes.map { "C\($0) \(FaultInjectionFetchTests.updatesEach)" }
            }
        }
    }

    /// The calls a fetch can make, with the codes each fails with.
    static let faults: [(FaultPlan.Operation, [Int32])] = [
        (.read, [CFAULTVFS_IOERR_READ, SQLITE_CORRUPT]),
        (.fileSize, [CFAULTVFS_IOERR_FSTAT]),
        (.lock, [CFAULTVFS_IOERR_LOCK]),
        (.shmMap, [CFAULTVFS_IOERR_SHMMAP]),
        (.shmLock, [CFAULTVFS_IOERR_SHMLOCK]),
        (.open, [SQLITE_CANTOPEN]),
    ]

    @Test(.timeLimit(.minutes(1)), arguments: Fetch.allCases)
    func aFetchWhoseCallsFailThrowsAndNeverReturnsFewerRows(fetch: Fetch) throws {
        let template = try StoreTemplate(companies: Self.companies, updatesEach: Self.updatesEach)
        let calls = try dryRun(fetch, template)
        #expect(calls[.read, default: 0] > 0, "the fetch reads the file")
        var tally = FaultTally()
        for (operation, codes) in Self.faults {
            for code in codes {
                for repetition in [FaultPlan.Repetition.once, .always] {
                    for call in 0..<calls[operation, default: 0] {
                        try check(fetch, template, failing: operation, call: call, code: code, repetition: repetition, tally: &tally)
                    }
                }
            }
        }
        let callList = Self.faults.compactMap { operation, _ in
            calls[operation].flatMap { $0 > 0 ? "\(operation) \($0)" : nil }
        }
        print(tally.summary("fetch \(fetch.rawValue)") + "; calls per fetch: " + callList.joined(separator: ", "))
        #expect(tally.wrongResults == 0)
    }

    private func dryRun(_ fetch: Fetch, _ template: StoreTemplate) throws -> [FaultPlan.Operation: Int] {
        let stack = try FaultStack(copying: template)
        let context = stack.newContext()
        stack.plan.reset()
        let answer = try context.performAndWait { try fetch.run(in: context) }
        #expect(answer == fetch.expected)
        return stack.plan.callCounts(of: Self.faults.map(\.0))
    }

    private func check(_ fetch: Fetch, _ template: StoreTemplate, failing operation: FaultPlan.Operation, call: Int,
                       code: Int32, repetition: FaultPlan.Repetition, tally: inout FaultTally) throws {
        let stack = try FaultStack(copying: template)
        let context = stack.newContext()
        let what = "fetch \(fetch.rawValue), \(operation) call \(call + 1) failing with \(code) (\(repetition))"
        tally.cases += 1
        stack.plan.reset()
        stack.plan.arm(operation, code: code, after: call, repeating: repetition)
        let answer: Result<[String], any Error> = context.performAndWait { Result { try fetch.run(in: context) } }
        stack.plan.disarm()
        switch answer {
        case .success(let lines):
            if stack.plan.injectedCount > 0 { tally.absorbed += 1 }
            if lines != fetch.expected {
                tally.wrongResults += 1
                Issue.record("\(what): returned \(lines.count) lines without an error, not the \(fetch.expected.count) expected: \(lines.prefix(5))…")
            }
        case .failure(let error):
            tally.errors += 1
            #expect(stack.plan.injectedCount > 0, "\(what): the error came from the injected fault: \(error)")
            #expect(error is PersistentStoreError || error is ObjectGraphError, "\(what): a typed error, not \(type(of: error)): \(error)")
        }
        let again = try context.performAndWait { try fetch.run(in: context) }
        if again != fetch.expected {
            tally.wrongResults += 1
            Issue.record("\(what): once the calls succeed again, the same fetch returns \(again.count) lines, not \(fetch.expected.count): \(again.prefix(5))…")
        }
    }
}
