import Foundation
import ObjectGraph

// Three fixture models of `shared/fixtures/coredata`, declared as classes.
// Class names carry a prefix, so that they cannot clash with the other
// tests' classes; `EntityDeclaration(name:)` gives the fixtures' entity names.

// MARK: - coredataplus-samplemodel, SampleModel (inheritance three deep, constraints, transient, UUID)

/// The value of `Car.color`, a transformable attribute.
struct SampleColor: TransformableValue, Equatable {
    var name: String
    static let defaultManagedValue = SampleColor(name: "")
}

class SampleCar: ManagedObject {
    @Managed var color: SampleColor?
    @Managed(.transient) var currentDrivingSpeed: Int64? = 0
    @Managed var maker: String?
    @Managed var markedForDeletionAsOf: Date?
    @Managed var model: String?
    @Managed(.unique) var numberPlate: String
    @Managed(inverse: \.cars) var owner: SamplePerson?
    override class var entityDeclaration: EntityDeclaration { EntityDeclaration(name: "Car") }
}

class SampleSportCar: SampleCar {
    override class var entityDeclaration: EntityDeclaration { EntityDeclaration(name: "SportCar") }
}

final class SampleExpensiveSportCar: SampleSportCar {
    @Managed var isLimitedEdition: Bool? = false
    override class var entityDeclaration: EntityDeclaration { EntityDeclaration(name: "ExpensiveSportCar") }
}

final class SamplePerson: ManagedObject {
    @Managed var firstName: String?
    @Managed(.preserveValueOnDeletion) var id: UUID
    @Managed(.transient) var isDriving: Bool = false
    @Managed var lastName: String?
    @Managed var updatedAt: Date
    // The inverse is declared on the other side only.
    @Managed var cars: Set<SampleCar>
    override class var entityDeclaration: EntityDeclaration {
        EntityDeclaration(name: "Person", uniquenessConstraints: [[\SamplePerson.firstName, \SamplePerson.lastName]])
    }
}

// MARK: - ddg-bookmarks, BookmarksModel 5 (ordered to-many, ordered reflexive many-to-many, fetch indexes)

final class DDGBookmark: ManagedObject {
    @Managed var isFolder: Bool
    @Managed(hashModifier: "3") var isPendingDeletion: Bool? = false
    @Managed var lastChildrenPayloadReceivedFromSync: String?
    @Managed var modifiedAt: Date?
    @Managed var title: String?
    @Managed(hashModifier: "3") var url: String?
    @Managed(hashModifier: "3") var uuid: String
    @Managed(inverse: \.parent, deleteRule: .cascade) var children: [DDGBookmark]
    // One side of each pair names the inverse: naming it on both sides of a
    // pair in one class is a circular reference to Swift's type checker.
    @Managed(originalName: "favoriteFolder") var favoriteFolders: Set<DDGBookmark>
    @Managed(inverse: \.favoriteFolders) var favorites: [DDGBookmark]
    @Managed var parent: DDGBookmark?
    override class var entityDeclaration: EntityDeclaration {
        EntityDeclaration(name: "BookmarkEntity", indexes: [
            IndexDeclaration(name: "byUUID", \DDGBookmark.uuid, \DDGBookmark.isPendingDeletion),
            IndexDeclaration(name: "byURL", \DDGBookmark.url, \DDGBookmark.isPendingDeletion),
            [\DDGBookmark.isPendingDeletion],   // named byIsPendingDeletion by default
        ])
    }
}

// MARK: - coredataplus-samplemodel, SampleModel2 (uniqueness constraints, a compound fetch index, a renamed subentity)

class Sample2Car: ManagedObject {
    @Managed var maker: String?
    @Managed var markedForDeletionAsOf: Date?
    @Managed var model: String?
    @Managed(.unique) var numberPlate: String
    @Managed var owner: Sample2Person?
    override class var entityDeclaration: EntityDeclaration {
        EntityDeclaration(name: "Car", indexes: [
            IndexDeclaration(name: "byMakerAndNumberPlate", \Sample2Car.maker, \Sample2Car.numberPlate),
        ])
    }
}

class Sample2SportCar: Sample2Car {
    override class var entityDeclaration: EntityDeclaration { EntityDeclaration(name: "SportCar") }
}

final class Sample2LuxuryCar: Sample2SportCar {
    @Managed var isLimitedEdition: Bool? = false
    override class var entityDeclaration: EntityDeclaration {
        EntityDeclaration(name: "LuxuryCar", originalName: "ExpensiveSportCar")
    }
}

final class Sample2Person: ManagedObject {
    @Managed var firstName: String?
    @Managed var lastName: String?
    @Managed var updatedAt: Date
    @Managed(inverse: \.owner) var cars: Set<Sample2Car>
    override class var entityDeclaration: EntityDeclaration {
        EntityDeclaration(name: "Person", uniquenessConstraints: [[\Sample2Person.firstName, \Sample2Person.lastName]])
    }
}
