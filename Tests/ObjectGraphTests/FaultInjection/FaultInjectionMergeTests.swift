import CFaultVFS
import Foundation
import ObjectGraph
import Testing

/// Reads that fail while a context merges another context's save: once the
/// disk recovers, the merged objects show the saved rows (an object with
/// unsaved changes shows them on top of the new row), and none is deleted or
/// left with the old row as if the merge had happened.
@Suite struct FaultInjectionMergeTests {
    @Test(.timeLimit(.minutes(1)), arguments: [CFAULTVFS_IOERR_READ, SQLITE_CORRUPT])
    func aMergeWhoseReadsFailStillShowsTheSavedRowsOnceReadsSucceed(code: Int32) throws {
        let template = try StoreTemplate(companies: 40, updatesEach: 1)
        let stack = try FaultStack(copying: template)
        let receiver = stack.newContext()
        let (shown, edited) = try receiver.performAndWait {
            let companies = try receiver.fetch(companiesBySymbol)
            companies[0].name = "local"
            return (Array(companies.dropFirst()), companies[0])
        }

        let writer = stack.newContext()
        let save = try writer.performAndWait {
            for company in try writer.fetch(companiesBySymbol) { company.employees += 1_000 }
            let didSave = NotificationRecorder(ManagedObjectContext.didSaveNotification, object: writer)
            try writer.save()
            return try ContextDidSave(try #require(didSave.notifications.first))
        }

        stack.plan.reset()
        stack.plan.arm(.read, code: code, repeating: .always)
        let failures = NotificationRecorder(ManagedObjectContext.faultFulfillmentFailedNotification, object: receiver)
        receiver.performAndWait { _ = receiver.mergeChanges(fromContextDidSave: save) }
        stack.plan.disarm()
        let failedReads = stack.plan.injectedCount
        print("fault-injection merge, reads failing with \(code): \(failedReads) reads failed during the merge")

        receiver.performAndWait {
            #expect(!edited.isDeleted && shown.allSatisfy { !$0.isDeleted }, "a failed read deletes nothing")
            #expect(edited.name == "local", "the unsaved change survives")
            #expect(shown.allSatisfy { $0.employees >= 1_000 }, "the refreshed objects show the saved rows")
            // The reload under the unsaved change failed: it is reported, not
            // dropped, and the object keeps its row and version until a refresh
            // tries again (or its save meets the newer row as a conflict).
            let reported = failures.notifications.compactMap { $0.userInfo?["DataStack.payload"] as? FaultFulfillmentError }
            #expect(edited.employees >= 1_000 || reported.map(\.objectID).contains(edited.objectID),
                    "the edited object shows the saved row, or its failed reload is reported")
            receiver.refresh(edited, mergeChanges: true)
            #expect(edited.employees >= 1_000 && edited.name == "local", "a refresh shows the saved row under the unsaved change")
        }
    }
}
