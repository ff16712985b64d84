import Foundation
import ObjectGraph
import Testing
import DataStackStores

/// A count leaves no read open behind it: reads after it see later saves.
@Suite struct CountSnapshotTests {
    @Test func aReadAfterACountSeesASaveMadeInBetween() throws {
        let graph = try GraphStack(.sqlite)
        let ids = try graph.saveListings([("A", 1)])
        let reader = graph.context()
        #expect(try reader.performAndWait { try reader.count(for: FetchRequest<ManagedObject>(entityName: "Listing")) } == 1)
        let writer = graph.context()
        try writer.performAndWait {
            writer.delete(try writer.existingObject(with: ids[0]))
            try writer.save()
        }
        // Not the count's SQL again (which would reset it): another statement on the same connection.
        var request = FetchRequest<ObjectID>(entityName: "Listing")
        request.resultType = .managedObjectID
        #expect(try reader.performAndWait { try reader.fetch(request) }.isEmpty)
    }
}
