import Foundation
@testable import ObjectGraph
import Testing

/// What an entity's version hash covers, as Core Data's does, and what it leaves out.
@Suite struct VersionHashTests {
    private static let covered: [(String, @Sendable (ManagedObjectModel) -> Void)] = [
        ("an attribute of the superentity", { model in
            model.entitiesByName["Asset"]!.properties.append(AttributeDescription(name: "isin", type: .string))
        }),
        ("a uniqueness constraint", { $0.entitiesByName["Bond"]!.uniquenessConstraints = [["coupon"]] }),
        ("a transient flag", { $0.entitiesByName["Bond"]!.properties.first { $0.name == "coupon" }!.isTransient = true }),
        ("an attribute type", { ($0.entitiesByName["Bond"]!.properties.first { $0.name == "coupon" } as? AttributeDescription)?.type = .float }),
        ("an entity's hash modifier", { $0.entitiesByName["Bond"]!.versionHashModifier = "2" }),
        ("abstractness", { $0.entitiesByName["Bond"]!.isAbstract = true }),
    ]

    private static let ignored: [(String, @Sendable (ManagedObjectModel) -> Void)] = [
        ("a fetch index", { $0.entitiesByName["Bond"]!.indexes = [FetchIndexDescription(name: "byCoupon", propertyNames: ["coupon"])] }),
        ("an indexed flag", { ($0.entitiesByName["Bond"]!.properties.first { $0.name == "coupon" } as? AttributeDescription)?.isIndexed = true }),
        ("a default value", { ($0.entitiesByName["Bond"]!.properties.first { $0.name == "coupon" } as? AttributeDescription)?.defaultValue = .double(1) }),
        ("a renaming identifier", { $0.entitiesByName["Bond"]!.renamingIdentifier = "Debt" }),
        ("user info", { $0.entitiesByName["Bond"]!.userInfo = ["a": "b"] }),
    ]

    @Test(arguments: covered.indices)
    func theHashCoversWhatCoreDataSaysItCovers(index: Int) {
        let original = EngineTestModel.make()   // kept alive: descriptions refer to their model unowned
        let before = original.entitiesByName["Bond"]!.versionHash
        let model = EngineTestModel.make()
        Self.covered[index].1(model)
        #expect(model.entitiesByName["Bond"]!.versionHash != before, "\(Self.covered[index].0)")
    }

    @Test(arguments: ignored.indices)
    func theHashLeavesOutWhatCoreDataLeavesOut(index: Int) {
        let original = EngineTestModel.make()   // kept alive: descriptions refer to their model unowned
        let before = original.entitiesByName["Bond"]!.versionHash
        let model = EngineTestModel.make()
        Self.ignored[index].1(model)
        #expect(model.entitiesByName["Bond"]!.versionHash == before, "\(Self.ignored[index].0)")
    }

    @Test func theHashCoversARelationshipsDeleteRuleCountsAndOrder() {
        func boxHash(_ change: (RelationshipDescription) -> Void) -> Data {
            let model = EngineTestModel.make()
            change(model.entitiesByName["Box"]!.relationshipsByName["gadgets"]!)
            return model.entitiesByName["Box"]!.versionHash
        }
        let before = boxHash { _ in }
        #expect(boxHash { $0.deleteRule = .deny } != before)
        #expect(boxHash { $0.isOrdered = true } != before)
        #expect(boxHash { $0.maxCount = 3 } != before)
        #expect(boxHash { $0.inverseName = nil } != before)
    }

    @Test func theChecksumIsSHA256OfTheHashesInNameOrder() {
        let model = EngineTestModel.make()
        let hashes = model.entityVersionHashesByName
        let concatenated = hashes.keys.sorted().flatMap { Array(hashes[$0]!) }
        #expect(model.versionChecksum == Data(SHA256.hash(concatenated)).base64EncodedString())
        #expect(Data(base64Encoded: model.versionChecksum)?.count == 32)
    }

    @Test func sha512MatchesTheStandardVectors() {
        #expect(Data(SHA512.hash(Array("abc".utf8))).base64EncodedString()
                == "3a81oZNherrMQXNJriBBMRLm+k6JqX6iCp7u5ktV05ohkpkqJ0/BqDa6PCOj/uu9RU1EI2Q86A4qmslPpUyknw==")
        #expect(SHA512.hash(Array(repeating: 0x61, count: 1000)).count == 64)
    }

    @Test func fieldBoundariesCannotShift() {
        var one = VersionHash.Encoder(), two = VersionHash.Encoder()
        one.append("ab"); one.append("c")
        two.append("a"); two.append("bc")
        #expect(one.hash != two.hash)
    }
}
