@_spi(DataStackInternal) import DataStackSQLite
import CFaultVFS
import Foundation
import Testing
@testable import ObjectGraph

/// The contract of ``FaultFulfillmentError``: a read that fails is never
/// data. The object stays a fault (the to-many stays unloaded), the failure
/// is posted, the saves it concerns throw it, and the next access retries.
///
/// Each case opens a copy of a seeded store on a fresh coordinator, so the
/// rows it reads are in neither SQLite's page cache nor the row cache: an
/// armed read fault reaches them.
@Suite struct ReadFailureContractTests {

    /// A fresh stack on a copy of the template, and the object ID of each company by symbol.
    ///
    /// The template (four companies C0…C3 with three price updates each) is
    /// made per case: the cases run in parallel, and it is small.
    private func makeStack() throws -> (FaultStack, [String: ObjectID]) {
        let template = try StoreTemplate(companies: 4, updatesEach: 3)
        let stack = try FaultStack(copying: template)
        let storeID = try #require(stack.coordinator.persistentStores.first).identifier
        let keys = try RawStore.open(stack.storeURL).prepare("SELECT ZSYMBOL, Z_PK FROM ZCOMPANY")
        var ids: [String: ObjectID] = [:]
        while try keys.step() {
            let uri = try #require(URL(string: "x-coredata://\(storeID)/Company/p\(keys.int64(at: 1))"))
            ids[keys.string(at: 0) ?? ""] = stack.coordinator.managedObjectID(forURIRepresentation: uri)
        }
        return (stack, ids)
    }

    /// The company with this symbol, as a fault of `context`.
    private func fault(_ symbol: String, _ ids: [String: ObjectID], in context: ManagedObjectContext) throws -> Company {
        let id = try #require(ids[symbol])
        return try #require(context.object(with: id) as? Company)
    }

    /// The failures a context posts while `body` runs.
    private func failuresPosted(by context: ManagedObjectContext, during body: () throws -> Void) rethrows -> [FaultFulfillmentError] {
        let recorder = NotificationRecorder(ManagedObjectContext.faultFulfillmentFailedNotification, object: context)
        try body()
        return recorder.notifications.compactMap { $0.userInfo?["DataStack.payload"] as? FaultFulfillmentError }
    }

    @Test func aFaultThatCannotBeReadStaysAFaultIsPostedAndLoadsOnTheNextAccess() throws {
        let (stack, ids) = try makeStack()
        let context = stack.newContext()
        try context.performAndWait {
            let company = try fault("C2", ids, in: context)
            stack.plan.arm(.read, code: CFAULTVFS_IOERR_READ, repeating: .always)
            let posted = failuresPosted(by: context) {
                #expect(company.symbol == "", "a typed read of an unreadable fault gets the initial value, for this access only")
            }
            #expect(posted.map(\.objectID) == [company.objectID])
            #expect(posted.first?.relationshipName == nil)
            #expect(company.isFault && !company.isDeleted, "an error never becomes a deleted object")
            #expect(context.deletedObjects.isEmpty && !context.hasChanges)
            let error = try #require(throws: FaultFulfillmentError.self) { try company.loadValues() }
            #expect("\(error)".contains("could not fulfill the fault of \(company.objectID)"))
            #expect(throws: FaultFulfillmentError.self) { try company.value(forKey: "symbol") }

            stack.plan.disarm()
            try company.loadValues()
            #expect(!company.isFault && company.symbol == "C2" && company.employees == 20)
        }
    }

    @Test func aToManyThatCannotBeReadStaysUnloadedAndIsNeverEmptied() throws {
        let (stack, ids) = try makeStack()
        let context = stack.newContext()
        try context.performAndWait {
            let company = try fault("C1", ids, in: context)
            try company.loadValues()
            stack.plan.arm(.read, code: CFAULTVFS_IOERR_READ, repeating: .always)
            let posted = failuresPosted(by: context) {
                #expect(company.updates.isEmpty, "a typed read of an unreadable to-many reads empty, for this access only")
            }
            #expect(posted.map(\.relationshipName) == ["updates"])
            #expect(try company.hasFault(forRelationshipNamed: "updates"), "the to-many stays unloaded")
            #expect(company.snapshot?[company.entity.propertiesByName["updates"]!.index] == .null, "nothing was written into the snapshot")
            #expect(throws: FaultFulfillmentError.self) { try company.value(forKey: "updates") }
            #expect(!company.hasChanges)

            stack.plan.disarm()
            #expect(company.updates.count == 3)
            #expect((try company.value(forKey: "updates") as? Set<ManagedObject>)?.count == 3)
        }
    }

    @Test func aSaveInvolvingAnObjectWhoseReadFailedThrowsItUntilARetrySucceeds() throws {
        let (stack, ids) = try makeStack()
        let context = stack.newContext()
        try context.performAndWait {
            let company = try fault("C0", ids, in: context)
            company.name = "Renamed"
            stack.plan.arm(.read, code: CFAULTVFS_IOERR_READ, repeating: .always)
            _ = company.updates
            stack.plan.disarm()

            let error = try #require(throws: FaultFulfillmentError.self) { try context.save() }
            #expect(error.objectID == company.objectID && error.relationshipName == "updates" && !error.changeWasDropped)
            #expect(company.isUpdated && company.name == "Renamed", "the failed save keeps the change")

            #expect(company.updates.count == 3, "the retry reads the relationship")
            try context.save()
        }
        #expect(try RawStore.text(stack.storeURL, "SELECT ZNAME FROM ZCOMPANY WHERE ZSYMBOL = 'C0'") == "Renamed")
        #expect(try RawStore.int(stack.storeURL, "SELECT count(*) FROM ZSTOCKUPDATE WHERE ZCOMPANY IS NOT NULL") == 12)
    }

    @Test func aTypedChangeToAnUnreadableFaultIsDroppedAndStopsEverySaveUntilRefreshed() throws {
        let (stack, ids) = try makeStack()
        let name = try RawStore.text(stack.storeURL, "SELECT ZNAME FROM ZCOMPANY WHERE ZSYMBOL = 'C3'")
        let context = stack.newContext()
        try context.performAndWait {
            let company = try fault("C3", ids, in: context)
            stack.plan.arm(.read, code: CFAULTVFS_IOERR_READ, repeating: .always)
            company.name = "Lost"
            stack.plan.disarm()
            #expect(company.isFault && !company.hasChanges, "the change could not be applied")

            let other = Company(context: context)
            other.symbol = "NEW"
            let error = try #require(throws: FaultFulfillmentError.self) { try context.save() }
            #expect(error.objectID == company.objectID && error.changeWasDropped)
            #expect("\(error)".contains("was not applied"))
            // A successful read does not make the lost change any less lost.
            #expect(company.name == name)
            #expect(throws: FaultFulfillmentError.self) { try context.save() }

            context.refresh(company, mergeChanges: false)
            try context.save()
        }
        #expect(try RawStore.text(stack.storeURL, "SELECT ZNAME FROM ZCOMPANY WHERE ZSYMBOL = 'C3'") == name)
        #expect(try RawStore.int(stack.storeURL, "SELECT count(*) FROM ZCOMPANY WHERE ZSYMBOL = 'NEW'") == 1)
    }

    @Test func aDeleteWhoseCascadeCannotBeReadDeletesNothing() throws {
        let (stack, ids) = try makeStack()
        let context = stack.newContext()
        try context.performAndWait {
            let company = try fault("C2", ids, in: context)
            try company.loadValues()
            stack.plan.arm(.read, code: CFAULTVFS_IOERR_READ, repeating: .always)
            context.delete(company)
            stack.plan.disarm()
            #expect(!company.isDeleted && context.deletedObjects.isEmpty, "nothing is deleted when the cascade cannot be read")
            let error = try #require(throws: FaultFulfillmentError.self) { try context.save() }
            #expect(error.changeWasDropped)

            context.rollback()
            try context.save()
            context.delete(company)
            #expect(company.isDeleted)
            try context.save()
        }
        #expect(try RawStore.int(stack.storeURL, "SELECT count(*) FROM ZCOMPANY") == 3)
        #expect(try RawStore.int(stack.storeURL, "SELECT count(*) FROM ZSTOCKUPDATE") == 9, "the cascade deleted the company's three updates")
    }

    @Test func aKeyValueChangeThatNeedsAnUnreadableFaultThrowsWithTheObjectUnchanged() throws {
        let (stack, ids) = try makeStack()
        let context = stack.newContext()
        try context.performAndWait {
            let company = context.object(with: try #require(ids["C1"]))
            stack.plan.arm(.read, code: CFAULTVFS_IOERR_READ, repeating: .always)
            #expect(throws: FaultFulfillmentError.self) { try company.setValue("X", forKey: "name") }
            stack.plan.disarm()
            #expect(!company.hasChanges)
            try context.save()   // nothing was dropped: the caller was told
            try company.setValue("X", forKey: "name")
            try context.save()
        }
        #expect(try RawStore.text(stack.storeURL, "SELECT ZNAME FROM ZCOMPANY WHERE ZSYMBOL = 'C1'") == "X")
    }

    @Test func theFailureReachesTheEventsStream() async throws {
        let (stack, ids) = try makeStack()
        let context = stack.newContext()
        let events = context.events
        let id = try #require(ids["C0"])
        let plan = stack.plan
        await context.perform {
            plan.arm(.read, code: CFAULTVFS_IOERR_READ, repeating: .always)
            _ = (context.object(with: id) as? Company)?.symbol
            plan.disarm()
        }
        for await event in events {
            if case .faultFulfillmentFailed(let failure) = event {
                #expect(failure.objectID == id)
                break
            }
        }
    }
}
