import Foundation
import DataStack
import Testing

/// `datastack dump --where` with a predicate nested past
/// ``FetchPredicate/maximumDepth`` or a key path past
/// ``FetchPredicate/maximumKeyPathLength``: a usage error (64) naming the
/// offset, before the store is opened, never a crash (it was 139, SIGSEGV).
@Suite struct DumpBadPredicateTests {
    @Test(arguments: [
        (String(repeating: "(", count: 3_400) + "jid == 'a'" + String(repeating: ")", count: 3_400), "offset 16", "levels deep"),
        (String(repeating: "NOT ", count: 3_200) + "jid == 'a'", "offset 120", "levels deep"),
        ("jid IN " + String(repeating: "{", count: 1_220) + "'a'" + String(repeating: "}", count: 1_220), "offset 21", "levels deep"),
        (String(repeating: "SUBQUERY(chats, $x, ", count: 1_000) + "TRUEPREDICATE" + String(repeating: ").@count > 0", count: 1_000),
         "offset 120", "levels deep"),
        // 20,000 keys: one argument may not pass 128 KiB (Linux's MAX_ARG_STRLEN).
        (Array(repeating: "user", count: 20_000).joined(separator: ".") + " == nil", "offset 320", "more than 64 keys"),
    ])
    func dumpWhereTooDeepIsAUsageErrorAtItsOffset(_ predicate: String, _ offset: String, _ reason: String) throws {
        let workspace = try ToolWorkspace()
        let store = try workspace.copyStore(InspectCommandTests.kik)
        let result = try Tool.run(["dump", store.path, "--where", predicate, "--json"])
        #expect(result.status == 64, "\(result.errorOutput.prefix(300))")
        #expect(result.errorOutput.contains(offset), "\(result.errorOutput.prefix(300))")
        #expect(result.errorOutput.contains(reason), "\(result.errorOutput.prefix(300))")
        #expect(result.output.isEmpty)
    }
}
