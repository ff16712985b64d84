import Foundation
import ObjectGraph
import Testing
import DataStackStores

/// The model's validation rules, checked on save: required values, minimum and
/// maximum, length, regular expression; every broken rule is reported.
@Suite struct ValidationTests {
    /// A broken rule of the Rated entity: the key, the bad value, and words the reason must contain.
    static let brokenRules: [(key: String, value: any Sendable, reason: String)] = [
        ("score", -1, "below the minimum 0"),
        ("score", 11, "above the maximum 10"),
        ("ratio", 0.25, "below the minimum 0.5"),
        ("ratio", 3.0, "above the maximum 2.5"),
        ("code", "A", "shorter than 2"),
        ("code", "ABCDE", "longer than 4"),
        ("code", "ab", "does not match the pattern [A-Z]+"),
        ("code", "ABc", "does not match the pattern [A-Z]+"),
    ]

    @Test(arguments: brokenRules.indices)
    func aBrokenRuleFailsTheSaveNamingObjectKeyAndReason(index: Int) throws {
        let rule = Self.brokenRules[index]
        let stack = try TestStack(type: .inMemory, model: EngineTestModel.make())
        let context = stack.newContext()
        try context.performAndWait {
            let rated = try makeRated(in: context, stack: stack)
            try rated.setValue(rule.value, forKey: rule.key)
            let errors = try validationErrors { try context.save() }
            #expect(errors.count == 1)
            #expect(errors.first?.key == rule.key)
            #expect(errors.first?.objectID == rated.objectID)
            #expect(errors.first?.reason.contains(rule.reason) == true, "\(errors.first?.reason ?? "")")
            #expect(errors.first.map { "\($0)" }?.hasPrefix("Rated.\(rule.key) (") == true)
        }
    }

    @Test(arguments: allStoreTypes)
    func everyBrokenRuleOfEveryObjectIsListedInOneError(type: StoreType) throws {
        let stack = try TestStack(type: type, model: EngineTestModel.make())
        let context = stack.newContext()
        try context.performAndWait {
            let first = try makeRated(in: context, stack: stack)
            try first.setValue(nil, forKey: "name")
            try first.setValue(11, forKey: "score")
            try first.setValue("abcdef", forKey: "code")
            try first.setValue(0.0, forKey: "ratio")
            let second = try makeRated(in: context, stack: stack)
            try second.setValue(-5, forKey: "score")

            let error = #expect(throws: ObjectGraphError.self) { try context.save() }
            guard error?.code == .validationFailed, let errors = error?.validationErrors else { Issue.record("got \(String(describing: error))"); return }
            let found = Set(errors.map { "\($0.objectID == first.objectID ? "first" : "second").\($0.key ?? "")" })
            #expect(found == ["first.name", "first.score", "first.code", "first.ratio", "second.score"])
            #expect(errors.first { $0.key == "name" }?.reason == "a value is required")
            let description = "\(try #require(error))"
            #expect(description.hasPrefix("validation failed: "))
            for key in ["Rated.name", "Rated.score", "Rated.code", "Rated.ratio"] { #expect(description.contains(key)) }
        }
    }

    @Test func valuesOnTheBoundsAreValid() throws {
        let stack = try TestStack(type: .inMemory, model: EngineTestModel.make())
        let context = stack.newContext()
        try context.performAndWait {
            let low = try makeRated(in: context, stack: stack)
            try low.setValue(0, forKey: "score")
            try low.setValue(0.5, forKey: "ratio")
            try low.setValue("AB", forKey: "code")
            let high = try makeRated(in: context, stack: stack)
            try high.setValue(10, forKey: "score")
            try high.setValue(2.5, forKey: "ratio")
            try high.setValue("ABCD", forKey: "code")
            try context.save()
            #expect(!context.hasChanges)
        }
    }

    @Test(arguments: allStoreTypes)
    func aRequiredValueMissingOnAnUpdateFailsTheSave(type: StoreType) throws {
        let stack = try TestStack(type: type)
        try stack.seedCompanies(["ACME"])
        let context = stack.newContext()
        try context.performAndWait {
            let company = try #require(try context.fetch(FetchRequest<Company>()).first)
            try company.setValue(nil, forKey: "symbol")
            let errors = try validationErrors { try context.save() }
            #expect(errors.map(\.key) == ["symbol"])
            #expect(company.isUpdated, "the change stays in the context")
            company.symbol = "BACK"
            try context.save()
        }
    }

    @Test func validateValuesCanBeCalledBeforeSaving() throws {
        let stack = try TestStack(type: .inMemory, model: EngineTestModel.make())
        let context = stack.newContext()
        try context.performAndWait {
            let rated = try makeRated(in: context, stack: stack)
            try rated.validateValues()
            try rated.validateForInsert()
            try rated.setValue(42, forKey: "score")
            let errors = try validationErrors { try rated.validateForUpdate() }
            #expect(errors.map(\.key) == ["score"])
        }
    }

    // MARK: - Helpers

    /// A valid Rated object.
    private func makeRated(in context: ManagedObjectContext, stack: TestStack) throws -> ManagedObject {
        let entity = try #require(stack.model.entitiesByName["Rated"])
        let rated = ManagedObject(entity: entity, insertInto: context)
        try rated.setValue("valid", forKey: "name")
        return rated
    }

    @Test(arguments: allStoreTypes)
    func notANumberIsRefusedAtSaveAndInfinityIsKept(type: StoreType) throws {
        let stack = try TestStack(type: type, model: EngineTestModel.make())
        let context = stack.newContext()
        try context.performAndWait {
            let gadget = Gadget(context: context)
            gadget.name = "g"
            gadget.ratio = .nan
            let errors = try validationErrors { try context.save() }
            #expect(errors.map(\.key) == ["ratio"])
            #expect(errors.first?.description.contains("NaN") == true)
            #expect(gadget.isInserted && gadget.ratio.isNaN, "the failed save keeps the change")

            gadget.ratio = -.infinity
            try context.save()
        }
        let reader = stack.newContext()
        try reader.performAndWait {
            let stored = try #require(try reader.fetch(FetchRequest<Gadget>()).first)
            #expect(stored.ratio == -.infinity)
        }
    }

    private func validationErrors(_ body: () throws -> Void) throws -> [ValidationError] {
        let error = #expect(throws: ObjectGraphError.self) { try body() }
        guard error?.code == .validationFailed, let errors = error?.validationErrors else {
            Issue.record("expected validationFailed, got \(String(describing: error))")
            return []
        }
        return errors
    }
}
