import Foundation
import DataStack
import Testing

/// `datastack dump`: every object once, values as SQL holds them, `--where`
/// filtering, JSON Lines and the aligned readable form.
@Suite struct DumpCommandTests {
    static let kik = InspectCommandTests.kik

    @Test func dumpOfKikPrintsEveryObjectOnceAsJSONLines() throws {
        let workspace = try ToolWorkspace()
        let store = try workspace.copyStore(Self.kik)
        let result = try Tool.run(["dump", store.path, "--json"])
        #expect(result.status == 0, "\(result.errorOutput)")
        let objects = try result.jsonLines()
        let raw = try RawSQL(store)
        let byEntity = Dictionary(grouping: objects) { $0["entity"] as? String ?? "" }
        for (name, number) in try raw.entityNumbers() {
            #expect(byEntity[name]?.count ?? 0 == (try raw.integer("SELECT count(*) FROM Z\(name.uppercased()) WHERE Z_ENT = \(number)")), "\(name)")
        }
        let ids = objects.compactMap { $0["id"] as? String }
        #expect(Set(ids).count == objects.count && objects.count == 126)

        // Values as the columns hold them, and to-ones as the URI of the row their key names.
        let users = try #require(byEntity["KikUser"])
        let jids = try raw.column("SELECT ZJID FROM ZKIKUSER ORDER BY Z_PK")
        #expect(users.map { ($0["attributes"] as? [String: Any])?["jid"] as? String } == jids)
        let chats = try raw.column("SELECT ZCHATUSER FROM ZKIKUSER ORDER BY Z_PK")
        let chatKeys = users.map { user -> String? in
            // x-coredata://<UUID>/KikChat/p<KEY>
            guard let uri = (user["relationships"] as? [String: Any])?["chatuser"] as? String, uri.contains("/KikChat/p") else { return nil }
            return uri.split(separator: "/").last.map { String($0.dropFirst()) }
        }
        #expect(chatKeys == chats)
    }

    @Test(arguments: [
        ("KikUser", "displayname BEGINSWITH \"K\"", "SELECT count(*) FROM ZKIKUSER WHERE substr(ZDISPLAYNAME, 1, 1) = 'K'"),
        ("KikMessage", "flags == 0 AND user != nil", "SELECT count(*) FROM ZKIKMESSAGE WHERE ZFLAGS = 0 AND ZUSER IS NOT NULL"),
        ("KikMessage", "user.jid CONTAINS \"kikteam\"",
         "SELECT count(*) FROM ZKIKMESSAGE m JOIN ZKIKUSER u ON u.Z_PK = m.ZUSER WHERE instr(u.ZJID, 'kikteam') > 0"),
    ])
    func dumpWhereKeepsTheObjectsThePredicateMatches(_ entity: String, _ predicate: String, _ sql: String) throws {
        let workspace = try ToolWorkspace()
        let store = try workspace.copyStore(Self.kik)
        let result = try Tool.run(["dump", store.path, "--entity", entity, "--where", predicate, "--json"])
        #expect(result.status == 0, "\(result.errorOutput)")
        let objects = try result.jsonLines()
        let expected = try RawSQL(store).integer(sql)
        #expect(objects.count == expected)
        #expect(expected > 0)
        #expect(objects.allSatisfy { $0["entity"] as? String == entity })
    }

    /// wibosco's 1,001 posts take three pages of 500: every object comes once,
    /// in key order, both with the key-ordered pages (no predicate) and with
    /// the offset pages of a predicate.
    @Test(arguments: [nil, "color != nil", "color < \"9\""])
    func dumpWalksAStoreLargerThanAPageObjectByObject(_ predicate: String?) throws {
        let workspace = try ToolWorkspace()
        let store = try workspace.copyStore(InspectCommandTests.wibosco)
        let result = try Tool.run(["dump", store.path, "--json"] + (predicate.map { ["--where", $0] } ?? []))
        #expect(result.status == 0, "\(result.errorOutput)")
        let keys = try result.jsonLines().compactMap { ($0["id"] as? String)?.split(separator: "/").last.map { String($0.dropFirst()) } }
        let condition = predicate.map { $0.replacingOccurrences(of: "color", with: "ZCOLOR").replacingOccurrences(of: "!= nil", with: "IS NOT NULL")
            .replacingOccurrences(of: "\"", with: "'") } ?? "1"
        let expected = try RawSQL(store).column("SELECT Z_PK FROM ZPOST WHERE \(condition) ORDER BY Z_PK")
        #expect(keys == expected.compactMap { $0 })
        #expect(expected.count > 500)
    }

    /// The readable form: one block per object, a header line, then the
    /// property names in a column and their values aligned after them.
    /// Strings that need escaping and doubles of every shape survive JSON Lines.
    @Test func jsonLinesCarryAnyStringAndNumberExactly() throws {
        let workspace = try ToolWorkspace()
        let modelURL = try workspace.write(HistoryCommandTests.modelContents, to: "Companies.xcdatamodel/contents").deletingLastPathComponent()
        let storeURL = workspace.url.appendingPathComponent("Companies.sqlite")
        let model = try ManagedObjectModel(contentsOf: modelURL)
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let store = try coordinator.addPersistentStore(type: .sqlite, at: storeURL)
        let names = ["quote \" backslash \\ slash /", "lines\nand\ttabs\r", "control \u{01}\u{1F}", "é 漢字 🦊", ""]
        let prices = [0.1, -2.5e-300, 1e20, 12.0, -0.0, Double.greatestFiniteMagnitude]
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        let company = try #require(model.entitiesByName["Company"])
        try context.performAndWait {
            for (name, price) in zip(names, prices) {
                let object = ManagedObject(entity: company, insertInto: context)
                try object.setValue(name, forKey: "name")
                try object.setValue(price, forKey: "price")
            }
            try context.save()
        }
        try coordinator.remove(store)

        let result = try Tool.run(["dump", storeURL.path, "--model", modelURL.path, "--json"])
        #expect(result.status == 0, "\(result.errorOutput)")
        let attributes = try result.jsonLines().compactMap { $0["attributes"] as? [String: Any] }
        var read: [String: Double] = [:]
        for values in attributes {
            if let name = values["name"] as? String { read[name] = (values["price"] as? NSNumber)?.doubleValue }
        }
        #expect(read == Dictionary(uniqueKeysWithValues: zip(names, prices)))
    }

    @Test func readableDumpHasOneAlignedBlockPerObject() throws {
        let workspace = try ToolWorkspace()
        let store = try workspace.copyStore(Self.kik)
        let result = try Tool.run(["dump", store.path, "--entity", "KikChat"])
        #expect(result.status == 0, "\(result.errorOutput)")
        let blocks = result.output.components(separatedBy: "\n\n").filter { !$0.isEmpty }
        #expect(blocks.count == 6)
        for block in blocks {
            let lines = block.split(separator: "\n").map(String.init)
            #expect(lines.first?.hasPrefix("KikChat p") == true)
            let valueColumns = Set(lines.dropFirst().map { line -> Int in
                let name = line.dropFirst(2).prefix { $0 != " " }
                return 2 + name.count + line.dropFirst(2 + name.count).prefix { $0 == " " }.count
            })
            #expect(valueColumns.count == 1, "values start at columns \(valueColumns)")
            #expect(lines.contains { $0.hasPrefix("  messages ") && $0.contains("→ [KikMessage p") })
        }
    }
}
