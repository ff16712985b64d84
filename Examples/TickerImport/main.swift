import DataStack
import Foundation

// ticker-import: a live demonstration of the dual-coordinator stack. See the README.
let options: Options
do {
    options = try Options.parse(Array(CommandLine.arguments.dropFirst()))
} catch let error as Options.UsageError {
    let message = error.description.isEmpty ? Options.usage : "ticker-import: \(error.description)\n\n\(Options.usage)"
    FileHandle.standardError.write(Data((message + "\n").utf8))
    exit(error.description.isEmpty ? ExitStatus.stopped : ExitStatus.usage)
}

let app = TickerApp(options: options)

// Ctrl-C stops after the save in progress; a second Ctrl-C quits at once.
signal(SIGINT, SIG_IGN)
let interrupt = DispatchSource.makeSignalSource(signal: SIGINT, queue: .main)
nonisolated(unsafe) var interrupted = false
interrupt.setEventHandler {
    if interrupted { exit(ExitStatus.interrupted) }
    interrupted = true
    app.stop()
}
interrupt.resume()

Task.detached {
    do {
        try await app.start()
    } catch {
        app.fail(error)
    }
}

// The main context runs on the main queue; Linux needs it serviced explicitly,
// by dispatch or by Foundation's run loop (both work; --run-loop shows the second).
if options.runLoop {
    RunLoop.main.run()
} else {
    dispatchMain()
}
