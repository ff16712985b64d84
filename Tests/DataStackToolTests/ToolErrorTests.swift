import Foundation
import DataStack
import Testing

/// Exit statuses and messages for bad input, help, and the promise that
/// reading commands leave the store's bytes as they were.
@Suite struct ToolErrorTests {
    @Test func aMissingFileExits66NamingIt() throws {
        let workspace = try ToolWorkspace()
        let missing = workspace.url.appendingPathComponent("nowhere.sqlite").path
        for command in ["inspect", "dump", "history"] {
            let result = try Tool.run([command, missing])
            #expect(result.status == 66, "\(command)")
            #expect(result.errorOutput.contains(missing), "\(command): \(result.errorOutput)")
        }
        let migrate = try Tool.run(["migrate", missing, "--model",
                                    ToolWorkspace.fixtures.appendingPathComponent(MigrateCommandTests.models).path])
        #expect(migrate.status == 66)
        #expect(migrate.errorOutput.contains(missing))
    }

    @Test func aTextFileExits65NamingIt() throws {
        let workspace = try ToolWorkspace()
        let text = try workspace.write(String(repeating: "this is not a database\n", count: 50), to: "notes.sqlite").path
        for command in ["inspect", "dump", "history"] {
            let result = try Tool.run([command, text])
            #expect(result.status == 65, "\(command)")
            #expect(result.errorOutput.contains(text), "\(command): \(result.errorOutput)")
        }
    }

    @Test func aBadPredicateExits64WithItsOffset() throws {
        let workspace = try ToolWorkspace()
        let store = try workspace.copyStore(InspectCommandTests.kik)
        let syntax = try Tool.run(["dump", store.path, "--entity", "KikUser", "--where", "flags > AND jid"])
        #expect(syntax.status == 64)
        #expect(syntax.errorOutput.contains("offset 8"), "\(syntax.errorOutput)")
        #expect(syntax.errorOutput.contains(store.path))
        let unknownKey = try Tool.run(["dump", store.path, "--entity", "KikUser", "--where", "flags > 1 AND nickname == \"x\""])
        #expect(unknownKey.status == 64)
        #expect(unknownKey.errorOutput.contains("offset 14") && unknownKey.errorOutput.contains("nickname"), "\(unknownKey.errorOutput)")
        #expect(syntax.output.isEmpty && unknownKey.output.isEmpty)
    }

    @Test func anUnknownCommandExits64WithUsage() throws {
        let result = try Tool.run(["frobnicate", "x.sqlite"])
        #expect(result.status == 64)
        #expect(result.errorOutput.contains("unknown command 'frobnicate'"))
        #expect(result.errorOutput.contains("usage: datastack"))
        #expect(result.output.isEmpty)
        #expect(try Tool.run([]).status == 64)
        #expect(try Tool.run(["dump"]).status == 64)
        #expect(try Tool.run(["dump", "a.sqlite", "--color"]).status == 64)
        #expect(try Tool.run(["inspect", "a.sqlite", "b.sqlite"]).status == 64)
    }

    @Test func helpPrintsUsageAndExits0() throws {
        for arguments in [["help"], ["--help"], ["dump", "--help"]] {
            let result = try Tool.run(arguments)
            #expect(result.status == 0)
            #expect(result.output.contains("usage: datastack") && result.output.contains("exit status"))
        }
    }

    /// inspect, dump and history open the store read-only: its main file and
    /// its log keep every byte.
    @Test func readingCommandsLeaveTheStoreBytesUnchanged() throws {
        let workspace = try ToolWorkspace()
        for path in [InspectCommandTests.kik, "ddg-bookmarks/stores/Bookmarks_V5.sqlite"] {
            let store = try workspace.copyStore(path)
            let files = [store.path, store.path + "-wal"].filter { FileManager.default.fileExists(atPath: $0) }
            let before = try files.map { try Data(contentsOf: URL(fileURLWithPath: $0)) }
            for arguments in [["inspect"], ["inspect", "--json"], ["dump"], ["dump", "--json"], ["history"]] {
                _ = try Tool.run([arguments[0], store.path] + arguments.dropFirst())
            }
            #expect(try files.map { try Data(contentsOf: URL(fileURLWithPath: $0)) } == before, "\(path)")
        }
    }
}
