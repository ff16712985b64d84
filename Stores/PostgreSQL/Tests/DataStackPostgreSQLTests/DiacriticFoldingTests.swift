import DataStackPostgreSQL
import Foundation
import ObjectGraph
import Testing

/// Why `[d]` comparisons still throw on PostgreSQL: the SQLite store folds
/// diacritics with Foundation (`String.folding(options: .diacriticInsensitive)`,
/// its `DS_FOLD` function), and PostgreSQL's `unaccent` — the accent folding it
/// ships — answers differently on ordinary text. These tests hold both facts,
/// so that the day they stop being true they fail and the refusal can go.
@Suite("Diacritic folding", .serialized)
struct DiacriticFoldingTests {
    @Test("unaccent folds letters Foundation keeps (ß, Æ, Ø, Ł, œ, ½), so it cannot stand in for the SQLite store's [d]")
    func unaccentDisagreesWithFoundation() throws {
        let connection = try PostgreSQLConnection(url: try PostgreSQLTestServer.shared.get().makeDatabase())
        defer { connection.close() }
        _ = try connection.execute("CREATE EXTENSION IF NOT EXISTS unaccent")
        // Where they agree: accented Latin letters.
        for word in ["café", "Ångström", "Dvořák", "Tiếng Việt"] {
            let folded = try connection.execute("SELECT unaccent($1)", [.text(word)]).string(row: 0, column: 0)
            #expect(folded == word.folding(options: .diacriticInsensitive, locale: nil), "\(word)")
        }
        // Where they do not: a `[d]` on PostgreSQL would match other rows than on SQLite.
        for word in ["straße", "Æsir", "Øresund", "Łódź", "œuvre", "½"] {
            let folded = try connection.execute("SELECT unaccent($1)", [.text(word)]).string(row: 0, column: 0)
            #expect(folded != word.folding(options: .diacriticInsensitive, locale: nil), "\(word) → \(folded ?? "nil")")
        }
    }

    @Test("a fetch with [d] throws naming the operator, and without [d] the same predicate runs", arguments: ["==[d]", "BEGINSWITH[cd]", "MATCHES[d]"])
    func diacriticPredicatesThrow(_ op: String) throws {
        let model = StoreTestModel.make()
        let coordinator = try StoreKind.postgreSQL.coordinator(model, at: try StoreKind.postgreSQL.makeLocation())
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            let request = FetchRequest<ManagedObject>(entityName: "Company", predicate: try FetchPredicate(format: "name \(op) 'cafe'"))
            #expect { try context.fetch(request) } throws: { error in "\(error)".contains("[d]") }
            let plain = op.replacingOccurrences(of: "d]", with: "]").replacingOccurrences(of: "[]", with: "")
            _ = try context.fetch(FetchRequest<ManagedObject>(entityName: "Company", predicate: try FetchPredicate(format: "name \(plain) 'cafe'")))
        }
    }
}
