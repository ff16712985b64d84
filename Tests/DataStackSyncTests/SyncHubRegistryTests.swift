import DataStackSync
import Foundation
import Testing

/// The hubs a process reaches by URL (SyncHubs). The registry is the
/// process's: each test registers schemes of its own, named for it, so tests
/// running at once never see each other's.
@Suite("Sync hub registry")
struct SyncHubRegistryTests {
    /// A scheme no other test registers.
    private static func uniqueScheme(_ name: String) -> String {
        "\(name)-\(UUID().uuidString.prefix(8).lowercased())"
    }

    /// The SyncError `body` throws; records an issue when it throws nothing or something else.
    private static func syncError(_ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) -> SyncError? {
        do {
            try body()
            Issue.record("expected a SyncError, nothing was thrown", sourceLocation: sourceLocation)
        } catch let error as SyncError {
            return error
        } catch {
            Issue.record("expected a SyncError, got \(error)", sourceLocation: sourceLocation)
        }
        return nil
    }

    @Test("a registered scheme makes its hub, from the URL given, whatever the scheme's case")
    func registeredSchemeMakesItsHub() throws {
        let scheme = Self.uniqueScheme("made")
        let hub = InMemorySyncHub()
        let asked = URLBox()
        SyncHubs.register(scheme: scheme) { url in
            asked.set(url)
            return hub
        }
        let url = try #require(URL(string: "\(scheme.uppercased())://host/hub"))
        let made = try SyncHubs.hub(for: url)
        #expect((made as? InMemorySyncHub) === hub)
        #expect(asked.get() == url)
        #expect(SyncHubs.isRegistered(scheme: scheme.uppercased()))
        #expect(SyncHubs.registeredSchemes.contains(scheme))
        try SyncHubs.validate(url)
    }

    @Test("an unknown scheme throws unknownHubScheme naming it and the registered ones, and makes nothing")
    func unknownSchemeNamesItAndTheRegisteredOnes() throws {
        let registered = Self.uniqueScheme("known")
        SyncHubs.register(scheme: registered) { _ in
            Issue.record("the factory of another scheme was called")
            return InMemorySyncHub()
        }
        let url = try #require(URL(string: "nosuchhub://host/hub"))
        let error = try #require(Self.syncError { _ = try SyncHubs.hub(for: url) })
        #expect(error.code == .unknownHubScheme)
        #expect(!error.isTransient, "retrying cannot register a scheme")
        #expect(error.message.contains("nosuchhub://"), "\(error)")
        #expect(error.message.contains("\(registered)://"), "\(error)")
        #expect(error.message.contains("PostgreSQLSyncHub.register()"), "it says how to get PostgreSQL's: \(error)")
        // validate(_:) says the same; the registered list itself may differ by then, as tests
        // running beside this one register schemes of their own in the one registry.
        let validated = try #require(Self.syncError { try SyncHubs.validate(url) })
        #expect(validated.code == error.code)
        #expect(validated.message.contains("nosuchhub://") && validated.message.contains("\(registered)://"), "\(validated)")
    }

    @Test("a URL without a scheme throws unknownHubScheme saying it has none")
    func urlWithoutSchemeIsRefused() throws {
        let relative = try #require(URL(string: "hub/path"))
        let missing = try #require(Self.syncError { _ = try SyncHubs.hub(for: relative) })
        #expect(missing.code == .unknownHubScheme)
        #expect(missing.message.contains("needs a scheme"), "\(missing)")
        // file:// is a scheme like any other: no hub is registered for it.
        let url = URL(fileURLWithPath: "hub.sqlite")
        let error = try #require(Self.syncError { _ = try SyncHubs.hub(for: url) })
        #expect(error.code == .unknownHubScheme)
        #expect(error.message.contains("file://"), "\(error)")
    }

    @Test("a factory's SyncError passes through; any other error becomes hubFailure, naming the URL without its password")
    func factoryErrors() throws {
        let offline = Self.uniqueScheme("offline")
        SyncHubs.register(scheme: offline) { _ in throw SyncError(.offline, message: "connection refused") }
        let failing = Self.uniqueScheme("failing")
        struct Refused: Error, CustomStringConvertible { var description: String { "refused by the test" } }
        SyncHubs.register(scheme: failing) { _ in throw Refused() }

        let passed = try #require(Self.syncError { _ = try SyncHubs.hub(for: URL(string: "\(offline)://h/db")!) })
        #expect(passed == SyncError(.offline, message: "connection refused"))

        let url = try #require(URL(string: "\(failing)://app:s3cret@db.example/hub?password=s3cret&sslmode=require"))
        let wrapped = try #require(Self.syncError { _ = try SyncHubs.hub(for: url) })
        #expect(wrapped.code == .hubFailure)
        #expect(wrapped.message.contains("refused by the test"), "\(wrapped)")
        #expect(wrapped.message.contains("db.example/hub"), "it names the hub: \(wrapped)")
        #expect(!wrapped.message.contains("s3cret"), "a password never reaches a message: \(wrapped)")
        #expect(wrapped.message.contains("sslmode=require"), "other parameters stay: \(wrapped)")
    }

    @Test("registering a scheme again replaces its factory")
    func registeringAgainReplaces() throws {
        let scheme = Self.uniqueScheme("again")
        let first = InMemorySyncHub()
        let second = InMemorySyncHub()
        SyncHubs.register(scheme: scheme) { _ in first }
        SyncHubs.register(scheme: scheme) { _ in second }
        let made = try SyncHubs.hub(for: try #require(URL(string: "\(scheme)://h/db")))
        #expect((made as? InMemorySyncHub) === second)
        #expect(SyncHubs.registeredSchemes.filter { $0 == scheme }.count == 1)
    }
}

/// The URL a factory was called with, read after the call.
private final class URLBox: @unchecked Sendable {
    // @unchecked Sendable: written and read under `lock`.
    private let lock = NSLock()
    private var url: URL?
    func set(_ url: URL) { lock.withLock { self.url = url } }
    func get() -> URL? { lock.withLock { url } }
}
