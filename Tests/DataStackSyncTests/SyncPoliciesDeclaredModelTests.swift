import DataStack
import DataStackSync
import Foundation
import Testing

/// A class-declared model with sync policies on its properties and its entity declaration.
class SyncDeclaredProduct: ManagedObject {
    @Managed var name: String = ""
    @Managed(userInfo: .sync(.resolver("maxStock"))) var stock: Int64 = 0
    @Managed(userInfo: .sync(.hubWins)) var price: Double = 0
    override class var entityDeclaration: EntityDeclaration {
        EntityDeclaration(name: "Product", userInfo: .sync(.editWins))
    }
}

/// Declares `price`'s policy twice, alike: accepted.
final class SyncDeclaredTwiceAlike: ManagedObject {
    @Managed(userInfo: .sync(.hubWins)) var price: Double = 0
    override class var entityDeclaration: EntityDeclaration {
        EntityDeclaration(name: "Alike", propertyUserInfo: [\SyncDeclaredTwiceAlike.price: .sync(.hubWins)])
    }
}

/// Declares `price`'s policy twice, differently: refused.
final class SyncDeclaredTwiceApart: ManagedObject {
    @Managed(userInfo: .sync(.hubWins)) var price: Double = 0
    override class var entityDeclaration: EntityDeclaration {
        EntityDeclaration(name: "Apart", propertyUserInfo: [\SyncDeclaredTwiceApart.price: .sync(.replicaWins)])
    }
}

/// Inherits `stock`'s policy from its superclass; declares its own for `grade` in its entity declaration.
final class SyncDeclaredFood: SyncDeclaredProduct {
    @Managed var grade: String = ""
    override class var entityDeclaration: EntityDeclaration {
        EntityDeclaration(name: "Food", propertyUserInfo: [\SyncDeclaredFood.grade: [SyncMergePolicy.userInfoKey: "replicaWins"]])
    }
}

/// Tries to give user info to a property its superclass declares.
final class SyncDeclaredBadFood: SyncDeclaredProduct {
    override class var entityDeclaration: EntityDeclaration {
        EntityDeclaration(name: "BadFood", propertyUserInfo: [\SyncDeclaredBadFood.price: ["x": "y"]])
    }
}

@Suite("Sync policies of a class-declared model")
struct SyncPoliciesDeclaredModelTests {
    static let maxStock: SyncResolver = { conflict in
        guard case .integer(let a) = conflict.current, case .integer(let b) = conflict.incoming else { return conflict.incoming }
        return .integer(max(a, b))
    }

    @Test("an entity declaration's user info and property user info give the sync policies, inherited ones too")
    func declaredPolicies() throws {
        let model = try ManagedObjectModel(classes: [SyncDeclaredProduct.self, SyncDeclaredFood.self])
        #expect(model.entitiesByName["Product"]?.userInfo == [SyncDeletePolicy.userInfoKey: "editWins"])
        let policies = try SyncPolicies(model: model, resolvers: ["maxStock": Self.maxStock])
        #expect(policies.mergePolicy(entity: "Product", property: "stock") == .resolver("maxStock"))
        #expect(policies.mergePolicy(entity: "Product", property: "price") == .hubWins)
        #expect(policies.mergePolicy(entity: "Product", property: "name") == .lastWriterWins)
        #expect(policies.mergePolicy(entity: "Food", property: "stock") == .resolver("maxStock"))
        #expect(policies.mergePolicy(entity: "Food", property: "grade") == .replicaWins)
        #expect(policies.deletePolicy(entity: "Product") == .editWins)
        #expect(policies.deletePolicy(entity: "Food") == .editWins)
        // The resolver is required: a replica that cannot merge stock must not sync.
        #expect(throws: SyncError.self) { try SyncPolicies(model: model) }
    }

    @Test("a policy declared on the property and in the entity declaration must agree")
    func policyDeclaredTwice() throws {
        let model = try ManagedObjectModel(classes: [SyncDeclaredTwiceAlike.self])
        #expect(try SyncPolicies(model: model).mergePolicy(entity: "Alike", property: "price") == .hubWins)
        #expect {
            try ManagedObjectModel(classes: [SyncDeclaredTwiceApart.self])
        } throws: { error in
            guard let error = error as? ModelDeclarationError else { return false }
            return error.code == .conflictingUserInfo && error.className == "SyncDeclaredTwiceApart" && error.propertyName == "price"
                && "\(error)".contains("hubWins") && "\(error)".contains("replicaWins")
        }
    }

    @Test("user info for an inherited property is refused, naming the property")
    func inheritedPropertyUserInfoIsRefused() {
        #expect {
            try ManagedObjectModel(classes: [SyncDeclaredProduct.self, SyncDeclaredBadFood.self])
        } throws: { error in
            (error as? ModelDeclarationError)?.code == .unknownKeyPath && "\(error)".contains("price")
        }
    }
}
