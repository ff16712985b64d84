import Foundation
import Synchronization

/// The sync hubs a process can reach by URL, one factory per URL scheme, as
/// ``ObjectGraph/StoreType/register(_:forURLScheme:)`` does for stores: an app
/// that takes a hub URL from its user (`ticker-import --sync postgresql://…`)
/// makes the hub without naming its type, and a package that ships a hub
/// registers it.
///
/// ```swift
/// PostgreSQLSyncHub.register()   // DataStackPostgreSQLSync: postgresql:// and postgres://
/// let hub = try SyncHubs.hub(for: URL(string: "postgresql://localhost/hub")!)
/// let sync = try SyncEngine(stack: .default, options: SyncOptions(hub: hub))
/// ```
///
/// The main package registers no scheme: it has no hub that lives at a URL
/// (``InMemorySyncHub`` lives in the process), and PostgreSQL's lives in the
/// PostgreSQL package.
///
/// ## Topics
///
/// - ``register(scheme:_:)``
/// - ``hub(for:)``
/// - ``validate(_:)``
/// - ``registeredSchemes``
public enum SyncHubs {
    /// Makes the hub at a URL of the scheme it was registered for; may
    /// connect, and throws when it cannot (``SyncError`` `.offline` for a hub
    /// that cannot be reached).
    public typealias Factory = @Sendable (URL) throws -> any SyncHub

    /// The factories by lowercased scheme; registering again replaces one.
    private static let factories = Mutex<[String: Factory]>([:])

    /// Makes `factory` the maker of hubs at URLs with this scheme
    /// (`postgresql`; compared without case). Registering a scheme again
    /// replaces its factory.
    public static func register(scheme: String, _ factory: @escaping Factory) {
        factories.withLock { $0[scheme.lowercased()] = factory }
    }

    /// The schemes hubs are registered for, sorted.
    public static var registeredSchemes: [String] {
        factories.withLock { $0.keys.sorted() }
    }

    /// Whether a hub is registered for this scheme (compared without case).
    public static func isRegistered(scheme: String) -> Bool {
        factories.withLock { $0[scheme.lowercased()] != nil }
    }

    /// Checks that a hub is registered for the URL's scheme, without making one
    /// (an app checks its command line before it opens anything).
    ///
    /// - Throws: ``SyncError`` `.unknownHubScheme` naming the scheme (or its
    ///   absence) and the registered ones.
    public static func validate(_ url: URL) throws(SyncError) {
        _ = try factory(for: url)
    }

    /// Makes the hub at `url` with the factory registered for its scheme.
    ///
    /// - Throws: ``SyncError`` `.unknownHubScheme` naming the scheme and the
    ///   registered ones; the factory's ``SyncError`` as it threw it; any
    ///   other error of the factory as `.hubFailure`, naming the URL (without
    ///   its password).
    public static func hub(for url: URL) throws(SyncError) -> any SyncHub {
        let factory = try factory(for: url)
        do {
            return try factory(url)
        } catch let error as SyncError {
            throw error
        } catch {
            throw SyncError(.hubFailure, message: "the hub at \(displayString(url)) could not be made: \(error)")
        }
    }

    private static func factory(for url: URL) throws(SyncError) -> Factory {
        let registered = factories.withLock { $0 }
        let known = registered.isEmpty ? "none is registered" : "registered: " + registered.keys.sorted().map { "\($0)://" }.joined(separator: ", ")
        guard let scheme = url.scheme?.lowercased(), !scheme.isEmpty else {
            throw SyncError(.unknownHubScheme, message: "a hub URL needs a scheme (postgresql://host/database); '\(displayString(url))' has none (\(known))")
        }
        guard let factory = registered[scheme] else {
            throw SyncError(.unknownHubScheme, message: "no sync hub is registered for \(scheme):// URLs (\(known)); "
                            + "for PostgreSQL, import DataStackPostgreSQLSync and call PostgreSQLSyncHub.register() first")
        }
        return factory
    }

    /// The URL as messages and screens show it: its password, a secret, is
    /// left out, in the user part or as a `password=` parameter.
    public static func displayString(_ url: URL) -> String {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return "\(url.scheme ?? "")://…" }
        components.password = nil
        if let items = components.queryItems {
            let kept = items.filter { $0.name.lowercased() != "password" }
            components.queryItems = kept.isEmpty ? nil : kept
        }
        return components.string ?? "\(url.scheme ?? "")://…"
    }
}
