import Foundation
import ObjectGraph
import Testing
import DataStackStores

/// Delete rules end to end: nullify, cascade (deep and wide), deny, no action,
/// `prepareForDeletion` before the graph is torn down, cycles, and deletes made
/// in a child context.
@Suite struct DeleteRuleTests {
    private func count(_ entity: String, in graph: GraphStack) throws -> Int {
        let context = graph.context()
        return try context.performAndWait { try context.count(for: FetchRequest<ManagedObject>(entityName: entity)) }
    }

    @Test(arguments: allStoreTypes)
    func nullifyTakesTheObjectOutOfTheOtherSide(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context()
        let (departmentID, employeeID) = try context.performAndWait {
            let department = Department(context: context)
            department.name = "ops"
            let employees = ["a", "b"].map { name -> Employee in
                let employee = Employee(context: context)
                employee.name = name
                employee.department = department
                return employee
            }
            try context.save()
            return (department.objectID, employees[0].objectID)
        }
        let editor = graph.context()
        try editor.performAndWait {
            let employee = try #require(editor.existingObject(with: employeeID) as? Employee)
            let department = try #require(editor.existingObject(with: departmentID) as? Department)
            editor.delete(employee)
            #expect(department.employees.map(\.name) == ["b"])
            #expect(employee.departmentSeenWhenDeleted == .some("ops"), "prepareForDeletion saw the relationship intact")
            try editor.save()
        }
        let check = graph.context()
        try check.performAndWait {
            let department = try #require(check.existingObject(with: departmentID) as? Department)
            #expect(department.employees.map(\.name) == ["b"])
        }
        #expect(try count("Employee", in: graph) == 1)
    }

    @Test(arguments: allStoreTypes)
    func cascadeDeletesDestinationsAndCallsPrepareForDeletionFirst(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context()
        let departmentID = try context.performAndWait {
            let department = Department(context: context)
            department.name = "ops"
            for name in ["a", "b", "c"] {
                let employee = Employee(context: context)
                employee.name = name
                employee.department = department
            }
            try context.save()
            return department.objectID
        }
        let editor = graph.context()
        try editor.performAndWait {
            let department = try #require(editor.existingObject(with: departmentID) as? Department)
            let employees = department.employees
            editor.delete(department)
            #expect(department.employeesSeenWhenDeleted == 3)
            #expect(employees.allSatisfy { $0.isDeleted })
            // Each cascaded object was told while its own relationships were intact.
            #expect(employees.allSatisfy { $0.departmentSeenWhenDeleted == .some("ops") })
            #expect(editor.deletedObjects.count == 4)
            try editor.save()
        }
        #expect(try count("Department", in: graph) == 0)
        #expect(try count("Employee", in: graph) == 0)
    }

    @Test(arguments: allStoreTypes)
    func cascadeOverThousandsOfObjectsAndADeepChainNeedsNoRecursion(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context()
        let (playlistID, headID) = try context.performAndWait {
            let playlist = Playlist(context: context)
            playlist.name = "big"
            playlist.tracks = (0..<5_000).map { index in
                let track = Track(context: context)
                track.title = "t\(index)"
                return track
            }
            // A chain of 3,000 nodes, each the cascading child of the previous.
            let head = GraphNode(context: context)
            head.name = "0"
            var last = head
            for index in 1..<3_000 {
                let node = GraphNode(context: context)
                node.name = "\(index)"
                node.parent = last
                last = node
            }
            try context.save()
            return (playlist.objectID, head.objectID)
        }
        let editor = graph.context()
        let (_, statements) = try graph.countingStatements {
            try editor.performAndWait {
                editor.delete(try editor.existingObject(with: playlistID))
                #expect(editor.deletedObjects.count == 5_001)
                try editor.save()
            }
        }
        if type == .sqlite {
            #expect(statements.selects.count < 40, "the tracks' faults fire in batches: \(statements.selects.count) selects")
        }
        try editor.performAndWait {
            editor.delete(try editor.existingObject(with: headID))
            #expect(editor.deletedObjects.count == 3_000)
            try editor.save()
        }
        #expect(try count("Track", in: graph) == 0)
        #expect(try count("GraphNode", in: graph) == 0)
    }

    @Test(arguments: allStoreTypes)
    func denyFailsTheSaveNamingTheObjectAndTheRelationship(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context()
        let (ownerID, petID) = try context.performAndWait {
            let owner = Owner(context: context)
            owner.name = "olga"
            let pet = Pet(context: context)
            pet.name = "rex"
            pet.owner = owner
            try context.save()
            return (owner.objectID, pet.objectID)
        }
        try context.performAndWait {
            let owner = try #require(context.existingObject(with: ownerID) as? Owner)
            context.delete(owner)
            #expect(owner.isDeleted)
            let error = #expect(throws: ObjectGraphError.self) { try context.save() }
            guard error?.code == .validationFailed, let problems = error?.validationErrors else {
                Issue.record("expected a validation failure, got \(String(describing: error))")
                return
            }
            #expect(problems.count == 1)
            #expect(problems.first?.objectID == ownerID)
            #expect(problems.first?.key == "pets")
            #expect(problems.first?.description.contains("Owner.pets") == true)
            #expect(owner.isDeleted && context.hasChanges, "a failed save keeps the changes")

            // Once the pet is gone (deleted too, or moved), the owner can go.
            context.delete(try context.existingObject(with: petID))
            try context.save()
        }
        #expect(try count("Owner", in: graph) == 0)
        #expect(try count("Pet", in: graph) == 0)
    }

    @Test(arguments: allStoreTypes)
    func noActionLeavesTheOtherSidePointingAtTheDeletedObject(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context()
        let (teamID, memberID) = try context.performAndWait {
            let team = Team(context: context)
            team.name = "red"
            let member = Member(context: context)
            member.name = "mo"
            member.team = team
            try context.save()
            return (team.objectID, member.objectID)
        }
        try context.performAndWait {
            let team = try #require(context.existingObject(with: teamID) as? Team)
            let member = try #require(context.existingObject(with: memberID) as? Member)
            context.delete(team)
            #expect(member.team === team, "no action: the member still points at the deleted team")
            #expect(team.isDeleted && !member.isDeleted && !member.hasChanges)
            try context.save()
        }
        let check = graph.context()
        try check.performAndWait {
            let member = try #require(check.existingObject(with: memberID) as? Member)
            // The row's key still names the gone team: it reads as an inaccessible object.
            let team = try #require(member.team)
            #expect(team.objectID == teamID)
            _ = team.name                                  // fires the fault: the row is gone
            #expect(team.isDeleted)
        }
    }

    @Test(arguments: allStoreTypes)
    func cyclesAndSelfRelationshipsDeleteOnce(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context()
        let rootID = try context.performAndWait {
            let root = GraphNode(context: context)
            root.name = "root"
            let child = GraphNode(context: context)
            child.name = "child"
            child.parent = root
            let grandchild = GraphNode(context: context)
            grandchild.name = "grandchild"
            grandchild.parent = child
            // Links and a one-to-one loop across the tree; a node linked to itself.
            grandchild.links = [root, grandchild]
            root.next = grandchild
            let outsider = GraphNode(context: context)
            outsider.name = "outsider"
            outsider.links = [child]
            outsider.next = child.next
            try context.save()
            return root.objectID
        }
        let editor = graph.context()
        try editor.performAndWait {
            editor.delete(try editor.existingObject(with: rootID))
            #expect(editor.deletedObjects.count == 3)
            try editor.save()
        }
        let check = graph.context()
        try check.performAndWait {
            let remaining = try check.fetch(FetchRequest<GraphNode>())
            #expect(remaining.map(\.name) == ["outsider"])
            #expect(remaining.first?.links.isEmpty == true, "nullify removed the deleted node from the link")
        }
    }

    @Test(arguments: allStoreTypes)
    func deletesInAChildContextApplyTheirRulesAndSaveThroughTheParent(type: StoreType) throws {
        let graph = try GraphStack(type)
        let seed = graph.context()
        let departmentID = try seed.performAndWait {
            let department = Department(context: seed)
            department.name = "ops"
            let employee = Employee(context: seed)
            employee.name = "e"
            employee.department = department
            try seed.save()
            return department.objectID
        }
        let parent = graph.context()
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent)
        try child.performAndWait {
            child.delete(try child.existingObject(with: departmentID))
            #expect(child.deletedObjects.count == 2)
            try child.save()
        }
        try parent.performAndWait {
            #expect(parent.deletedObjects.count == 2)
            try parent.save()
        }
        #expect(try count("Department", in: graph) == 0)
        #expect(try count("Employee", in: graph) == 0)
    }

    @Test(arguments: allStoreTypes)
    func deletingAnUnsavedObjectLeavesNoTrace(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context()
        try context.performAndWait {
            let department = Department(context: context)
            department.name = "tmp"
            let employee = Employee(context: context)
            employee.name = "e"
            employee.department = department
            context.delete(department)
            #expect(employee.isDeleted, "cascade reaches unsaved objects too")
            #expect(context.insertedObjects.isEmpty)
            try context.save()
        }
        #expect(try count("Department", in: graph) == 0)
    }
}
