import Foundation
@testable import ObjectGraph
import Testing
@testable import DataStackStores

/// Batch deletes on both stores: by predicate and by IDs, results, and the
/// delete rules applied in the store (cascade, nullify, deny, no action).
@Suite struct BatchDeleteTests {
    private func delete(_ request: BatchDeleteRequest, in graph: GraphStack) throws -> BatchResult {
        let context = graph.context()
        return try context.performAndWait { try context.execute(request) }
    }

    private func deleteAll(_ entity: String, where format: String, in graph: GraphStack,
                           as resultType: BatchResultType = .objectIDs) throws -> BatchResult {
        var request = BatchDeleteRequest(fetchRequest: FetchRequest<ManagedObject>(entityName: entity, predicate: try FetchPredicate(format: format)))
        request.resultType = resultType
        return try delete(request, in: graph)
    }

    @Test(arguments: allStoreTypes)
    func aPredicateDeletesTheMatchingRowsAndCountsThem(type: StoreType) throws {
        let graph = try GraphStack(type)
        let ids = try graph.saveListings([("A", 1), ("B", 2), ("C", 3)])
        #expect(try deleteAll("Listing", where: "price >= 2", in: graph) == .objectIDs(ContextDidSave(deletedObjectIDs: [ids[1], ids[2]])))
        #expect(try graph.prices() == ["A": 1])
        #expect(try deleteAll("Listing", where: "price < 100", in: graph, as: .count) == .count(1))
        #expect(try deleteAll("Listing", where: "price < 100", in: graph, as: .statusOnly) == .statusOnly)
        #expect(try graph.count("Listing") == 0)
    }

    @Test(arguments: allStoreTypes)
    func objectIDsDeleteThoseRowsAndSkipMissingOnes(type: StoreType) throws {
        let graph = try GraphStack(type)
        let ids = try graph.saveListings([("A", 1), ("B", 2), ("C", 3)])
        var request = BatchDeleteRequest(objectIDs: [ids[0], ids[2]])
        request.resultType = .count
        #expect(try delete(request, in: graph) == .count(2))
        #expect(try delete(request, in: graph) == .count(0))
        #expect(try graph.prices() == ["B": 2])
    }

    @Test(arguments: allStoreTypes)
    func cascadeDeletesDestinationsRecursivelyAndNullifyTouchesTheOtherSide(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context()
        let (root, other, departmentID, employees) = try context.performAndWait {
            // A three-level tree under `root` (children cascade) and a node outside it.
            let root = GraphNode(context: context)
            root.name = "root"
            let other = GraphNode(context: context)
            other.name = "other"
            var parents = [root]
            for level in 1...3 {
                parents = parents.flatMap { parent in
                    (0..<2).map { index -> GraphNode in
                        let node = GraphNode(context: context)
                        node.name = "\(level).\(index)"
                        node.parent = parent
                        return node
                    }
                }
            }
            let department = Department(context: context)
            department.name = "ops"
            let employees = (0..<3).map { index -> Employee in
                let employee = Employee(context: context)
                employee.name = "e\(index)"
                employee.department = department
                return employee
            }
            try context.save()
            return (root.objectID, other.objectID, department.objectID, employees.map(\.objectID))
        }
        guard case .objectIDs(let tree) = try deleteAll("GraphNode", where: "name == 'root'", in: graph) else { return }
        #expect(tree.deletedObjectIDs.count == 15 && tree.deletedObjectIDs.contains(root))
        #expect(try graph.count("GraphNode") == 1)
        #expect(try graph.version(of: other) == 1)

        guard case .objectIDs(let staff) = try delete(BatchDeleteRequest(objectIDs: [employees[0]]).with(.objectIDs), in: graph) else { return }
        // Employee.department nullifies a to-many: the department loses a member, no column of it changes.
        #expect(staff == ContextDidSave(updatedObjectIDs: [departmentID], deletedObjectIDs: [employees[0]]))
        #expect(try graph.version(of: departmentID) == 1)
        #expect(try deleteAll("Department", where: "name == 'ops'", in: graph, as: .count) == .count(3))
        #expect(try graph.count("Employee") == 0)
    }

    @Test(arguments: allStoreTypes)
    func nullifyClearsAToOneInverseAndBumpsThatRow(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context()
        let (first, second) = try context.performAndWait {
            let first = GraphNode(context: context)
            first.name = "first"
            let second = GraphNode(context: context)
            second.name = "second"
            first.next = second
            try context.save()
            return (first.objectID, second.objectID)
        }
        let result = try deleteAll("GraphNode", where: "name == 'second'", in: graph)
        #expect(result == .objectIDs(ContextDidSave(updatedObjectIDs: [first], deletedObjectIDs: [second])))
        #expect(try graph.version(of: first) == 2)
        let check = graph.context()
        try check.performAndWait {
            let node = try #require(check.existingObject(with: first) as? GraphNode)
            #expect(node.next == nil)
        }
    }

    @Test(arguments: allStoreTypes)
    func manyToManyJoinRowsGoWithTheDeletedRow(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context()
        let author = try context.performAndWait {
            let author = Author(context: context)
            author.name = "Le Guin"
            for title in ["Earthsea", "Dispossessed"] {
                let book = Book(context: context)
                book.title = title
                book.authors = [author]
            }
            try context.save()
            return author.objectID
        }
        _ = try deleteAll("Book", where: "title == 'Earthsea'", in: graph)
        let check = graph.context()
        try check.performAndWait {
            let loaded = try #require(check.existingObject(with: author) as? Author)
            #expect(loaded.books.map(\.title) == ["Dispossessed"])
        }
        if type == .sqlite {
            #expect(try RawStore.int(graph.storeURL, "SELECT COUNT(*) FROM Z_1BOOKS") == 1)
        }
    }

    @Test(arguments: allStoreTypes)
    func denyRefusesTheWholeRequestNamingObjectAndRelationship(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context()
        let (lonely, keeper) = try context.performAndWait {
            let lonely = Owner(context: context)
            lonely.name = "lonely"
            let keeper = Owner(context: context)
            keeper.name = "keeper"
            let pet = Pet(context: context)
            pet.name = "rex"
            pet.owner = keeper
            try context.save()
            return (lonely.objectID, keeper.objectID)
        }
        let before = try graph.rows()
        #expect(throws: ObjectGraphError.deleteDenied(objectID: keeper, relationship: "Owner.pets")) {
            try deleteAll("Owner", where: "TRUEPREDICATE", in: graph)
        }
        #expect(try graph.rows() == before)
        #expect(try deleteAll("Owner", where: "name == 'lonely'", in: graph) == .objectIDs(ContextDidSave(deletedObjectIDs: [lonely])))
    }

    @Test(arguments: allStoreTypes)
    func noActionLeavesTheOtherSideAlone(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context()
        let member = try context.performAndWait {
            let team = Team(context: context)
            team.name = "red"
            let member = Member(context: context)
            member.name = "m"
            member.team = team
            try context.save()
            return member.objectID
        }
        #expect(try deleteAll("Team", where: "TRUEPREDICATE", in: graph, as: .count) == .count(1))
        #expect(try graph.version(of: member) == 1)
    }

    @Test(arguments: allStoreTypes)
    func rowsWithoutDeleteRulesLeaveNoJoinRowsBehind(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context()
        let (shelf, kept) = try context.performAndWait {
            let shelf = Shelf(context: context)
            shelf.name = "top"
            let labels = ["old", "new", "older"].map { text -> Label in
                let label = Label(context: context)
                label.text = text
                return label
            }
            shelf.labels = Set(labels)
            try context.save()
            return (shelf.objectID, labels[1].objectID)
        }
        #expect(try deleteAll("Label", where: "text BEGINSWITH 'old'", in: graph, as: .count) == .count(2))
        let reader = graph.context()
        let labels = try reader.performAndWait { try #require(reader.existingObject(with: shelf) as? Shelf).labels.map(\.objectID) }
        #expect(labels == [kept])
        #expect(try graph.version(of: shelf) == 1, "a to-many losing a member changes no column of its owner")
        if type == .sqlite, let url = graph.coordinator.persistentStores.first?.url {
            let raw = try SQLiteReference(url)
            let table = try #require(try raw.rows("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'Z!_%LABELS' ESCAPE '!'").first?.first ?? nil)
            #expect(try raw.rows("SELECT COUNT(*) FROM \(table)") == [["1"]], "the deleted labels' join rows go with them")
        }
    }
}

extension BatchDeleteRequest {
    func with(_ resultType: BatchResultType) -> BatchDeleteRequest {
        var request = self
        request.resultType = resultType
        return request
    }
}
