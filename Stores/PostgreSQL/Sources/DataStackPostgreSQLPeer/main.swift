import DataStack
import DataStackPostgreSQL
import Foundation

// datastack-postgresql-peer: one process of a multi-process test on a PostgreSQL
// store; see the package's README ("Tests"). A line of JSON per event on stdout.
let usage = """
    usage: datastack-postgresql-peer importer <postgresql-url> --name NAME --count N [--interval-ms MS] [--keep-going]
           datastack-postgresql-peer viewer <postgresql-url>
           datastack-postgresql-peer read <postgresql-url>
           datastack-postgresql-peer readers <postgresql-url> --contexts N --seconds S --max-readers K
           datastack-postgresql-peer relay <listen-address:port> --to ADDRESS:PORT --delay-ms MS
    options of every mode: [--connect-timeout-ms MS] [--keepalive-s S] (StoreOptions.connectionTimeout, .keepAliveTimeout)
    """

let arguments = Array(CommandLine.arguments.dropFirst())

/// `ADDRESS:PORT`, for the relay.
func endpoint(_ text: String?) -> (host: String, port: UInt16)? {
    guard let text, let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else { return nil }
    return (String(text[..<colon]), port)
}

if arguments.first == "relay", arguments.count >= 2 {
    guard let local = endpoint(arguments[1]), let upstream = endpoint(option("--to", in: arguments)),
          let delay = option("--delay-ms", in: arguments).flatMap(Int.init) else { PeerOutput.fail(usage) }
    PeerRelay.run(listeningOn: local, to: upstream, delay: .milliseconds(delay))
}

guard arguments.count >= 2, let url = URL(string: arguments[1]) else { PeerOutput.fail(usage) }
let mode = arguments[0]

/// The value after `--option`, if given.
func option(_ name: String, in arguments: [String]) -> String? {
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}

PostgreSQLStore.register()

/// The stack's default options, with the connection settings the arguments give.
let storeOptions: StoreOptions = {
    var options = StoreOptions.stackDefaults
    if let milliseconds = option("--connect-timeout-ms", in: arguments).flatMap(Int.init) {
        options.connectionTimeout = .milliseconds(milliseconds)
    }
    if let seconds = option("--keepalive-s", in: arguments).flatMap(Int.init) {
        options.keepAliveTimeout = .seconds(seconds)
    }
    return options
}()

switch mode {
case "importer":
    guard let name = option("--name", in: arguments), let count = option("--count", in: arguments).flatMap(Int.init), count > 0 else { PeerOutput.fail(usage) }
    let interval = Duration.milliseconds(option("--interval-ms", in: arguments).flatMap(Int.init) ?? 0)
    Task.detached {
        do {
            let stack = StackManager()
            try await stack.setup(model: PeerModel.make(), storeURL: url, storeType: PostgreSQLStore.storeType, options: storeOptions)
            try await PeerImporter(stack: stack, name: name, count: count, interval: interval,
                                   keepsGoing: arguments.contains("--keep-going")).run()
            exit(0)
        } catch {
            PeerOutput.fail("importer \(name): \(error)")
        }
    }
case "viewer":
    // Runs until its stdin closes or it gets SIGTERM.
    signal(SIGTERM, SIG_IGN)
    let terminate = DispatchSource.makeSignalSource(signal: SIGTERM, queue: .global())
    terminate.setEventHandler { exit(0) }
    terminate.resume()
    Thread {
        var buffer = [UInt8](repeating: 0, count: 256)
        while read(0, &buffer, buffer.count) > 0 {}
        exit(0)
    }.start()
    Task.detached {
        do {
            let stack = StackManager()
            try await stack.setup(model: PeerModel.make(), storeURL: url, storeType: PostgreSQLStore.storeType, options: storeOptions)
            let viewer = PeerViewer(stack: stack)
            viewer.start()
            // Kept for the life of the process.
            while true {
                try await Task.sleep(for: .seconds(3_600))
                withExtendedLifetime((stack, viewer, terminate)) {}
            }
        } catch {
            PeerOutput.fail("viewer: \(error)")
        }
    }
case "read":
    // A fresh coordinator, no stack: what the store holds.
    do {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: PeerModel.make())
        try coordinator.addPersistentStore(type: PostgreSQLStore.storeType, at: url, options: storeOptions)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        let seen = try context.performAndWait {
            PeerOutput.Seen(entries: try PeerModel.entryNames(in: context),
                            counter: try context.fetch(PeerModel.counterRequest).first.map(PeerModel.value(of:)),
                            token: nil)
        }
        PeerOutput.write(seen)
        exit(0)
    } catch {
        PeerOutput.fail("read: \(error)")
    }
case "readers":
    do {
        try PeerReaders.run(url: url, contexts: option("--contexts", in: arguments).flatMap(Int.init) ?? 3,
                            seconds: option("--seconds", in: arguments).flatMap(Double.init) ?? 2,
                            maximumReaderCount: option("--max-readers", in: arguments).flatMap(Int.init) ?? 5,
                            options: storeOptions)
        exit(0)
    } catch {
        PeerOutput.fail("readers: \(error)")
    }
default:
    PeerOutput.fail(usage)
}

// The main context runs on the main queue; Linux needs it serviced explicitly.
dispatchMain()
