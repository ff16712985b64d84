import DataStack
import DataStackPostgreSQL
import DataStackSync
import Foundation

// datastack-sync-peer: one replica of the convergence tests (issue #39): a stack on
// its own SQLite file, synced through a PostgreSQL hub. A line of JSON per event on
// stdout; see the package's README ("Convergence across processes").
let usage = """
    usage: datastack-sync-peer edit <store.sqlite> --hub <postgresql-url> --name NAME --seed N --count K
                                    [--sync-every M] [--interval-ms MS] [--unique]
           datastack-sync-peer sync <store.sqlite> --hub <postgresql-url> [--timeout-s S] [--unique]
           datastack-sync-peer dump <store.sqlite> [--unique]
    options of edit and sync: [--connect-timeout-ms MS] [--keepalive-s S] (the hub's connection settings)
    environment: DATASTACK_SYNC_PEER_KILL_AFTER_PUSH=N, DATASTACK_SYNC_PEER_KILL_AFTER_PULL=N (SIGKILL itself there)
    """

let arguments = Array(CommandLine.arguments.dropFirst())

/// The value after `--option`, if given.
func option(_ name: String) -> String? {
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}

guard arguments.count >= 2 else { SyncPeerOutput.fail(usage) }
let mode = arguments[0]
let storeURL = URL(fileURLWithPath: arguments[1])
let model = SyncPeerModel.make(unique: arguments.contains("--unique"))

/// The engine on the stack, through the peer's hub.
func engine(on stack: StackManager) throws -> SyncEngine {
    guard let hub = option("--hub").flatMap(URL.init(string:)) else { SyncPeerOutput.fail(usage) }
    let connection = PostgreSQLConnectionSettings(
        connectTimeout: .milliseconds(option("--connect-timeout-ms").flatMap(Int.init) ?? 2_000),
        keepAliveTimeout: .seconds(option("--keepalive-s").flatMap(Int.init) ?? 30))
    return try SyncEngine(stack: stack, options: SyncOptions(hub: SyncPeerHub(url: hub, connection: connection)))
}

Task.detached {
    do {
        let stack = StackManager()
        try await stack.setup(model: model, storeURL: storeURL)
        switch mode {
        case "edit":
            guard let name = option("--name"), let seed = option("--seed").flatMap(UInt64.init),
                  let count = option("--count").flatMap(Int.init), count > 0 else { SyncPeerOutput.fail(usage) }
            let editor = SyncPeerEditor(stack: stack, engine: try engine(on: stack), name: name, seed: seed, count: count,
                                        syncEvery: max(1, option("--sync-every").flatMap(Int.init) ?? 5),
                                        interval: .milliseconds(option("--interval-ms").flatMap(Int.init) ?? 0))
            try editor.run()
        case "sync":
            let seconds = option("--timeout-s").flatMap(Int.init) ?? 20
            try SyncPeerSync.untilQuiet(try engine(on: stack), storeURL: storeURL, deadline: .now + .seconds(seconds))
        case "dump":
            for object in try SyncPeerDump.objects(of: stack) { SyncPeerOutput.write(object) }
        default:
            SyncPeerOutput.fail(usage)
        }
        exit(0)
    } catch {
        SyncPeerOutput.fail("\(mode) \(storeURL.path): \(error)")
    }
}

// The main context runs on the main queue; Linux needs it serviced explicitly.
dispatchMain()
