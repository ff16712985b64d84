import Foundation
@testable import ObjectGraph
import Testing

/// The programmer errors the package documents as traps, as Core Data raises
/// for them: each stops the process (an exit test runs it in a child process).
@Suite struct ProgrammerErrorTests {
    @Test("inserting an object of one context into another traps")
    func insertingIntoAnotherContextTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let stack = try TestStack(type: .inMemory)
            let first = stack.newContext(), second = stack.newContext()
            let company = first.performAndWait { Company(context: first) }
            second.performAndWait { second.insert(company) }
        }
        #expect(Self.trapMessage(result).contains("belongs to another context"))
    }

    @Test("using a context off its queue traps (debug builds, or DATASTACK_QUEUE_CHECKS=1)")
    func usingAContextOffItsQueueTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let stack = try TestStack(type: .inMemory)
            let context = stack.newContext()
            _ = Company(context: context)   // not inside perform
        }
        #expect(Self.trapMessage(result).contains("used off its queue"))
    }

    @Test("a fetched results controller asked for an object before performFetch(), or past its last, traps",
          arguments: [false, true])
    func aFetchedResultsControllerOutOfRangeTraps(fetched: Bool) async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) { [fetched] in
            let stack = try TestStack(type: .inMemory)
            let context = stack.newContext()
            let request = FetchRequest<Company>(entityName: "Company", predicate: nil, sortDescriptors: [FetchSort(key: "symbol")])
            let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context)
            try context.performAndWait {
                if fetched { try controller.performFetch() }
                _ = controller.object(at: FetchedIndexPath(item: 0, section: 0))
            }
        }
        #expect(Self.trapMessage(result).contains(fetched ? "out of range" : "before performFetch()"))
    }

    @Test("a fault whose row is gone traps when shouldDeleteInaccessibleFaults is false")
    func anInaccessibleFaultTrapsWhenAskedTo() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let stack = try TestStack(type: .sqlite)
            let id = try stack.seedCompanies(["ACME"])[0]
            let deleter = stack.newContext()
            try deleter.performAndWait {
                deleter.delete(deleter.object(with: id))
                try deleter.save()
            }
            let reader = stack.newContext()
            reader.shouldDeleteInaccessibleFaults = false
            try reader.performAndWait {
                _ = try reader.object(with: id).value(forKey: "symbol")
            }
        }
        #expect(Self.trapMessage(result).contains("shouldDeleteInaccessibleFaults is false"))
    }

    @Test("changing any part of a model a coordinator uses traps",
          arguments: ["entities", "versionIdentifiers", "configurations", "entity", "property"])
    func changingAFrozenModelTraps(part: String) async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) { [part] in
            let model = TestModel.make()
            _ = try TestStack(type: .inMemory, model: model)
            let company = model.entitiesByName["Company"]
            switch part {
            case "entities": model.entities.append(EntityDescription(name: "Late"))
            case "versionIdentifiers": model.versionIdentifiers.insert("v2")
            case "configurations": model.configurations["Late"] = ["Company"]
            case "entity": company?.name = "Firm"
            default: company?.properties.first?.name = "ticker"
            }
        }
        #expect(Self.trapMessage(result).contains("immutable once a coordinator uses it"))
    }

    /// What the child process wrote to standard error: the trap's message, so
    /// that a test passes for the trap it is about, not for an error thrown before it.
    private static func trapMessage(_ result: ExitTest.Result?) -> String {
        String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
    }
}
