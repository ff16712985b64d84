import Foundation
import ObjectGraph
import DataStackStores

// The model of the relationship suites (Relationship, ManyToMany, DeleteRule,
// Inheritance, UniquenessConstraint tests): every kind of relationship, every
// delete rule, an abstract entity and uniqueness constraints.
//
// Core Data's entity numbers for it (roots and siblings by name, depth first):
// Author 1, Book 2, Department 3, Employee 4, Garage 5, GraphNode 6, Label 7,
// Listing 8, Member 9, Owner 10, Permit 11, Pet 12, Playlist 13, Quote 14,
// Reader 15, Seat 16, Shelf 17, Team 18, Track 19, Vehicle 20, Car 21, Truck 22.

/// Many-to-many with Book.
final class Author: ManagedObject {
    @Managed var name: String
    @Managed var books: Set<Book>
}

final class Book: ManagedObject {
    @Managed var title: String
    @Managed var authors: Set<Author>
    @Managed var fans: Set<Reader>
}

/// An ordered many-to-many: `favorites` ↔ Book.fans.
final class Reader: ManagedObject {
    @Managed var name: String
    @Managed var favorites: [Book]
}

/// An ordered one-to-many (cascade) with a to-one inverse.
final class Playlist: ManagedObject {
    @Managed var name: String
    @Managed var tracks: [Track]
}

final class Track: ManagedObject {
    @Managed var title: String
    @Managed var playlist: Playlist?
}

/// Self-relationships: a tree (cascade), a reflexive many-to-many, a one-to-one chain.
final class GraphNode: ManagedObject {
    @Managed var name: String
    @Managed var parent: GraphNode?
    @Managed var children: Set<GraphNode>
    @Managed var links: Set<GraphNode>
    @Managed var backlinks: Set<GraphNode>
    @Managed var next: GraphNode?
    @Managed var previous: GraphNode?
}

/// A to-many without an inverse.
final class Shelf: ManagedObject {
    @Managed var name: String
    @Managed var labels: Set<Label>
}

final class Label: ManagedObject {
    @Managed var text: String
}

/// Deny: an owner with pets cannot be deleted.
final class Owner: ManagedObject {
    @Managed var name: String
    @Managed var pets: Set<Pet>
}

final class Pet: ManagedObject {
    @Managed var name: String
    @Managed var owner: Owner?
}

/// Cascade, with hooks that record what they see.
final class Department: ManagedObject {
    @Managed var name: String
    @Managed var employees: Set<Employee>
    var employeesSeenWhenDeleted: Int?

    override func prepareForDeletion() { employeesSeenWhenDeleted = employees.count }
}

final class Employee: ManagedObject {
    @Managed var name: String
    @Managed var department: Department?
    var departmentSeenWhenDeleted: String??

    override func prepareForDeletion() { departmentSeenWhenDeleted = .some(department?.name) }
}

/// No action: members keep pointing at a deleted team.
final class Team: ManagedObject {
    @Managed var name: String
    @Managed var members: Set<Member>
}

final class Member: ManagedObject {
    @Managed var name: String
    @Managed var team: Team?
}

/// An abstract entity with two subentities, a to-many into the hierarchy and a
/// to-one (without inverse) pointing at it.
class Vehicle: ManagedObject {
    @Managed var plate: String
    @Managed var garage: Garage?
}

final class Car: Vehicle {
    @Managed var seats: Int
}

final class Truck: Vehicle {
    @Managed var load: Double
}

final class Garage: ManagedObject {
    @Managed var name: String
    @Managed var vehicles: Set<Vehicle>
}

final class Permit: ManagedObject {
    @Managed var number: Int
    @Managed var vehicle: Vehicle?
}

/// Uniqueness: `symbol`; quotes merge when listings collapse.
final class Listing: ManagedObject {
    @Managed var symbol: String
    @Managed var name: String?
    @Managed var price: Double
    @Managed var quotes: Set<Quote>
}

final class Quote: ManagedObject {
    @Managed var value: Double
    @Managed var listing: Listing?
}

/// Uniqueness over two keys.
final class Seat: ManagedObject {
    @Managed var row: String
    @Managed var number: Int
    @Managed var holder: String?
}

enum GraphTestModel {
    /// A fresh model each call: a model freezes once a coordinator uses it.
    static func make() -> ManagedObjectModel {
        func string(_ name: String, optional: Bool = true) -> AttributeDescription {
            AttributeDescription(name: name, type: .string, isOptional: optional)
        }
        func to(_ name: String, _ destination: String, inverse: String?, many: Bool = false, ordered: Bool = false,
                rule: DeleteRule = .nullify) -> RelationshipDescription {
            RelationshipDescription(name: name, destination: destination, inverse: inverse, isToMany: many,
                                    isOrdered: ordered, deleteRule: rule)
        }
        let author = EntityDescription(name: "Author", managedObjectClass: Author.self, properties: [
            string("name"), to("books", "Book", inverse: "authors", many: true),
        ])
        let book = EntityDescription(name: "Book", managedObjectClass: Book.self, properties: [
            string("title"), to("authors", "Author", inverse: "books", many: true),
            to("fans", "Reader", inverse: "favorites", many: true),
        ])
        let reader = EntityDescription(name: "Reader", managedObjectClass: Reader.self, properties: [
            string("name"), to("favorites", "Book", inverse: "fans", many: true, ordered: true),
        ])
        let playlist = EntityDescription(name: "Playlist", managedObjectClass: Playlist.self, properties: [
            string("name"), to("tracks", "Track", inverse: "playlist", many: true, ordered: true, rule: .cascade),
        ])
        let track = EntityDescription(name: "Track", managedObjectClass: Track.self, properties: [
            string("title"), to("playlist", "Playlist", inverse: "tracks"),
        ])
        let node = EntityDescription(name: "GraphNode", managedObjectClass: GraphNode.self, properties: [
            string("name"),
            to("parent", "GraphNode", inverse: "children"),
            to("children", "GraphNode", inverse: "parent", many: true, rule: .cascade),
            to("links", "GraphNode", inverse: "backlinks", many: true),
            to("backlinks", "GraphNode", inverse: "links", many: true),
            to("next", "GraphNode", inverse: "previous"),
            to("previous", "GraphNode", inverse: "next"),
        ])
        let shelf = EntityDescription(name: "Shelf", managedObjectClass: Shelf.self, properties: [
            string("name"), to("labels", "Label", inverse: nil, many: true),
        ])
        let label = EntityDescription(name: "Label", managedObjectClass: Label.self, properties: [string("text")])
        let owner = EntityDescription(name: "Owner", managedObjectClass: Owner.self, properties: [
            string("name"), to("pets", "Pet", inverse: "owner", many: true, rule: .deny),
        ])
        let pet = EntityDescription(name: "Pet", managedObjectClass: Pet.self, properties: [
            string("name"), to("owner", "Owner", inverse: "pets"),
        ])
        let department = EntityDescription(name: "Department", managedObjectClass: Department.self, properties: [
            string("name"), to("employees", "Employee", inverse: "department", many: true, rule: .cascade),
        ])
        let employee = EntityDescription(name: "Employee", managedObjectClass: Employee.self, properties: [
            string("name"), to("department", "Department", inverse: "employees"),
        ])
        let team = EntityDescription(name: "Team", managedObjectClass: Team.self, properties: [
            string("name"), to("members", "Member", inverse: "team", many: true, rule: .noAction),
        ])
        let member = EntityDescription(name: "Member", managedObjectClass: Member.self, properties: [
            string("name"), to("team", "Team", inverse: "members"),
        ])
        let vehicle = EntityDescription(name: "Vehicle", managedObjectClass: Vehicle.self, properties: [
            string("plate"), to("garage", "Garage", inverse: "vehicles"),
        ])
        vehicle.isAbstract = true
        vehicle.uniquenessConstraints = [["plate"]]
        let car = EntityDescription(name: "Car", managedObjectClass: Car.self, properties: [
            AttributeDescription(name: "seats", type: .integer16, defaultValue: .integer(4)),
        ])
        let truck = EntityDescription(name: "Truck", managedObjectClass: Truck.self, properties: [
            AttributeDescription(name: "load", type: .double, defaultValue: .double(0)),
        ])
        vehicle.subentities = [car, truck]
        let garage = EntityDescription(name: "Garage", managedObjectClass: Garage.self, properties: [
            string("name"), to("vehicles", "Vehicle", inverse: "garage", many: true),
        ])
        let permit = EntityDescription(name: "Permit", managedObjectClass: Permit.self, properties: [
            AttributeDescription(name: "number", type: .integer32, defaultValue: .integer(0)),
            to("vehicle", "Vehicle", inverse: nil),
        ])
        let listing = EntityDescription(name: "Listing", managedObjectClass: Listing.self, properties: [
            string("symbol", optional: false), string("name"),
            AttributeDescription(name: "price", type: .double, defaultValue: .double(0)),
            to("quotes", "Quote", inverse: "listing", many: true, rule: .cascade),
        ])
        listing.uniquenessConstraints = [["symbol"]]
        let quote = EntityDescription(name: "Quote", managedObjectClass: Quote.self, properties: [
            AttributeDescription(name: "value", type: .double, defaultValue: .double(0)),
            to("listing", "Listing", inverse: "quotes"),
        ])
        let seat = EntityDescription(name: "Seat", managedObjectClass: Seat.self, properties: [
            string("row", optional: false), AttributeDescription(name: "number", type: .integer32, defaultValue: .integer(0)),
            string("holder"),
        ])
        seat.uniquenessConstraints = [["row", "number"]]
        return ManagedObjectModel(entities: [
            author, book, reader, playlist, track, node, shelf, label, owner, pet, department, employee, team, member,
            vehicle, car, truck, garage, permit, listing, quote, seat,
        ])
    }
}

/// A store of the graph model and contexts on it.
struct GraphStack {
    let stack: TestStack
    var coordinator: PersistentStoreCoordinator { stack.coordinator }
    var storeURL: URL { stack.storeURL }

    init(_ type: StoreType = .sqlite) throws {
        stack = try TestStack(type: type, model: GraphTestModel.make())
    }

    func context(_ policy: MergePolicy = .error) -> ManagedObjectContext {
        let context = stack.newContext()
        context.mergePolicy = policy
        return context
    }

    /// Counts the SQL statements the SQLite store runs during `body` (0 for other stores).
    func countingStatements<T>(_ body: () throws -> T) rethrows -> (result: T, statements: [String]) {
        guard let store = coordinator.persistentStores.first as? SQLiteStore else { return (try body(), []) }
        let log = StatementLog()
        store.traceStatements { log.append($0) }
        defer { store.traceStatements(nil) }
        let result = try body()
        return (result, log.statements)
    }
}

/// SQL seen by a trace, from whichever thread runs it.
final class StatementLog: @unchecked Sendable {
    private let lock = NSLock()
    private var recorded: [String] = []
    func append(_ sql: String) { lock.withLock { recorded.append(sql) } }
    var statements: [String] { lock.withLock { recorded } }
    /// The statements that read (SELECT), leaving out transaction control.
    var selects: [String] { statements.filter { $0.uppercased().hasPrefix("SELECT") } }
}

extension Array where Element == String {
    /// The statements that read rows.
    var selects: [String] { filter { $0.trimmingCharacters(in: .whitespaces).uppercased().hasPrefix("SELECT") } }
}
