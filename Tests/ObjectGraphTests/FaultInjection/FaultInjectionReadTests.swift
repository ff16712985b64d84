// Firing faults and loading to-many relationships while reads fail (issue #14,
// defect 1), through the throwing paths: `try object.loadValues()` and
// `try object.value(forKey:)`.
import CFaultVFS
import Foundation
import ObjectGraph
import Testing

/// A read that fails while a fault fires or a relationship loads is an error,
/// never data: the object stays a fault (not deleted, not emptied), the
/// relationship stays unloaded (not an empty set), the caller gets the store's
/// error, and once reads succeed again the same calls return the real values.
@Suite struct FaultInjectionReadTests {
    static let companies = 150
    static let updatesEach = 4
    /// A company in the middle of the table, whose rows no open reads have cached.
    static let symbol = "C75"

    /// How reads fail: the code, and whether the disk recovers after one call.
    static let failures: [(code: Int32, repetition: FaultPlan.Repetition)] = [
        (CFAULTVFS_IOERR_READ, .once), (CFAULTVFS_IOERR_READ, .always),
        (SQLITE_CORRUPT, .once), (SQLITE_CORRUPT, .always),
    ]

    @Test(.timeLimit(.minutes(1)))
    func aFaultWhoseReadsFailThrowsAndStaysAFaultUntilReadsSucceed() throws {
        let template = try StoreTemplate(companies: Self.companies, updatesEach: Self.updatesEach)
        let reads = try countReads(template) { company in try company.loadValues() }
        #expect(reads > 0, "firing the fault reads the file")
        var tally = FaultTally()
        try forEachFailingRead(of: template, reads: reads, doing: "firing a fault") { company, plan, what in
            tally.cases += 1
            do {
                try company.loadValues()
                if plan.injectedCount > 0 { tally.absorbed += 1 }
            } catch {
                tally.errors += 1
                expectStoreError(error, what)
                #expect(company.isFault, "\(what): the object stays a fault")
                #expect(!company.isDeleted, "\(what): a failed read is not a deletion")
            }
            plan.disarm()
            try company.loadValues()
            if company.isDeleted || company.symbol != Self.symbol || company.employees != 750 {
                tally.wrongResults += 1
                Issue.record("\(what): once reads succeed, the object reads \(company.symbol) \(company.employees), deleted: \(company.isDeleted)")
            }
        }
        print(tally.summary("fault firing") + "; reads per fault: \(reads)")
        #expect(tally.wrongResults == 0)
    }

    @Test(.timeLimit(.minutes(1)))
    func aToManyRelationshipWhoseReadsFailThrowsAndLoadsOnceReadsSucceed() throws {
        let template = try StoreTemplate(companies: Self.companies, updatesEach: Self.updatesEach)
        let reads = try countReads(template, loadingFirst: true) { company in _ = try company.value(forKey: "updates") }
        #expect(reads > 0, "loading the relationship reads the file")
        var tally = FaultTally()
        try forEachFailingRead(of: template, reads: reads, loadingFirst: true, doing: "loading company.updates") { company, plan, what in
            tally.cases += 1
            do {
                let updates = try company.value(forKey: "updates") as? Set<ManagedObject>
                if plan.injectedCount > 0 { tally.absorbed += 1 }
                if updates?.count != Self.updatesEach {
                    tally.wrongResults += 1
                    Issue.record("\(what): returned \(updates?.count ?? -1) updates without an error")
                }
            } catch {
                tally.errors += 1
                expectStoreError(error, what)
                #expect(!company.isDeleted, "\(what): a failed read is not a deletion")
            }
            plan.disarm()
            let updates = try company.value(forKey: "updates") as? Set<ManagedObject>
            if updates?.count != Self.updatesEach || company.updates.count != Self.updatesEach {
                tally.wrongResults += 1
                Issue.record("\(what): once reads succeed, the relationship holds \(updates?.count ?? -1) updates, not \(Self.updatesEach)")
            }
            #expect(company.managedObjectContext?.hasChanges == false, "\(what): loading a relationship changes nothing")
        }
        print(tally.summary("to-many loading") + "; reads per load: \(reads)")
        #expect(tally.wrongResults == 0)
    }

    /// Runs `body` for each of the first `reads` reads failing with each of
    /// ``failures``: on the company of a fresh copy of `template` (its values
    /// loaded first when `loadingFirst`), on its context's queue, with the
    /// read armed to fail.
    private func forEachFailingRead(of template: StoreTemplate, reads: Int, loadingFirst: Bool = false, doing action: String,
                                    _ body: (Company, FaultPlan, String) throws -> Void) throws {
        for (code, repetition) in Self.failures {
            for call in 0..<reads {
                let stack = try FaultStack(copying: template)
                let context = stack.newContext()
                let id = try stack.companyID(Self.symbol, in: template)
                try context.performAndWait {
                    let company = try #require(context.object(with: id) as? Company)
                    if loadingFirst { try company.loadValues() }
                    stack.plan.arm(.read, code: code, after: call, repeating: repetition)
                    try body(company, stack.plan, "\(action), read \(call + 1) failing with \(code) (\(repetition))")
                }
            }
        }
    }

    /// The store's error, carried by a ``FaultFulfillmentError``.
    private func expectStoreError(_ error: any Error, _ what: String) {
        #expect((error as? FaultFulfillmentError)?.underlying is PersistentStoreError,
                "\(what): the store's error, wrapped in FaultFulfillmentError, not \(type(of: error)): \(error)")
    }

    /// The reads `body` makes on the company of a fresh copy of `template`
    /// (its values loaded first when `loadingFirst`).
    private func countReads(_ template: StoreTemplate, loadingFirst: Bool = false,
                            _ body: (Company) throws -> Void) throws -> Int {
        let stack = try FaultStack(copying: template)
        let context = stack.newContext()
        let id = try stack.companyID(Self.symbol, in: template)
        return try context.performAndWait {
            let company = try #require(context.object(with: id) as? Company)
            if loadingFirst { try company.loadValues() }
            stack.plan.reset()
            try body(company)
            return stack.plan.callCount(.read)
        }
    }
}
