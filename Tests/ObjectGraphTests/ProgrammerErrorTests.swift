import Foundation
@testable import ObjectGraph
import Testing
@testable import DataStackStores

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

    @Test("deleting an object of one context in another traps")
    func deletingInAnotherContextTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let stack = try TestStack(type: .inMemory)
            let first = stack.newContext(), second = stack.newContext()
            let company = first.performAndWait { Company(context: first) }
            second.performAndWait { second.delete(company) }
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
            let stack = try TestStack(type: .inMemory)
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

    // MARK: - @Managed lookups

    // A class that disagrees with its entity no longer traps on first
    // access: the coordinator refuses it when the store is added (see
    // ModelDeclarationErrorTests for every kind of disagreement).
    @Test("a @Managed property whose name the entity lacks fails at setup, naming the class, the property and the entity")
    func aManagedPropertyTheEntityLacksFailsAtSetup() throws {
        let model = TestModel.make()
        model.entitiesByName["Company"]?.managedObjectClass = MisnamedCompany.self
        model.entitiesByName["StockUpdate"]?.managedObjectClass = ManagedObject.self
        let error = try #require(throws: ModelDeclarationError.self) { _ = try TestStack(type: .inMemory, model: model) }
        #expect(error.description.contains("MisnamedCompany.ticker (entity Company): the class declares it @Managed, but entity Company has no property named 'ticker'"))
    }

    @Test("a @Managed property that reflection cannot find (a class with a custom mirror) traps")
    func aManagedPropertyHiddenFromReflectionTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            // An entity of its own: bound to Company's, it would disagree
            // with StockUpdate.company (which holds Company objects) at setup.
            let model = TestModel.make()
            model.entities.append(EntityDescription(name: "Mirrored", managedObjectClass: MirroredCompany.self, properties: [
                AttributeDescription(name: "symbol", type: .string),
            ]))
            let stack = try TestStack(type: .inMemory, model: model)
            let context = stack.newContext()
            context.performAndWait { _ = MirroredCompany(context: context).symbol }
        }
        #expect(Self.trapMessage(result).contains("MirroredCompany: could not find the @Managed property's name"))
    }

    @Test("a non-optional to-one @Managed property fails at setup")
    func aNonOptionalToOneFailsAtSetup() throws {
        let model = TestModel.make()
        model.entitiesByName["StockUpdate"]?.managedObjectClass = StrictStockUpdate.self
        model.entitiesByName["Company"]?.managedObjectClass = ManagedObject.self   // Company.updates holds StockUpdate objects
        let error = try #require(throws: ModelDeclarationError.self) { _ = try TestStack(type: .inMemory, model: model) }
        #expect(error.description.contains("StrictStockUpdate.company (entity StockUpdate): a to-one relationship must be declared optional"))
    }

    @Test("relating objects of two contexts through a @Managed property traps")
    func relatingObjectsOfTwoContextsThroughATypedPropertyTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let stack = try TestStack(type: .inMemory)
            let first = stack.newContext(), second = stack.newContext()
            let company = first.performAndWait { Company(context: first) }
            second.performAndWait { StockUpdate(context: second).company = company }
        }
        let message = Self.trapMessage(result)
        #expect(message.contains("StockUpdate.company: related objects must be in the same context"))
        #expect(message.components(separatedBy: "StockUpdate.company").count == 2, "the relationship named once: \(message)")
    }

    @Test("init(context:) of a class bound to no entity, or to two, traps", arguments: [false, true])
    func initWithContextOfAClassBoundToNoSingleEntityTraps(boundToTwo: Bool) async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) { [boundToTwo] in
            let model = TestModel.make()
            if boundToTwo {
                // Two entities that both fit the class, so that setup accepts it.
                for name in ["Firm", "Firm2"] {
                    model.entities.append(EntityDescription(name: name, managedObjectClass: TwiceBoundObject.self, properties: [
                        AttributeDescription(name: "symbol", type: .string),
                    ]))
                }
            }
            let stack = try TestStack(type: .inMemory, model: model)
            let context = stack.newContext()
            context.performAndWait {
                if boundToTwo { _ = TwiceBoundObject(context: context) } else { _ = UnboundObject(context: context) }
            }
        }
        #expect(Self.trapMessage(result).contains(
            "\(boundToTwo ? "TwiceBoundObject" : "UnboundObject") is bound to no single entity of the context's model"))
    }

    // MARK: - Search

    @Test("a search snippet of no words traps")
    func aSnippetOfNoWordsTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = try SearchQuery("apple").snippet(of: "apple pie", words: 0)
        }
        #expect(Self.trapMessage(result).contains("a snippet needs room for at least one word"))
    }

    /// What the child process wrote to standard error: the trap's message, so
    /// that a test passes for the trap it is about, not for an error thrown before it.
    private static func trapMessage(_ result: ExitTest.Result?) -> String {
        String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
    }
}

// MARK: - Classes that break the @Managed contract

/// Declares `ticker`, which the Company entity lacks.
final class MisnamedCompany: ManagedObject {
    @Managed var ticker: String
}

/// Hides its stored properties from `Mirror`, where `@Managed` looks its names up.
final class MirroredCompany: ManagedObject, CustomReflectable {
    @Managed var symbol: String
    var customMirror: Mirror { Mirror(self, children: [:], ancestorRepresentation: .suppressed) }
}

/// Declares a to-one without `?`.
final class StrictStockUpdate: ManagedObject {
    @Managed var company: Company
}

/// Bound to no entity of any model.
final class UnboundObject: ManagedObject {}

/// Bound to two entities of one model.
final class TwiceBoundObject: ManagedObject {
    @Managed var symbol: String?
}
