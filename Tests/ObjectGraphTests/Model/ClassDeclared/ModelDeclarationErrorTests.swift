import DataStackStores
import Foundation
import ObjectGraph
import Testing

// MARK: - Bad declarations

/// A value with no slot kind: no attribute type.
struct BadOpaque: ManagedAttributeValue {
    init() {}
    init?(propertyValue: PropertyValue) { nil }
    var propertyValue: PropertyValue { .null }
    static var defaultManagedValue: BadOpaque { BadOpaque() }
}

final class BadUnsupported: ManagedObject {
    @Managed var fine: String
    @Managed var opaque: BadOpaque
}

final class BadDoubleOptional: ManagedObject {
    @Managed var nested: String??
}

final class BadLonely: ManagedObject {
    @Managed var friends: Set<BadStranger>
}

final class BadStranger: ManagedObject {
    @Managed var name: String
}

final class BadAmbiguous: ManagedObject {
    @Managed var items: Set<BadItem>
}

final class BadItem: ManagedObject {
    @Managed var owner: BadAmbiguous?
    @Managed var previousOwner: BadAmbiguous?
}

final class BadWrongInverse: ManagedObject {
    // `\BadItem2.others` leads to BadOther, not back to this class.
    @Managed(inverse: \.others) var items: Set<BadItem2>
}

final class BadItem2: ManagedObject {
    @Managed var others: Set<BadOther>
    @Managed var back: BadWrongInverse?
}

final class BadOther: ManagedObject {
    @Managed var item: BadItem2?
}

final class BadTwinA: ManagedObject {
    override class var entityDeclaration: EntityDeclaration { EntityDeclaration(name: "Twin") }
    @Managed var a: String
}

final class BadTwinB: ManagedObject {
    override class var entityDeclaration: EntityDeclaration { EntityDeclaration(name: "Twin") }
    @Managed var b: String
}

final class BadConstraint: ManagedObject {
    @Managed var name: String
    var displayName: String { "x" }
    override class var entityDeclaration: EntityDeclaration {
        EntityDeclaration(uniquenessConstraints: [[\BadConstraint.displayName]])
    }
}

final class BadForeignKeyPath: ManagedObject {
    @Managed var name: String
    override class var entityDeclaration: EntityDeclaration {
        EntityDeclaration(indexes: [[\BadStranger.name]])
    }
}

final class BadToOne: ManagedObject {
    @Managed var owner: BadStranger
}

final class BadExternalString: ManagedObject {
    @Managed(.externalStorage) var text: String
}

final class BadUniqueRelationship: ManagedObject {
    @Managed(.unique) var parent: BadUniqueRelationship?
    @Managed var children: Set<BadUniqueRelationship>
}

// MARK: - Classes bound to a given model

final class BoundTicker: ManagedObject {
    @Managed var symbol: String
    @Managed var price: Double
    @Managed var volume: Int          // the model says Integer 32: integers share a kind
    @Managed var company: BoundCompany?
}

final class BoundCompany: ManagedObject {
    @Managed var name: String?
    @Managed var tickers: Set<BoundTicker>
}

final class BoundTickerMissing: ManagedObject {
    @Managed var symbol: String
    @Managed var exchange: String     // not in the model
}

final class BoundTickerWrongType: ManagedObject {
    @Managed var symbol: Int
}

final class BoundTickerWrongKind: ManagedObject {
    @Managed var company: String?
}

final class BoundTickerNotOptional: ManagedObject {
    @Managed var company: BoundCompany
}

final class BoundTickerWrongCardinality: ManagedObject {
    @Managed var company: Set<BoundCompany>
}

@Suite struct ModelDeclarationErrorTests {
    /// The error `classes` throw, checked to name the class and the property.
    private func error(_ classes: [ManagedObject.Type]) -> ModelDeclarationError? {
        do {
            _ = try ManagedObjectModel(classes: classes)
            return nil
        } catch {
            return error
        }
    }

    private func expect(_ classes: [ManagedObject.Type], _ code: ModelDeclarationError.Code, className: String,
                        property: String?, saying words: String, sourceLocation: SourceLocation = #_sourceLocation) {
        guard let error = error(classes) else {
            Issue.record("no error", sourceLocation: sourceLocation)
            return
        }
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        #expect(error.className == className, "\(error)", sourceLocation: sourceLocation)
        #expect(error.propertyName == property, "\(error)", sourceLocation: sourceLocation)
        #expect(error.description.contains(className), "\(error)", sourceLocation: sourceLocation)
        if let property { #expect(error.description.contains(property), "\(error)", sourceLocation: sourceLocation) }
        #expect(error.description.contains(words), "\(error)", sourceLocation: sourceLocation)
    }

    @Test func anUnsupportedSwiftTypeIsNamed() {
        expect([BadUnsupported.self], .unsupportedType, className: "BadUnsupported", property: "opaque", saying: "BadOpaque")
        expect([BadDoubleOptional.self], .unsupportedType, className: "BadDoubleOptional", property: "nested", saying: "Optional")
    }

    @Test func aRelationshipWithoutAResolvableInverseThrows() {
        expect([BadLonely.self], .unresolvedInverse, className: "BadLonely", property: "friends", saying: "no relationship back")
        expect([BadAmbiguous.self], .unresolvedInverse, className: "BadAmbiguous", property: "items", saying: "owner, previousOwner")
        expect([BadWrongInverse.self], .unresolvedInverse, className: "BadWrongInverse", property: "items", saying: "leads to BadOther")
    }

    @Test func twoClassesForOneEntityNameThrow() {
        expect([BadTwinA.self, BadTwinB.self], .duplicateEntityName, className: "BadTwinB", property: nil, saying: "BadTwinA")
    }

    @Test func aConstraintOrIndexNamingNoManagedPropertyThrows() {
        // Swift prints a key path to a computed property without its name:
        // the message names the key path by its place.
        expect([BadConstraint.self], .unknownKeyPath, className: "BadConstraint", property: nil,
               saying: "uniqueness constraint 1's key path 1 names no @Managed property of BadConstraint")
        expect([BadForeignKeyPath.self], .unknownKeyPath, className: "BadForeignKeyPath", property: nil,
               saying: "index 1's key path 1 starts at BadStranger")
    }

    @Test func aNonOptionalToOneThrows() {
        expect([BadToOne.self], .toOneNotOptional, className: "BadToOne", property: "owner", saying: "must be optional")
    }

    @Test func anOptionThatDoesNotApplyThrows() {
        expect([BadExternalString.self], .invalidOption, className: "BadExternalString", property: "text", saying: ".externalStorage")
        expect([BadUniqueRelationship.self], .invalidOption, className: "BadUniqueRelationship", property: "parent", saying: "relationship")
    }

    // MARK: Setup check

    /// The model a loaded file would give: Ticker and Company, volume an Integer 32.
    private static func givenModel(ticker: ManagedObject.Type) -> ManagedObjectModel {
        let model = ManagedObjectModel(entities: [
            EntityDescription(name: "Ticker", managedObjectClass: ticker, properties: [
                AttributeDescription(name: "symbol", type: .string, isOptional: false),
                AttributeDescription(name: "price", type: .double),
                AttributeDescription(name: "volume", type: .integer32),
                RelationshipDescription(name: "company", destination: "Company", inverse: "tickers"),
            ]),
            EntityDescription(name: "Company", managedObjectClass: BoundCompany.self, properties: [
                AttributeDescription(name: "name", type: .string),
                RelationshipDescription(name: "tickers", destination: "Ticker", inverse: "company", isToMany: true),
            ]),
        ])
        return model
    }

    private func setupError(_ ticker: ManagedObject.Type) -> ModelDeclarationError? {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: Self.givenModel(ticker: ticker))
        do {
            try coordinator.addPersistentStore(type: .inMemory, at: nil)
            return nil
        } catch let error as ModelDeclarationError {
            return error
        } catch {
            Issue.record("another error: \(error)")
            return nil
        }
    }

    @Test func aClassThatAgreesWithTheGivenModelSetsUp() throws {
        #expect(setupError(BoundTicker.self) == nil)
        try Self.givenModel(ticker: BoundTicker.self).checkManagedObjectClasses()
    }

    @Test func aClassThatDisagreesWithTheGivenModelFailsAtSetup() throws {
        let cases: [(ManagedObject.Type, String, String, String)] = [
            (BoundTickerMissing.self, "BoundTickerMissing", "exchange", "has no property named 'exchange'"),
            (BoundTickerWrongType.self, "BoundTickerWrongType", "symbol", "the entity's attribute is string"),
            (BoundTickerWrongKind.self, "BoundTickerWrongKind", "company", "is a relationship"),
            (BoundTickerNotOptional.self, "BoundTickerNotOptional", "company", "must be declared optional"),
            (BoundTickerWrongCardinality.self, "BoundTickerWrongCardinality", "company", "to-one"),
        ]
        for (type, className, property, words) in cases {
            let error = try #require(setupError(type), "\(className)")
            #expect(error.code == .mismatch)
            #expect(error.className == className && error.propertyName == property && error.entityName == "Ticker", "\(error)")
            #expect(error.description.contains("\(className).\(property) (entity Ticker)"), "\(error)")
            #expect(error.description.contains(words), "\(error)")
        }
    }

    @Test func aClassBoundToAnEntityOfAnotherClassesDestinationFails() throws {
        // Company's entity left bound to ManagedObject: BoundTicker.company
        // would read objects that are not BoundCompany.
        let model = Self.givenModel(ticker: BoundTicker.self)
        model.entitiesByName["Company"]?.managedObjectClass = ManagedObject.self
        let error = try #require(throws: ModelDeclarationError.self) { try model.checkManagedObjectClasses() }
        #expect(error.propertyName == "company" && error.description.contains("bind the class"), "\(error)")
    }
}
